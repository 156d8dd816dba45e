package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"math"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/tms-dev/tms/coordinator/console"
	"github.com/tms-dev/tms/coordinator/flow"
	"github.com/tms-dev/tms/migrations"
	"github.com/tms-dev/tms/store"
	"github.com/tms-dev/tms/store/testdb"
)

// Shape of the console benchmark: benchTables registered tables and
// benchMetricRows rows of table_snapshot_metrics. Table id 1 (the first
// registered) has benchBigSamples samples; ids 2 to 100 have 100 each and
// the other 9,900 have 99 each: 10,000 + 99×100 + 9,900×99 = 1,000,000.
const (
	benchTables     = 10_000
	benchMetricRows = 1_000_000
	benchBigSamples = 10_000
	benchPageLimit  = 100
	// benchMetricCells is the tables page's metric columns.
	benchMetricCells = 7
	// benchSortedQuery is the sorted and filtered walk of the tables page:
	// the tables whose name contains a 5 (3,439 of them) and whose last job
	// succeeded (that of 298 tables failed or was lost), fewest small files
	// first.
	benchSortedQuery = "sort=small-files&order=asc&q=5&status=succeeded"

	// The goals of the issue, server time per page.
	goalTablesP99  = 150 * time.Millisecond
	goalBigTableMs = 100 * time.Millisecond
)

// benchMetricsPostgres bulk-inserts the metrics rows in one statement: a
// realistic sampler.Metrics object per row (every key the sampler writes),
// one sample an hour.
const benchMetricsPostgres = `
INSERT INTO table_snapshot_metrics (table_id, policy_id, snapshot_id, metrics_value, recorded_at)
SELECT t.id, 0, (t.id << 32) + s.n,
	jsonb_build_object(
		'file-number', v.data + v.del,
		'data-file-number', v.data,
		'position-delete-file-number', v.del,
		'equality-delete-file-number', 0,
		'delete-file-number', v.del,
		'small-file-number', v.small,
		'data-file-mse', (s.n % 97) * 1234567.891,
		'avg-file-size', 134217728.0 / (1 + s.n % 13),
		'total-file-size', v.data::bigint * 134217728 / (1 + s.n % 13),
		'record-count', v.data::bigint * 1000003,
		'manifest-number', 1 + s.n % 50,
		'avg-manifest-size', 8192.5 + s.n % 100,
		'snapshot-number', 1 + s.n % 30,
		'oldest-snapshot-age-ms', (s.n % 30) * 3600000,
		'partition-number', 12,
		'target-file-size-bytes', 536870912),
	timestamptz '2030-01-01 00:00:00Z' + make_interval(hours => s.n) + make_interval(secs => t.id)
FROM maintained_table t
CROSS JOIN LATERAL generate_series(1, CASE WHEN t.id = 1 THEN 10000 WHEN t.id <= 100 THEN 100 ELSE 99 END) AS s(n)
CROSS JOIN LATERAL (SELECT 100 + (s.n * 7 + t.id) % 500 AS data, (s.n + t.id) % 20 AS del, (s.n * 3 + t.id) % 200 AS small) v`

// benchBigJobs is how many jobs table 1 has: one every 20 hours of its
// 10,000 hourly samples (the table page marks them all), every tenth failed.
const benchBigJobs = 500

// benchJobsPostgres gives every table one finished job and table 1
// benchBigJobs, so the tables page joins a last job and the table page
// marks 500 and lists 50. A job of hour h runs from h:00:01 to h:05:00 from
// the snapshot sampled at hour h to that of hour h+1 (none if it failed);
// table 1's have per-type outcomes.
const benchJobsPostgres = `
INSERT INTO table_maintenance_job (table_id, policy_id, types, "trigger", status, fence,
	before_snapshot_id, after_snapshot_id, created_at, started_at, finished_at, submitter, error, outcomes)
SELECT t.id, 0, 'compaction,manifest-rewrite', 'cron', j.status, 1,
	(t.id << 32) + j.h, CASE WHEN j.status = 'succeeded' THEN (t.id << 32) + j.h + 1 END,
	timestamptz '2030-01-01 00:00:00Z' + make_interval(hours => j.h),
	timestamptz '2030-01-01 00:00:01Z' + make_interval(hours => j.h),
	timestamptz '2030-01-01 00:05:00Z' + make_interval(hours => j.h), 'local',
	CASE WHEN j.status = 'failed' THEN 'compaction: seeded failure' END,
	CASE WHEN t.id = 1 THEN jsonb_build_array(
		jsonb_build_object('type', 'compaction', 'outcome', CASE WHEN j.status = 'failed' THEN 'failed' ELSE 'done' END,
			'reason', 'data-file MSE above threshold', 'before_snapshot_id', (t.id << 32) + j.h,
			'after_snapshot_id', CASE WHEN j.status = 'succeeded' THEN (t.id << 32) + j.h + 1 END, 'duration_ms', 238000),
		jsonb_build_object('type', 'manifest-rewrite', 'outcome', 'skipped', 'reason', 'nothing to rewrite', 'duration_ms', 1500)) END
FROM maintained_table t
CROSS JOIN LATERAL (SELECT g.n, CASE WHEN t.id = 1 THEN 20 * g.n - 10 ELSE g.n END AS h,
		CASE WHEN t.id = 1 AND g.n % 10 = 5 THEN 'failed' ELSE 'succeeded' END AS status
	FROM generate_series(1, CASE WHEN t.id = 1 THEN 500 ELSE 1 END) AS g(n)) j`

// benchTableJobsPostgres gives tables 101 to 10,000 the history the
// tables page reads per maintenance type: after their compaction job an
// orphan-cleanup job (every 7th table) and a snapshot-expiry job, their
// last, which failed on every 50th table and was lost on every 97th, so
// the health order has unhealthy tables to put first. Tables 1 to 100 keep
// the one history the table pages read.
const benchTableJobsPostgres = `
INSERT INTO table_maintenance_job (table_id, policy_id, types, "trigger", status, fence,
	created_at, started_at, finished_at, submitter, error, outcomes)
SELECT t.id, 0, k.types, 'cron', s.status, 1,
	timestamptz '2030-01-01 02:00:00Z' + make_interval(mins => k.n),
	timestamptz '2030-01-01 02:00:01Z' + make_interval(mins => k.n),
	timestamptz '2030-01-01 02:05:00Z' + make_interval(mins => k.n), 'local',
	CASE WHEN s.status = 'succeeded' THEN NULL ELSE 'seeded ' || s.status END,
	CASE s.status WHEN 'succeeded' THEN jsonb_build_array(jsonb_build_object('type', k.types, 'outcome', 'done', 'duration_ms', 1200))
		WHEN 'failed' THEN jsonb_build_array(jsonb_build_object('type', k.types, 'outcome', 'failed', 'error', 'seeded failure')) END
FROM maintained_table t
CROSS JOIN (VALUES (1, 'orphan-cleanup'), (2, 'snapshot-expiry')) AS k(n, types)
CROSS JOIN LATERAL (SELECT CASE WHEN k.n = 2 AND t.id % 50 = 0 THEN 'failed' WHEN k.n = 2 AND t.id % 97 = 0 THEN 'lost'
	ELSE 'succeeded' END AS status) s
WHERE t.id > 100 AND (k.n = 2 OR t.id % 7 = 0)
ORDER BY t.id, k.n`

// The same for SQLite (times as the store writes them).
const benchMetricsSQLite = `
WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < 10000)
INSERT INTO table_snapshot_metrics (table_id, policy_id, snapshot_id, metrics_value, recorded_at)
SELECT id, 0, (id << 32) + n,
	json_object(
		'file-number', data + del,
		'data-file-number', data,
		'position-delete-file-number', del,
		'equality-delete-file-number', 0,
		'delete-file-number', del,
		'small-file-number', small,
		'data-file-mse', (n % 97) * 1234567.891,
		'avg-file-size', 134217728.0 / (1 + n % 13),
		'total-file-size', data * 134217728 / (1 + n % 13),
		'record-count', data * 1000003,
		'manifest-number', 1 + n % 50,
		'avg-manifest-size', 8192.5 + n % 100,
		'snapshot-number', 1 + n % 30,
		'oldest-snapshot-age-ms', (n % 30) * 3600000,
		'partition-number', 12,
		'target-file-size-bytes', 536870912),
	strftime('%Y-%m-%dT%H:%M:%S', '2030-01-01 00:00:00', '+' || (n * 3600 + id) || ' seconds') || '.000000Z'
FROM (SELECT t.id, s.n, 100 + (s.n * 7 + t.id) % 500 AS data, (s.n + t.id) % 20 AS del, (s.n * 3 + t.id) % 200 AS small
	FROM maintained_table t JOIN s ON s.n <= CASE WHEN t.id = 1 THEN 10000 WHEN t.id <= 100 THEN 100 ELSE 99 END)`

const benchJobsSQLite = `
WITH RECURSIVE j(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM j WHERE n < 500)
INSERT INTO table_maintenance_job (table_id, policy_id, types, "trigger", status, fence,
	before_snapshot_id, after_snapshot_id, created_at, started_at, finished_at, submitter, error, outcomes)
SELECT id, 0, 'compaction,manifest-rewrite', 'cron', status, 1,
	(id << 32) + h, CASE WHEN status = 'succeeded' THEN (id << 32) + h + 1 END,
	strftime('%Y-%m-%dT%H:%M:%S', '2030-01-01 00:00:00', '+' || h || ' hours') || '.000000Z',
	strftime('%Y-%m-%dT%H:%M:%S', '2030-01-01 00:00:01', '+' || h || ' hours') || '.000000Z',
	strftime('%Y-%m-%dT%H:%M:%S', '2030-01-01 00:05:00', '+' || h || ' hours') || '.000000Z', 'local',
	CASE WHEN status = 'failed' THEN 'compaction: seeded failure' END,
	CASE WHEN id = 1 THEN json_array(
		json_object('type', 'compaction', 'outcome', CASE WHEN status = 'failed' THEN 'failed' ELSE 'done' END,
			'reason', 'data-file MSE above threshold', 'before_snapshot_id', (id << 32) + h,
			'after_snapshot_id', CASE WHEN status = 'succeeded' THEN (id << 32) + h + 1 END, 'duration_ms', 238000),
		json_object('type', 'manifest-rewrite', 'outcome', 'skipped', 'reason', 'nothing to rewrite', 'duration_ms', 1500)) END
FROM (SELECT t.id, j.n, CASE WHEN t.id = 1 THEN 20 * j.n - 10 ELSE j.n END AS h,
		CASE WHEN t.id = 1 AND j.n % 10 = 5 THEN 'failed' ELSE 'succeeded' END AS status
	FROM maintained_table t JOIN j ON j.n <= CASE WHEN t.id = 1 THEN 500 ELSE 1 END)`

const benchTableJobsSQLite = `
INSERT INTO table_maintenance_job (table_id, policy_id, types, "trigger", status, fence,
	created_at, started_at, finished_at, submitter, error, outcomes)
SELECT id, 0, types, 'cron', status, 1,
	strftime('%Y-%m-%dT%H:%M:%S', '2030-01-01 02:00:00', '+' || n || ' minutes') || '.000000Z',
	strftime('%Y-%m-%dT%H:%M:%S', '2030-01-01 02:00:01', '+' || n || ' minutes') || '.000000Z',
	strftime('%Y-%m-%dT%H:%M:%S', '2030-01-01 02:05:00', '+' || n || ' minutes') || '.000000Z', 'local',
	CASE WHEN status = 'succeeded' THEN NULL ELSE 'seeded ' || status END,
	CASE status WHEN 'succeeded' THEN json_array(json_object('type', types, 'outcome', 'done', 'duration_ms', 1200))
		WHEN 'failed' THEN json_array(json_object('type', types, 'outcome', 'failed', 'error', 'seeded failure')) END
FROM (SELECT t.id, k.n, k.types, CASE WHEN k.n = 2 AND t.id % 50 = 0 THEN 'failed' WHEN k.n = 2 AND t.id % 97 = 0 THEN 'lost'
		ELSE 'succeeded' END AS status
	FROM maintained_table t CROSS JOIN (SELECT 1 AS n, 'orphan-cleanup' AS types UNION ALL SELECT 2, 'snapshot-expiry') k
	WHERE t.id > 100 AND (k.n = 2 OR t.id % 7 = 0))
ORDER BY id, n`

// benchRowNames finds the tables page's rows, benchNext its Next link.
var (
	benchRowNames = regexp.MustCompile(`<td><a href="/ui/tables/[^"]*">([^<]*)</a></td>`)
	benchNext     = regexp.MustCompile(`<a href="([^"]*)">Next page</a>`)
)

// BenchmarkConsolePages measures the server time of the console's pages
// (httptest.NewRecorder on Handler(): no network) over 10,000 tables and
// 1,000,000 metrics rows, seeded once per backend outside the timer:
//
//   - tables: the 100 pages of /ui?limit=100 (unhealthy first), following
//     the Next link (every table once);
//   - tables-deep: /ui?limit=100&offset=N for N in 5000, 9000, 9500, 9900,
//     10 times each;
//   - tables-sorted: every page of /ui?limit=100&benchSortedQuery, sorted
//     by a metric and filtered by name and last job, following Next;
//   - table-10k: the page of the table with 10,000 samples and 500 jobs
//     (each marked on seven plots), 20 times;
//   - table-100: the page of a table with 100 samples and one job, 50 times.
//
// Each reports p50/p99/max ms and the page size. One untimed request warms
// each page kind first. Goals (the issue): tables page p99 ≤ 150 ms; the
// table page with 10,000 samples ≤ 100 ms. Run it with -benchtime 1x: the
// body does the fixed walk itself.
func BenchmarkConsolePages(b *testing.B) {
	for _, backend := range []string{store.BackendPostgres, store.BackendSQLite} {
		b.Run(backend, func(b *testing.B) {
			st, h, seeded := seedConsoleBench(b, backend)
			get := func(b *testing.B, path string) (time.Duration, int) {
				req := httptest.NewRequest(http.MethodGet, path, nil)
				req.Header.Set("Authorization", "Bearer "+readToken)
				rec := httptest.NewRecorder()
				start := time.Now()
				h.ServeHTTP(rec, req)
				d := time.Since(start)
				if rec.Code != http.StatusOK {
					b.Fatalf("GET %s: %d %s", path, rec.Code, rec.Body.String())
				}
				return d, rec.Body.Len()
			}
			// walk follows the tables page's Next links from first, timing
			// each page; every table it lists must be new, with every metric
			// cell. It returns the tables seen.
			walk := func(b *testing.B, first string, ds *[]time.Duration, size *int) int {
				seen := map[string]bool{}
				for path := first; path != ""; {
					req := httptest.NewRequest(http.MethodGet, path, nil)
					req.Header.Set("Authorization", "Bearer "+readToken)
					rec := httptest.NewRecorder()
					start := time.Now()
					h.ServeHTTP(rec, req)
					*ds = append(*ds, time.Since(start))
					body := rec.Body.String()
					if rec.Code != http.StatusOK {
						b.Fatalf("GET %s: %d", path, rec.Code)
					}
					*size = max(*size, len(body))
					rows := benchRowNames.FindAllStringSubmatch(body, -1)
					if n := strings.Count(body, `<td class="n">`); len(rows) == 0 || n != len(rows)*benchMetricCells {
						b.Fatalf("GET %s: %d rows, %d metric cells", path, len(rows), n)
					}
					if n := strings.Count(body, "compaction: bench-compaction <span class=\"verdict-"); n != len(rows) {
						b.Fatalf("GET %s: %d rows, %d with their compaction policy's plan", path, len(rows), n)
					}
					for _, r := range rows {
						if seen[r[1]] {
							b.Fatalf("GET %s: %s again", path, r[1])
						}
						seen[r[1]] = true
					}
					path = ""
					if m := benchNext.FindStringSubmatch(body); m != nil {
						path = html.UnescapeString(m[1])
					}
				}
				return len(seen)
			}

			b.Run("tables", func(b *testing.B) {
				get(b, fmt.Sprintf("/ui?limit=%d", benchPageLimit)) // warm-up
				var ds []time.Duration
				size := 0
				for range b.N {
					if n := walk(b, fmt.Sprintf("/ui?limit=%d", benchPageLimit), &ds, &size); n != benchTables {
						b.Fatalf("the walk saw %d tables, want %d", n, benchTables)
					}
				}
				reportLatencies(b, "tables page (100 pages of 100, unhealthy first)", ds, size, goalTablesP99)
				// The store's share: the page's read alone.
				var reads []time.Duration
				for offset := 0; offset < benchTables; offset += 500 {
					start := time.Now()
					page, err := st.ListTableHealth(b.Context(), store.TableHealthQuery{Offset: offset, Limit: benchPageLimit})
					require.NoError(b, err)
					require.Len(b, page.Tables, benchPageLimit)
					reads = append(reads, time.Since(start))
				}
				slices.Sort(reads)
				b.ReportMetric(float64(reads[len(reads)/2].Microseconds())/1000, "store_p50_ms")
				b.Logf("of which the store's read (ListTableHealth): p50 %.1f ms", float64(reads[len(reads)/2].Microseconds())/1000)
				b.ReportMetric(seeded.took.Seconds(), "seed_s")
				b.Log(seeded.summary)
			})
			b.Run("tables-deep", func(b *testing.B) {
				get(b, fmt.Sprintf("/ui?limit=%d&offset=9000", benchPageLimit))
				var ds []time.Duration
				size := 0
				for range b.N {
					for _, offset := range []int{5000, 9000, 9500, 9900} {
						for range 10 {
							d, n := get(b, fmt.Sprintf("/ui?limit=%d&offset=%d", benchPageLimit, offset))
							ds, size = append(ds, d), max(size, n)
						}
					}
				}
				reportLatencies(b, "tables page (offset=5000..9900)", ds, size, goalTablesP99)
			})
			b.Run("tables-sorted", func(b *testing.B) {
				first := fmt.Sprintf("/ui?limit=%d&%s", benchPageLimit, benchSortedQuery)
				get(b, first)
				var ds []time.Duration
				size, n := 0, 0
				for range b.N {
					n = walk(b, first, &ds, &size)
				}
				reportLatencies(b, fmt.Sprintf("tables page (%s: %d tables, %d pages)", benchSortedQuery, n, len(ds)/b.N), ds, size, goalTablesP99)
			})
			for _, tc := range []struct {
				name          string
				id, n         int
				samples, jobs int
				goal          time.Duration
			}{
				{"table-10k", 1, 20, benchBigSamples, benchBigJobs, goalBigTableMs},
				{"table-100", 2, 50, 100, 1, 0},
			} {
				b.Run(tc.name, func(b *testing.B) {
					path := fmt.Sprintf("/ui/tables/%d", tc.id)
					get(b, path)
					// Every job is marked on the timeline and the five charts.
					req := httptest.NewRequest(http.MethodGet, path, nil)
					req.Header.Set("Authorization", "Bearer "+readToken)
					rec := httptest.NewRecorder()
					h.ServeHTTP(rec, req)
					if n := strings.Count(rec.Body.String(), `class="job`); n != 7*tc.jobs {
						b.Fatalf("GET %s: %d job markers, want %d", path, n, 7*tc.jobs)
					}
					var ds []time.Duration
					size := 0
					for range b.N {
						for range tc.n {
							d, n := get(b, path)
							ds, size = append(ds, d), max(size, n)
						}
					}
					reportLatencies(b, fmt.Sprintf("table page (%d samples)", tc.samples), ds, size, tc.goal)
					// The store's share: the page's three reads alone.
					var reads []time.Duration
					for range tc.n {
						start := time.Now()
						ms, err := st.ListSnapshotMetrics(b.Context(), int64(tc.id))
						require.NoError(b, err)
						require.Len(b, ms, tc.samples)
						_, err = st.ListJobs(b.Context(), int64(tc.id), console.JobHistory)
						require.NoError(b, err)
						jobs, err := st.QueryJobs(b.Context(), store.JobQuery{TableID: int64(tc.id),
							Until: ms[len(ms)-1].RecordedAt.Add(time.Millisecond), Limit: console.JobMarks})
						require.NoError(b, err)
						require.Len(b, jobs, tc.jobs)
						reads = append(reads, time.Since(start))
					}
					slices.Sort(reads)
					p50 := reads[len(reads)/2]
					b.ReportMetric(float64(p50.Microseconds())/1000, "store_p50_ms")
					b.Logf("of which the store's reads (ListSnapshotMetrics, ListJobs, QueryJobs): p50 %.1f ms; the rest is decoding, charting and rendering",
						float64(p50.Microseconds())/1000)
				})
			}
		})
	}
}

// seedConsoleBench migrates a fresh database of backend, registers
// benchTables tables and bulk-loads benchMetricRows metrics rows, and
// returns the console's handler over it.
// A parent benchmark's log is not printed, so the tables sub-benchmark
// logs the returned seeding summary and reports the time as seed_s.
func seedConsoleBench(b *testing.B, backend string) (store.Store, http.Handler, seedInfo) {
	ctx := context.Background()
	log := zap.NewNop()
	start := time.Now()
	dbURL := testdb.SQLiteURL(b)
	if backend == store.BackendPostgres {
		dbURL = testdb.PostgresURL(b)
	}
	_, err := store.Migrate(ctx, dbURL, log)
	require.NoError(b, err)
	st, err := store.Open(ctx, dbURL, log)
	require.NoError(b, err)
	b.Cleanup(func() { _ = st.Close() })
	refs := make([]store.TableRef, benchTables)
	for i := range refs {
		refs[i] = store.TableRef{Catalog: "bench", Namespace: "db.sales", Name: fmt.Sprintf("t%05d", i), UUID: fmt.Sprintf("uuid-%05d", i)}
	}
	n, err := st.RegisterTables(ctx, refs)
	require.NoError(b, err)
	require.Equal(b, benchTables, n)
	t1, err := st.FindTable(ctx, "bench", "db.sales", "t00000")
	require.NoError(b, err)
	require.EqualValues(b, 1, t1.ID, "the seeding SQL expects table ids 1 to %d", benchTables)
	registered := time.Since(start)

	exec := testdb.PostgresExec
	metricsSQL, jobsSQL := benchMetricsPostgres, benchJobsPostgres
	tableJobsSQL := benchTableJobsPostgres
	if backend == store.BackendSQLite {
		exec = testdb.SQLiteExec
		metricsSQL, jobsSQL = benchMetricsSQLite, benchJobsSQLite
		tableJobsSQL = benchTableJobsSQLite
	}
	exec(b, dbURL, metricsSQL)
	exec(b, dbURL, jobsSQL)
	exec(b, dbURL, tableJobsSQL)
	// table_latest_metrics derives from the metrics rows just loaded: drop
	// what migration 0010 made and run it again over them, as the upgrade
	// of a database holding them would (UpsertSnapshotMetrics keeps it in
	// service).
	backfill := time.Now()
	for _, drop := range []string{`DROP INDEX table_maintenance_job_types_idx`, `DROP INDEX table_maintenance_job_failed_idx`,
		`DROP TABLE table_latest_metrics`} {
		exec(b, dbURL, drop)
	}
	exec(b, dbURL, migration(b, backend, "table_latest_metrics").SQL)
	backfilled := time.Since(backfill)
	exec(b, dbURL, "ANALYZE") // as autovacuum (PostgreSQL) or the operator would have by then
	seeded := time.Since(start)

	big, err := st.ListSnapshotMetrics(ctx, 1)
	require.NoError(b, err)
	require.Len(b, big, benchBigSamples)
	small, err := st.ListSnapshotMetrics(ctx, 2)
	require.NoError(b, err)
	require.Len(b, small, 100)
	// Every row must read back through the store as the console reads it,
	// and table_latest_metrics hold what ListTableStatus finds newest.
	var total int
	latest := map[int64]int64{}
	for after := int64(0); ; {
		page, err := st.ListTableStatus(ctx, after, store.MaxQueryLimit)
		require.NoError(b, err)
		if len(page) == 0 {
			break
		}
		for _, ts := range page {
			require.NotNil(b, ts.Metrics, "table %d", ts.ID)
			require.NotNil(b, ts.LastJob, "table %d", ts.ID)
			latest[ts.ID] = ts.Metrics.SnapshotID
			total++
		}
		after = page[len(page)-1].ID
	}
	require.Equal(b, benchTables, total)
	for offset := 0; offset < benchTables; offset += store.MaxQueryLimit {
		page, err := st.ListTableHealth(ctx, store.TableHealthQuery{Sort: store.SortName, Offset: offset, Limit: store.MaxQueryLimit})
		require.NoError(b, err)
		require.Equal(b, benchTables, page.Total)
		for _, th := range page.Tables {
			require.NotNil(b, th.Metrics, "table %d", th.ID)
			require.Equal(b, latest[th.ID], th.Metrics.SnapshotID, "table %d", th.ID)
		}
	}
	jobs := benchTables + benchBigJobs - 1 + benchTables - 100 // a snapshot-expiry job on tables 101 to 10,000
	for id := 101; id <= benchTables; id++ {
		if id%7 == 0 {
			jobs++ // and an orphan-cleanup job on every 7th
		}
	}
	summary := fmt.Sprintf("%s: seeded %d tables (RegisterTables %.1fs) and %d metrics rows + %d job rows in %.1fs (migration 0010 over them: %.1fs)",
		backend, benchTables, registered.Seconds(), benchMetricRows, jobs, seeded.Seconds(), backfilled.Seconds())

	// Two policies over every table, as serve plans them: an hourly
	// compaction (its policy-expand row synced) and an onCommit expiry.
	for _, p := range []struct{ name, typ, content, ns string }{
		{"bench-compaction", "system_iceberg_compaction", `{"schedule": {"crontab": "@hourly"}}`, ""},
		{"bench-expiry", "system_iceberg_snapshot_expiration", `{"schedule": {"onCommit": true}, "retain-last": 5}`, "db"},
	} {
		created, err := st.CreatePolicy(ctx, store.NewPolicy{Name: p.name, Type: p.typ, Enabled: true, Content: json.RawMessage(p.content)})
		require.NoError(b, err)
		obj := store.PolicyObject{Level: store.LevelCatalog, Catalog: "bench"}
		if p.ns != "" {
			obj = store.PolicyObject{Level: store.LevelNamespace, Catalog: "bench", Namespace: p.ns}
		}
		_, _, err = st.Attach(ctx, p.name, obj)
		require.NoError(b, err)
		require.NoError(b, flow.SyncPolicyTask(ctx, st, created, time.Now()))
	}
	fl, err := flow.NewFlow(st, nil, flow.FlowConfig{DBURL: "unused://the plan submits nothing", Log: log})
	require.NoError(b, err)
	c, err := console.New(console.Config{Store: st, AdminToken: adminToken, ReadToken: readToken, Log: log, Plan: fl.Plan})
	require.NoError(b, err)
	return st, c.Handler(), seedInfo{took: seeded, summary: summary}
}

// migration returns backend's migration named name.
func migration(b *testing.B, backend, name string) migrations.Migration {
	ms, err := migrations.All(backend)
	require.NoError(b, err)
	for _, m := range ms {
		if m.Name == name {
			return m
		}
	}
	b.Fatalf("no migration %q", name)
	return migrations.Migration{}
}

// seedInfo is how long seeding took, and a line saying so.
type seedInfo struct {
	took    time.Duration
	summary string
}

// reportLatencies reports p50/p99/max ms and the largest page's size, and
// logs them with the goal (0 = none).
func reportLatencies(b *testing.B, what string, ds []time.Duration, size int, goal time.Duration) {
	slices.Sort(ds)
	pct := func(q float64) time.Duration {
		return ds[max(0, int(math.Ceil(q*float64(len(ds))))-1)]
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	p50, p99, mx := pct(0.50), pct(0.99), ds[len(ds)-1]
	b.ReportMetric(ms(p50), "p50_ms")
	b.ReportMetric(ms(p99), "p99_ms")
	b.ReportMetric(ms(mx), "max_ms")
	b.ReportMetric(float64(size)/1024, "page_KiB")
	verdict := "no goal"
	if goal > 0 {
		verdict = fmt.Sprintf("goal p99 ≤ %d ms: met", goal.Milliseconds())
		if p99 > goal {
			verdict = fmt.Sprintf("goal p99 ≤ %d ms: MISSED", goal.Milliseconds())
		}
	}
	b.Logf("%s: %d requests, p50 %.1f ms, p99 %.1f ms, max %.1f ms, page %.0f KiB; %s",
		what, len(ds), ms(p50), ms(p99), ms(mx), float64(size)/1024, verdict)
}
