# TMS — Table Maintenance Service for Apache Iceberg.
# `make help` lists the targets. The code is pure Go (binaries build with CGO_ENABLED=0);
# only the race detector of `make test` needs cgo (gcc), as Go's race runtime does on Linux.
# The go command leaves folders named testdata out of ./..., so ./testdata/ is named explicitly.

export CGO_ENABLED := 0
GO ?= go
TMS_TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/test?sslmode=disable
export TMS_TEST_DATABASE_URL
TESTDATA_DIR ?= ./tmp/testdata
SCALE ?= 1
BENCH_TIME ?= 10x
LEDGER_ROWS ?= 10000

.DEFAULT_GOAL := help

.PHONY: help build test demo bench testdata lint dbcheck clean

help: ## List the targets.
	@awk 'BEGIN {FS = ":.*## "} /^[a-z-]+:.*## / {printf "  %-10s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

build: ## Build bin/tms-runner and bin/tms-coordinator.
	$(GO) build -o bin/ ./cmd/tms-runner ./cmd/tms-coordinator

dbcheck: build ## Fail at once, saying how to fix it, when the test PostgreSQL does not answer.
	@bin/tms-coordinator ping --db "$(TMS_TEST_DATABASE_URL)" || { \
	  echo "make test needs PostgreSQL at $(TMS_TEST_DATABASE_URL) (set TMS_TEST_DATABASE_URL to use another)."; \
	  echo "  installed but stopped: pg_ctlcluster --skip-systemctl-redirect \$$(ls /etc/postgresql) main start"; \
	  echo "  not installed:         apt-get update && apt-get install -y postgresql"; \
	  exit 1; }

test: dbcheck ## Run every test with the race detector (needs PostgreSQL, see README).
	CGO_ENABLED=1 $(GO) test -race -count=1 -timeout 12m ./... ./testdata/

lint: ## go vet and a gofmt check.
	$(GO) vet ./... ./testdata/
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

testdata: build ## Build the test tables into $(TESTDATA_DIR) (SCALE=N to grow them).
	rm -rf $(TESTDATA_DIR)
	bin/tms-runner testdata --out $(TESTDATA_DIR) --scale $(SCALE)

demo: build ## Build the test tables into a temp folder and print their metrics.
	@dir=$$(mktemp -d); trap 'rm -rf "$$dir"' EXIT; \
	  bin/tms-runner testdata --out "$$dir" && \
	  bin/tms-runner sample --warehouse-dir "$$dir" --all

bench: dbcheck ## Benchmarks: sampler vs PlanFiles (ratio), ledger rows/s on PostgreSQL and SQLite.
	$(GO) test -run '^$$' -bench 'Sample|PlanFiles' -benchtime $(BENCH_TIME) -timeout 30m ./sampler/
	$(GO) test -run '^$$' -bench Ledger -benchtime $(LEDGER_ROWS)x -timeout 30m ./store/

clean: ## Remove build output and local test tables.
	rm -rf bin tmp
