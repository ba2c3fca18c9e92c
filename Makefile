# Aether Audit. `make run` serves on the embedded default database and prints
# a dev token; `make test` runs every test against a real PostgreSQL.
GO      ?= go
BIN     := bin/aether
DEV_PERMISSIONS := audit:read,audit:write,webhooks:read,webhooks:write,deliveries:redrive,exports:read,exports:write,exports:download,history:write,admin

.PHONY: all build run test e2e vet generate check-generate bench soak tidy

all: build

build:
	$(GO) build -o $(BIN) ./cmd/aether

run: build
	@TOKEN=$$(./$(BIN) token --tenant dev --project '*' --permissions $(DEV_PERMISSIONS) --subject dev --ttl 24h) || exit 1; \
	echo ""; \
	echo "Aether Audit: http://$${AETHER_ADDR:-127.0.0.1:8080}  (GraphQL at /graphql)"; \
	echo "Dev token (tenant dev, every project, all permissions, 24h):"; \
	echo ""; echo "export TOKEN=$$TOKEN"; echo ""
	./$(BIN) serve

vet:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...

test: vet
	$(GO) test -race -count=1 -timeout 20m ./...
	@echo "--- again on a private cluster started from the installed PostgreSQL binaries (the fallback where no server runs)"
	AETHER_TEST_DATABASE=private $(GO) test -count=1 -timeout 10m ./app/ ./store/...
	@echo "--- end to end: aether serve driven by the graphql-ws client (Node.js)"
	$(MAKE) --no-print-directory e2e

# End-to-end tests in e2e/ (Node.js test runner) against the built binary;
# they use DATABASE_URL if set, else the binary's embedded PostgreSQL.
e2e: build
	cd e2e && npm ci --no-audit --no-fund && AETHER_BIN=$(CURDIR)/$(BIN) node --test

# Regenerates gqlgen code from schema/*.graphqls.
generate:
	$(GO) run github.com/99designs/gqlgen generate

# Fails when generated code is stale.
check-generate: generate
	git diff --exit-code -- graph/

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
