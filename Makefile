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
BENCH_TASKS ?= 20000
# The scheduler's side-by-side anchor: a small Go program (not part of this
# repository) that drains no-op jobs with River (github.com/riverqueue/river)
# on the same PostgreSQL and prints `river_jobs_per_sec=N` last, taking
# -db, -schema, -jobs, -nodes and -workers. Point RIVER_BASELINE at a
# checkout of one; without it `make bench` prints TMS's own drain rate and
# says the ratio was skipped.
RIVER_BASELINE ?= ../shared/bench/river-baseline
DEMO_TABLES ?= tms.small_files tms.partitioned tms.deletes tms.many_snapshots tms.orphans
RSS_ROWS ?= 10000
DEMO_LISTEN ?= 127.0.0.1:8090
DEMO_TOKEN ?= demo-token
DEMO_SERVE_SECONDS ?= 10

.DEFAULT_GOAL := help

.PHONY: help build check test demo bench fuzz histories docs testdata lint dbcheck clean weed

# SeaweedFS (S3 gateway + Iceberg REST catalog) for the object-storage tests,
# built from its pinned Go module in tools/seaweedfs (about 5 minutes cold).
WEED ?= tmp/tools/weed
# weedtouch sets a filer file's modification time through SeaweedFS's gRPC
# API: the S3 orphan-cleanup tests make planted objects old with it.
WEED_TOUCH ?= tmp/tools/weedtouch

help: ## List the targets.
	@awk 'BEGIN {FS = ":.*## "} /^[a-z-]+:.*## / {printf "  %-10s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

# -s -w drop the symbol table and DWARF (tracebacks keep their function
# names and lines): 142 → 99 MB per binary.
build: ## Build bin/tms-runner and bin/tms-coordinator (stripped).
	$(GO) build -trimpath -ldflags "-s -w" -o bin/ ./cmd/tms-runner ./cmd/tms-coordinator

dbcheck: build ## Fail at once, saying how to fix it, when the test PostgreSQL does not answer.
	@bin/tms-coordinator ping --db "$(TMS_TEST_DATABASE_URL)" || { \
	  echo "make test needs PostgreSQL at $(TMS_TEST_DATABASE_URL) (set TMS_TEST_DATABASE_URL to use another)."; \
	  echo "  installed but stopped: pg_ctlcluster --skip-systemctl-redirect \$$(ls /etc/postgresql) main start"; \
	  echo "  not installed:         apt-get update && apt-get install -y postgresql"; \
	  exit 1; }

weed: $(WEED) $(WEED_TOUCH) ## Build SeaweedFS (S3 + Iceberg REST catalog for the tests) and weedtouch into tmp/tools/.

$(WEED): tools/seaweedfs/go.mod tools/seaweedfs/go.sum
	cd tools/seaweedfs && $(GO) build -o $(abspath $(WEED)) github.com/seaweedfs/seaweedfs/weed

$(WEED_TOUCH): tools/seaweedfs/go.mod tools/seaweedfs/go.sum tools/seaweedfs/weedtouch/main.go
	cd tools/seaweedfs && $(GO) build -o $(abspath $(WEED_TOUCH)) ./weedtouch

check: ## The edit loop, no service needed: go vet, gofmt, and the unit tests under -short (those that need PostgreSQL, SeaweedFS or Chromium skip; make test runs them).
	$(GO) vet ./... ./testdata/
	@out=$$(gofmt -l $$(git ls-files '*.go')) && if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) test -short -vet=off -count=1 -timeout 5m ./... ./testdata/

test: dbcheck $(WEED) $(WEED_TOUCH) ## Run every test with the race detector (needs PostgreSQL, see README; builds SeaweedFS once).
	@# -timeout is each package's hang guard, not its budget: on a loaded machine chain's -race run alone can take more than 12 min.
	CGO_ENABLED=1 $(GO) test -race -count=1 -timeout 20m ./... ./testdata/

HISTORY_SEEDS ?= 2000
histories: ## The randomized history test of the chain over HISTORY_SEEDS seeds (make test runs 50 and the regression seeds); HISTORY_SEED=N replays one, printing its story.
	TMS_HISTORY_SEEDS=$(HISTORY_SEEDS) $(if $(HISTORY_SEED),TMS_HISTORY_SEED=$(HISTORY_SEED)) \
	  $(GO) test -count=1 -timeout 180m $(if $(HISTORY_SEED),-v) -run '^TestRandomHistories$$' ./chain/

docs: ## Regenerate docs/policies.md from package policy (a test fails when it is stale).
	$(GO) test -count=1 -run '^TestReferenceIsCurrent$$' ./policy/ -update

FUZZ_TIME ?= 30s
fuzz: dbcheck ## Fuzz every parser a user feeds for FUZZ_TIME each (the checked-in corpora under */testdata/fuzz run in make test).
	$(GO) test -run '^$$' -fuzz '^FuzzPolicyContent$$' -fuzztime $(FUZZ_TIME) ./policy/
	$(GO) test -run '^$$' -fuzz '^FuzzPolicyDocument$$' -fuzztime $(FUZZ_TIME) ./policy/
	$(GO) test -run '^$$' -fuzz '^FuzzCron$$' -fuzztime $(FUZZ_TIME) ./policy/
	$(GO) test -run '^$$' -fuzz '^FuzzCommitEvents$$' -fuzztime $(FUZZ_TIME) ./coordinator/httpapi/
	$(GO) test -run '^$$' -fuzz '^FuzzConfigFile$$' -fuzztime $(FUZZ_TIME) ./coordinator/config/
	$(GO) test -run '^$$' -fuzz '^FuzzConfigValue$$' -fuzztime $(FUZZ_TIME) ./coordinator/config/
	$(GO) test -run '^$$' -fuzz '^FuzzJobSpec$$' -fuzztime $(FUZZ_TIME) ./jobspec/

lint: ## go vet and a gofmt check.
	$(GO) vet ./... ./testdata/
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

testdata: build ## Build the test tables into $(TESTDATA_DIR) (SCALE=N to grow them).
	rm -rf $(TESTDATA_DIR)
	bin/tms-runner testdata --out $(TESTDATA_DIR) --scale $(SCALE)

demo: build ## Build the test tables into a temp folder, replay the maintenance chain on each, print before/after; then serve the console on DEMO_LISTEN (Ctrl-C, or DEMO_SERVE_SECONDS off a terminal).
	@dir=$$(mktemp -d); trap 'rm -rf "$$dir"' EXIT; status=0; \
	  bin/tms-runner testdata --out "$$dir" || exit 1; \
	  echo '{"policyType": "system_iceberg_snapshot_expiration", "content": {"older-than": "1s", "retain-last": 5}}' >"$$dir/expire.json"; \
	  for t in $(DEMO_TABLES); do \
	    types=compaction,manifest-rewrite,snapshot-expiry; policy=; \
	    if [ "$$t" = tms.orphans ]; then types=$$types,orphan-cleanup; fi; \
	    if [ "$$t" = tms.many_snapshots ]; then policy="--policy $$dir/expire.json"; echo; echo "(tms.many_snapshots: demo expiry policy older-than 1s, retain-last 5)"; fi; \
	    echo; bin/tms-runner replay --warehouse-dir "$$dir" --table "$$t" --types "$$types" $$policy \
	      --ledger "sqlite://$$dir/ledger.db" || status=1; \
	  done; [ $$status = 0 ] || exit $$status; \
	  db="sqlite://$$dir/ledger.db"; printf '%s' "$(DEMO_TOKEN)" >"$$dir/token"; \
	  echo '{"schedule": {"onCommit": true}, "minIntervalMs": 0}' >"$$dir/on-commit.json"; \
	  bin/tms-coordinator policy create --db "$$db" --name demo-compaction --type compaction --content-file "$$dir/on-commit.json" >/dev/null && \
	  bin/tms-coordinator policy attach --db "$$db" --name demo-compaction --object local.tms >/dev/null || exit 1; \
	  bin/tms-coordinator serve --db "$$db" --warehouse-dir "$$dir" --listen $(DEMO_LISTEN) --log-dir "$$dir/logs" --poll-interval 1s \
	    --admin-token "file:$$dir/token" >"$$dir/serve.log" 2>&1 & pid=$$!; \
	  for t in tms.small_files tms.partitioned tms.deletes; do \
	    bin/tms-coordinator enqueue-commit --db "$$db" --warehouse-dir "$$dir" --table "local.$$t" --commit-delay 0s >/dev/null || status=1; \
	  done; \
	  sleep 5; kill -0 $$pid 2>/dev/null || { echo "serve stopped:"; cat "$$dir/serve.log"; exit 1; }; \
	  echo; echo "== the coordinator after the replay, an onCommit policy on local.tms and three commits =="; \
	  bin/tms-coordinator status --db "$$db" || status=1; \
	  echo; echo "== the plan: what would run now and why (a dry run) =="; \
	  bin/tms-coordinator plan --db "$$db" || status=1; \
	  echo; echo "Console: http://$(DEMO_LISTEN)/ui  (log in with the token: $(DEMO_TOKEN))"; \
	  if [ -t 0 ]; then echo "Ctrl-C stops it."; trap 'kill $$pid 2>/dev/null' INT TERM; wait $$pid; \
	  else echo "Not on a terminal: stopping in $(DEMO_SERVE_SECONDS) s."; sleep $(DEMO_SERVE_SECONDS); kill $$pid; wait $$pid; fi; \
	  exit $$status

bench: dbcheck build $(WEED) $(WEED_TOUCH) ## Benchmarks: sampler vs PlanFiles, ledger rows/s, scheduler vs River, policy expand vs bare insert, commit enqueues, webhook ingest, commit→claim latency, compaction ratios, verifier and read-check shares, orphan planning vs iceberg-go, chain overhead %, busy-table soak, colliding policies' scheduling delay, peak RSS of the first compaction of 200 files × RSS_ROWS rows.
	$(GO) test -run '^$$' -bench 'Sample|PlanFiles' -benchtime $(BENCH_TIME) -timeout 30m ./sampler/
	$(GO) test -run '^$$' -bench Ledger -benchtime $(LEDGER_ROWS)x -timeout 30m ./store/
	@# Scheduler drain vs River on the same PostgreSQL, each in its own schema (tms_bench, river_bench).
	@# (Output is captured, then printed: `tee /dev/stderr` would truncate a stderr redirected to a file.)
	@out=$$(bin/tms-coordinator bench --db "$(TMS_TEST_DATABASE_URL)" --schema tms_bench --tasks $(BENCH_TASKS) --nodes 2 --threads 8) && echo "$$out" && \
	  tms=$$(echo "$$out" | tail -1 | cut -d= -f2) && \
	  if [ ! -d "$(RIVER_BASELINE)" ]; then \
	    echo "tms_vs_river_ratio skipped: no River baseline at $(RIVER_BASELINE) (set RIVER_BASELINE, see the Makefile)"; \
	  else \
	    out=$$(cd $(RIVER_BASELINE) && $(GO) run . -db "$(TMS_TEST_DATABASE_URL)" -schema river_bench -jobs $(BENCH_TASKS) -nodes 2 -workers 8) && echo "$$out" && \
	    river=$$(echo "$$out" | tail -1 | cut -d= -f2) && \
	    awk -v t="$$tms" -v r="$$river" 'BEGIN { printf "tms_vs_river_ratio=%.2f\n", t / r }'; \
	  fi
	$(GO) test -run '^$$' -bench 'Expand100k|CommitEnqueue50k' -benchtime 1x -timeout 30m ./coordinator/flow/
	@# Commit ingress: webhook events/s with 64 clients; commit → claim latency with NOTIFY, then with 10 s polling.
	$(GO) test -run '^$$' -bench WebhookIngest -benchtime 20000x -timeout 10m ./coordinator/httpapi/
	$(GO) test -run '^$$' -bench CommitToClaimNotify -benchtime 500x -timeout 10m ./coordinator/ingress/
	$(GO) test -run '^$$' -bench CommitToClaimPoll10s -benchtime 12x -timeout 10m ./coordinator/ingress/
	@# 1,000 tables × 4 policies due at one instant on 2 nodes: delay from the instant to each job's start.
	$(GO) test -run '^$$' -bench CollidingPolicies1000x4 -benchtime 1x -timeout 20m ./coordinator/flow/
	@# Gravitino submitter, 8 threads against gravitinotest with 20 ms latency: submits/s, p50/p99/max ms, clean and with 3% 503s and lost answers (goal: ≥ 200/s, p99 ≤ 100 ms).
	$(GO) test -run '^$$' -bench GravitinoSubmit20ms -benchtime 2000x -timeout 10m ./coordinator/submit/
	@# Console server time over 10,000 tables and 1,000,000 metrics rows, PostgreSQL and SQLite: tables page p50/p99/max ms (goal: p99 ≤ 150 ms), table page with 10,000 samples (goal: ≤ 100 ms).
	$(GO) test -run '^$$' -bench ConsolePages -benchtime 1x -timeout 30m ./coordinator/console/
	$(GO) test -run '^$$' -bench 'Compaction200x10k|PartitionedGroups' -benchtime 4x -timeout 30m ./chain/
	$(GO) test -run '^$$' -bench OrphanPlanning -benchtime 4x -timeout 30m ./chain/
	@# Pre-commit verifier and faithful-read footer check as shares of compaction time (200×10k: see Compaction200x10k above).
	$(GO) test -run '^$$' -bench VerifierBench10k -benchtime 2x -timeout 30m ./chain/
	$(GO) test -run '^$$' -bench ChainOverhead -benchtime 3x -timeout 30m ./runner/
	@# Object storage: 1,000 small files on SeaweedFS (S3 + REST catalog), chain vs iceberg-go's RewriteDataFiles.
	$(GO) test -run '^$$' -bench 'S3SmallFiles1000|S3Compaction200x10k' -benchtime 2x -timeout 30m ./chain/
	@# The real runner binary's compaction of both S3 tables: peak RSS (bound: 300 MB) and files/s.
	$(GO) test -run '^$$' -bench S3RunnerPeakRSS -benchtime 1x -timeout 30m ./cmd/tms-runner/
	@# Busy table: a writer every 300 ms for 3 minutes against an onCommit-style chain with a 10 s cooldown (TMS_SOAK=… to change).
	$(GO) test -run '^$$' -bench BusyTableSoak -benchtime 1x -timeout 30m ./cmd/tms-runner/
	@[ -x /usr/bin/time ] || { echo "peak RSS needs GNU time: apt-get install -y time"; exit 1; }; \
	  dir=$$(mktemp -d); trap 'rm -rf "$$dir"' EXIT; \
	  bin/tms-runner testdata --out "$$dir" --recipe tms.small_files --rows-per-append $(RSS_ROWS) >/dev/null && \
	  /usr/bin/time -v bin/tms-runner replay --warehouse-dir "$$dir" --table tms.small_files --types compaction \
	    --ledger "sqlite://$$dir/ledger.db" 2>"$$dir/time.txt" | sed -n 3p && \
	  grep -E 'Maximum resident|Elapsed' "$$dir/time.txt" | sed 's/^\t*/  first compaction (200 files × $(RSS_ROWS) rows): /'

clean: ## Remove build output and local test tables.
	rm -rf bin tmp
