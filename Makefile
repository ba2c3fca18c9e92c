# Aether Audit. `make run` serves on the embedded default database and prints
# a dev token; `make test` runs every test against a real PostgreSQL.
GO      ?= go
BIN     := bin/aether
# Project the dashboard link printed by `make run` opens (`aether seed` fills it).
DASHBOARD_PROJECT ?= demo
DEV_PERMISSIONS := audit:read,audit:write,webhooks:read,webhooks:write,deliveries:redrive,exports:read,exports:write,exports:download,history:write,admin

.PHONY: all build run test chaos e2e vet generate check-generate docs check-docs bench soak tidy fuzz

all: build

build:
	$(GO) build -o $(BIN) ./cmd/aether

run: build
	@TOKEN=$$(./$(BIN) token --tenant dev --project '*' --permissions $(DEV_PERMISSIONS) --subject dev --ttl 24h) || exit 1; \
	echo ""; \
	echo "Aether Audit: http://$${AETHER_ADDR:-127.0.0.1:8080}  (GraphQL at /graphql)"; \
	echo "Dev token (tenant dev, every project, all permissions, 24h; dev is the operator tenant of /metrics and /riverui/):"; \
	echo ""; echo "export TOKEN=$$TOKEN"; echo ""; \
	echo "Dashboard (project $(DASHBOARD_PROJECT)):"; \
	echo ""; echo "http://$${AETHER_ADDR:-127.0.0.1:8080}/dashboard#token=$$TOKEN&project=$(DASHBOARD_PROJECT)"; echo ""
	AETHER_OPERATOR_TENANTS=$${AETHER_OPERATOR_TENANTS:-dev} ./$(BIN) serve

vet:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...

test: vet check-docs
	$(GO) test -race -count=1 -timeout 20m ./...
	@echo "--- again on a private cluster started from the installed PostgreSQL binaries (the fallback where no server runs)"
	AETHER_TEST_DATABASE=private $(GO) test -count=1 -timeout 10m ./app/ ./store/...
	@echo "--- end to end: aether serve driven by the graphql-ws, graphql-http and graphql-sse clients (Node.js), and the dashboard in headless Chromium"
	$(MAKE) --no-print-directory e2e

# Fault tests (chaos/): aether serve killed with SIGKILL mid-delivery and
# mid-export, PostgreSQL restarted under load, two processes with one killed
# (docs/faults.md). About 3 minutes, mostly waiting for the job rescue. They
# also run under `make test`, as part of `go test ./...`.
chaos:
	$(GO) test -count=1 -timeout 10m -v ./chaos/

# End-to-end tests in e2e/ (Node.js test runner) against the built binary;
# they use DATABASE_URL if set, else the binary's embedded PostgreSQL.
# The dashboard tests drive Debian's chromium (CHROMIUM_PATH overrides it).
e2e: build
	@command -v npm >/dev/null 2>&1 || { echo "make e2e needs Node.js 20+ with npm: run apt-get install -y nodejs npm"; exit 1; }
	@test -x "$${CHROMIUM_PATH:-/usr/bin/chromium}" || { echo "e2e: $${CHROMIUM_PATH:-/usr/bin/chromium} is missing; install it with: apt-get install -y chromium" >&2; exit 1; }
	cd e2e && npm ci --no-audit --no-fund && AETHER_BIN=$(CURDIR)/$(BIN) node --test

# Regenerates gqlgen code from schema/*.graphqls.
generate:
	$(GO) run github.com/99designs/gqlgen generate

# Fails when generated code is stale.
check-generate: generate
	git diff --exit-code -- graph/

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
	$(GO) run ./bench $(BENCH_FLAGS)

# Soak (about 5 minutes; see docs/benchmarks.md#soak): the built binary holds
# 2,000 subscribers at 200 events/s with webhooks and an export, then the
# checks run (delivery, order, memory, goroutines). Not part of `make test`.
# SOAK_FLAGS e.g. '-soak-warm-up 30s -soak-duration 1m -soak-subscribers 500'.
soak: build
	$(GO) run ./bench -scenario soak -soak-bin $(BIN) $(SOAK_FLAGS)

tidy:
	$(GO) mod tidy
