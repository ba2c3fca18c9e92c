# Aether Audit. `make run` serves on the embedded default database and prints
# a dev token; `make test` runs every test against a real PostgreSQL.
GO      ?= go
BIN     := bin/aether
# Project the dashboard link printed by `make run` opens (`aether seed` fills it).
DASHBOARD_PROJECT ?= demo
DEV_PERMISSIONS := audit:read,audit:write,webhooks:read,webhooks:write,deliveries:redrive,exports:read,exports:write,exports:download,history:write,streams:read,streams:write,admin

.PHONY: all build run run-deps test test-deps test-examples chaos e2e vet generate check-generate sqlc check-sqlc graphiql check-graphiql docs check-docs bench soak tidy fuzz

all: build

build:
	$(GO) build -o $(BIN) ./cmd/aether

run: build run-deps
	@TOKEN=$$(./$(BIN) token --tenant dev --project '*' --permissions $(DEV_PERMISSIONS) --subject dev --ttl 24h) || exit 1; \
	echo ""; \
	echo "Aether Audit: http://$${AETHER_ADDR:-127.0.0.1:8080}  (GraphQL at /graphql)"; \
	echo "Dev token (tenant dev, every project, all permissions, 24h; dev is the operator tenant of /metrics and /riverui/):"; \
	echo ""; echo "export TOKEN=$$TOKEN"; echo ""; \
	echo "Dashboard (project $(DASHBOARD_PROJECT)):"; \
	echo ""; echo "http://$${AETHER_ADDR:-127.0.0.1:8080}/dashboard#token=$$TOKEN&project=$(DASHBOARD_PROJECT)"; echo ""; \
	echo "GraphiQL:"; \
	echo ""; echo "http://$${AETHER_ADDR:-127.0.0.1:8080}/graphiql#token=$$TOKEN&project=$(DASHBOARD_PROJECT)"; echo ""
	AETHER_OPERATOR_TENANTS=$${AETHER_OPERATOR_TENANTS:-dev} ./$(BIN) serve --dev

vet:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...

# What the two commands need beyond Go, on a fresh machine of this kind
# (Debian): `make run` needs PostgreSQL's server binaries (the embedded
# database); `make test` also needs Node.js 20+ with npm (e2e/) and Chromium
# (the dashboard and GraphiQL tests). As root they install what is missing
# with apt-get; otherwise they stop with the one command to run.
CHECK_POSTGRES = { command -v pg_ctl >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1 || echo postgresql; }
CHECK_NODE     = { command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 || echo nodejs npm; }
CHECK_CHROMIUM = { test -x "$${CHROMIUM_PATH:-/usr/bin/chromium}" || echo chromium; }
# $(call install-missing,CHECKS,WHAT): a recipe line that installs the
# Debian packages CHECKS name as missing, for WHAT.
define install-missing
@missing=$$({ $(1); } | tr '\n' ' ' | sed 's/ *$$//'); \
if [ -n "$$missing" ]; then \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "--- installing what $(2) needs: $$missing"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null || exit 1; \
	else \
		echo "$(2) needs: $$missing. Install them with:"; echo ""; \
		echo "    sudo apt-get install -y $$missing"; echo ""; exit 1; \
	fi; \
fi
endef

run-deps:
	$(call install-missing,$(CHECK_POSTGRES),make run)

test-deps:
	$(call install-missing,$(CHECK_POSTGRES); $(CHECK_NODE); $(CHECK_CHROMIUM),make test)
	@major=$$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0); \
	if [ "$$major" -lt 20 ]; then echo "make test needs Node.js 20 or later (found $$(node --version 2>/dev/null))"; exit 1; fi
	@# The real S3 server of the export and stream tests (SeaweedFS's weed),
	@# built once into a cache outside the repository (internal/seaweed).
	@bin=$$($(GO) run ./internal/seaweed/cmd/weed-binary) || { echo "make test needs SeaweedFS's weed (see above)"; exit 1; }; \
	echo "--- the S3 server of the tests: $$bin"

test: test-deps vet check-docs check-sqlc check-generate
	$(GO) test -race -count=1 -timeout 20m ./...
	@echo "--- again on a private cluster started from the installed PostgreSQL binaries (the fallback where no server runs)"
	AETHER_TEST_DATABASE=private $(GO) test -count=1 -timeout 10m ./app/ ./store/...
	@echo "--- end to end: aether serve driven by the graphql-ws, graphql-http and graphql-sse clients (Node.js), and the dashboard in headless Chromium"
	$(MAKE) --no-print-directory e2e

# The offline verifiers: `aether verify` and the Node.js example
# (examples/verify-node) on the same good and tampered exports; they must
# agree. Part of `go test ./...` above too. AETHER_VERIFY_EXPORT (with
# AETHER_VERIFY_CHECKPOINT and AETHER_VERIFY_KEYS) adds a real export.
test-examples: test-deps
	$(GO) test -count=1 -run 'TestNodeVerifierAgrees' -v ./verify/

# Fault tests (chaos/): aether serve killed with SIGKILL mid-delivery and
# mid-export, PostgreSQL restarted under load, two processes with one killed
# (docs/faults.md). About 3 minutes, mostly waiting for the job rescue. They
# also run under `make test`, as part of `go test ./...`.
chaos:
	$(GO) test -count=1 -timeout 10m -v ./chaos/

# End-to-end tests in e2e/ (Node.js test runner) against the built binary;
# they use DATABASE_URL if set, else the binary's embedded PostgreSQL.
# The dashboard tests drive Debian's chromium (CHROMIUM_PATH overrides it);
# test-deps installs what is missing.
e2e: build test-deps
	cd e2e && npm ci --no-audit --no-fund && AETHER_BIN=$(CURDIR)/$(BIN) node --test

# Regenerates gqlgen code from schema/*.graphqls, the GraphiQL bundle and
# the sqlc code of store/queries/*.sql.
generate: graphiql sqlc
	$(GO) run github.com/99designs/gqlgen generate

# Fails when generated code is stale.
check-generate: generate
	@git diff --exit-code --stat -- graph/ web/graphiql/ store/dbsqlc/ || { echo "generated code is stale: run make generate and commit it"; exit 1; }
	@test -z "$$(git status --porcelain -- graph/ web/graphiql/ store/dbsqlc/)" || { git status --short -- graph/ web/graphiql/ store/dbsqlc/; echo "generated files are not committed: run make generate and commit them"; exit 1; }

# sqlc, pinned here rather than in go.mod: `go run pkg@version` builds it in
# its own module graph, so its large dependency tree (MySQL, SQLite and
# WebAssembly parsers, CEL, ...) never enters the service's go.mod. The first
# run builds it (a few minutes); later runs take it from the build cache.
SQLC := $(GO) run github.com/sqlc-dev/sqlc/cmd/sqlc@v1.31.1

# Compiles store/queries/*.sql against migrations/ into store/dbsqlc/
# (sqlc.yaml).
sqlc:
	$(SQLC) generate

# Fails when store/dbsqlc/ is not what make sqlc generates (needs only Go,
# unlike check-generate, which also rebuilds GraphiQL with npm).
check-sqlc:
	@$(SQLC) diff || { echo "store/dbsqlc/ is stale: run make sqlc and commit it"; exit 1; }
	@for f in store/dbsqlc/*.sql.go; do q=store/queries/$$(basename $$f .go); \
		test -f $$q || { echo "$$f has no $$q: run make sqlc and delete it"; exit 1; }; done

# Rebuilds web/graphiql/ (the GraphiQL IDE at /graphiql, committed and
# embedded) from web/graphiql-src/: npm ci installs exactly the versions of
# package-lock.json from the npm registry (install scripts off: esbuild runs
# from its platform package), then build.mjs bundles them with esbuild.
# The same lock file gives the same bytes (docs/graphiql.md).
graphiql:
	@command -v npm >/dev/null 2>&1 || { echo "make graphiql needs Node.js 20+ with npm: run apt-get install -y nodejs npm"; exit 1; }
	cd web/graphiql-src && npm ci --ignore-scripts --no-audit --no-fund && node build.mjs

# Fails when the committed bundle differs from what make graphiql builds.
check-graphiql: graphiql
	git diff --exit-code -- web/graphiql/
	@test -z "$$(git status --porcelain -- web/graphiql/)" || { git status --short -- web/graphiql/; echo "web/graphiql/ is stale: run make graphiql and commit it"; exit 1; }

# Regenerates the API reference (docs/api-reference.md) from schema/*.graphqls
# and copies the OpenAPI document the server embeds to docs/openapi.json.
docs:
	$(GO) run ./cmd/schemadoc
	cp server/openapi/openapi.json docs/openapi.json

# Fails when docs/api-reference.md or docs/openapi.json is stale ("run make docs").
check-docs:
	$(GO) run ./cmd/schemadoc -check
	@cmp -s server/openapi/openapi.json docs/openapi.json || { echo "docs/openapi.json differs from server/openapi/openapi.json: run make docs"; exit 1; }

# Runs every Go fuzz target (func FuzzXxx in a _test.go file), one after
# the other, each for FUZZTIME; new failing inputs land in the package's
# testdata/fuzz/FuzzXxx. See docs/fuzzing.md.
FUZZTIME ?= 30s
fuzz:
	@set -e; for file in $$(grep -rl --include='*_test.go' '^func Fuzz' . | sort); do \
		pkg=$$(dirname $$file); \
		for name in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' $$file); do \
			echo "--- $$name ($$pkg) for $(FUZZTIME)"; \
			$(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) $$pkg; \
		done; \
	done

bench:
	$(GO) run ./internal/bench $(BENCH_FLAGS)

# Soak (about 5 minutes; see docs/benchmarks.md#soak): the built binary holds
# 2,000 subscribers at 200 events/s with webhooks and an export, then the
# checks run (delivery, order, memory, goroutines). Not part of `make test`.
# SOAK_FLAGS e.g. '-soak-warm-up 30s -soak-duration 1m -soak-subscribers 500'.
soak: build
	$(GO) run ./internal/bench -scenario soak -soak-bin $(BIN) $(SOAK_FLAGS)

tidy:
	$(GO) mod tidy
