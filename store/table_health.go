package store

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// This file is the read behind the console's tables page: every registered
// table with its current health, its last job and its newest job of each
// maintenance type, filtered, sorted and paged by the database. It is
// written once for both backends on sqlStore's seam (sqlstore.go); the one
// spelling that differs, a number read out of a JSON object when
// table_latest_metrics is written, is the dialect's jsonNumber
// (table_health_postgres.go, table_health_sqlite.go).
//
// How it stays fast at 10,000 tables with 1,000,000 metrics rows:
//
//   - Current health is table_latest_metrics (migration 0010): one row per
//     table, a copy of the newest table_snapshot_metrics row by
//     (recorded_at, policy_id, snapshot_id), the order ListSnapshotMetrics
//     and ListTableStatus use. UpsertSnapshotMetrics keeps it in the
//     transaction that writes the metrics row, so a sort by health reads
//     one row per table instead of searching the metrics history.
//   - The metrics the page sorts by are also columns of that row
//     (latestMetricColumns), taken out of the JSON when the row is written.
//     Reading them out of every table's JSON object on every request cost
//     more than the rest of the page together (BenchmarkConsolePages). A sort
//     by another metric needs a migration that adds its column.
//   - The health order needs to know which tables' last job failed or was
//     lost. It starts from the failed and lost job rows (a partial index,
//     migration 0010) and checks only those tables' newest row, instead of
//     probing the newest row of every table. The
//     status filter, which needs every table's last status, does probe
//     each table's newest row, once, through the (table_id, id) index.
//   - Pages are numbered by offset, not by a keyset cursor. No index serves
//     these orders (the health order mixes the last job's status, from
//     another table, with a sum of two columns; the filters change which
//     rows count), so every page computes and sorts the keys of all
//     matching tables anyway; an offset then only costs the rows it skips,
//     10,000 at most, and it gives the page a total and a previous page,
//     with one implementation for every sort and both NULL placements. A
//     table whose health changes between two requests may move across a
//     page boundary, so it can be missed or seen twice while paging: a page
//     is the order at the moment it was read.
//   - What is shown of the page's tables only (names, metrics, jobs) is
//     read in bulk for the page: four more statements whatever the page
//     size.

// TableSort is an order of ListTableHealth.
type TableSort string

// The orders of ListTableHealth. Each ends with the table id, ascending, so
// every order is total: while the ledger holds still, pages neither repeat
// nor skip a table. The metric sorts order by one metric of the latest
// metrics (see docs/architecture.md, Metrics); a metric that is absent or not a number
// sorts as missing.
const (
	// SortHealth, the default, puts unhealthy tables first: tables whose
	// last job failed or was lost, then by small files + delete files
	// (descending), then by manifests, then by snapshots (both descending).
	// Tables without metrics come after those with, in either order, and a
	// missing file count counts as 0. Reversed (OrderAsc), the healthiest
	// tables come first.
	SortHealth TableSort = "health"
	// SortName orders by catalog, namespace and name, in the database's
	// text order (byte order on SQLite and on a C-collated PostgreSQL).
	SortName TableSort = "name"
	// SortDataFiles orders by data-file-number.
	SortDataFiles TableSort = "data-files"
	// SortSmallFiles orders by small-file-number.
	SortSmallFiles TableSort = "small-files"
	// SortMSE orders by data-file-mse.
	SortMSE TableSort = "mse"
	// SortDeleteFiles orders by delete-file-number.
	SortDeleteFiles TableSort = "delete-files"
	// SortManifests orders by manifest-number.
	SortManifests TableSort = "manifests"
	// SortSnapshots orders by snapshot-number.
	SortSnapshots TableSort = "snapshots"
	// SortOldest orders by oldest-snapshot-age-ms: the age of the oldest
	// snapshot when the latest metrics were taken.
	SortOldest TableSort = "oldest"
	// SortLastJob orders by when the last job was created (by its id, which
	// grows with time). Tables without a job come last, in either order.
	SortLastJob TableSort = "last-job"
)

// TableSorts returns every TableSort, the default first.
func TableSorts() []TableSort {
	return []TableSort{SortHealth, SortName, SortDataFiles, SortSmallFiles, SortMSE, SortDeleteFiles,
		SortManifests, SortSnapshots, SortOldest, SortLastJob}
}

// latestMetricColumns are the columns of table_latest_metrics that hold a
// metric of metrics_value (docs/architecture.md, Metrics) as a number, NULL when the
// metric is absent or not a number: the sort keys of the tables page.
// Migration 0010 creates and fills them with the same rule as
// latestMetricsUpsertSQL.
var latestMetricColumns = []struct {
	column, key string
	sort        TableSort
}{
	{"data_file_number", "data-file-number", SortDataFiles},
	{"small_file_number", "small-file-number", SortSmallFiles},
	{"data_file_mse", "data-file-mse", SortMSE},
	{"delete_file_number", "delete-file-number", SortDeleteFiles},
	{"manifest_number", "manifest-number", SortManifests},
	{"snapshot_number", "snapshot-number", SortSnapshots},
	{"oldest_snapshot_age_ms", "oldest-snapshot-age-ms", SortOldest},
}

// SortOrder is the direction of a TableSort.
type SortOrder string

// The directions. A key that is absent (no metrics, no such metric, no job)
// sorts last in both.
const (
	OrderAsc  SortOrder = "asc"
	OrderDesc SortOrder = "desc"
)

// DefaultOrder is the direction s takes when none is asked for: ascending
// for SortName, descending for the others (unhealthiest, largest, newest
// first).
func (s TableSort) DefaultOrder() SortOrder {
	if s == SortName {
		return OrderAsc
	}
	return OrderDesc
}

// MaxTableSearch bounds TableHealthQuery.Search, in bytes.
const MaxTableSearch = 200

// TableHealthQuery selects, orders and pages ListTableHealth. Zero fields
// do not filter.
type TableHealthQuery struct {
	// Sort is the order; "" means SortHealth.
	Sort TableSort
	// Order is its direction; "" means Sort's DefaultOrder.
	Order SortOrder
	// Search keeps the tables whose catalog.namespace.name contains it,
	// ignoring case (ASCII letters only on SQLite, whose lower() folds no
	// other). At most MaxTableSearch bytes.
	Search string
	// LastStatuses keeps the tables whose last job has one of these
	// statuses; with NoJob also those that have no job at all. Both empty
	// keep every table.
	LastStatuses []JobStatus
	// NoJob keeps the tables without any job (see LastStatuses).
	NoJob bool
	// Offset is how many matching tables the page skips (not negative).
	Offset int
	// Limit is the page size: 1 to MaxQueryLimit.
	Limit int
}

// TableHealth is one table of the tables page.
type TableHealth struct {
	Table
	// Metrics is the table's latest metrics row (the newest by recorded_at,
	// policy and snapshot id), nil if none was recorded.
	Metrics *SnapshotMetrics
	// LastJob is the table's newest job row (by id), nil if none.
	LastJob *Job
	// LastJobOf maps each maintenance type that appears in the table's job
	// rows to the newest row (by id) whose types include it. Empty, not
	// nil, for a table without jobs.
	LastJobOf map[string]*Job
}

// TableHealthPage is a page of ListTableHealth.
type TableHealthPage struct {
	// Tables are the page's tables, in the query's order.
	Tables []TableHealth
	// Total is how many tables match the query's filters, on every page.
	Total int
}

// validateTableHealthQuery checks q and fills in its defaults.
func validateTableHealthQuery(q TableHealthQuery) (TableHealthQuery, error) {
	if err := validateQueryLimit(q.Limit); err != nil {
		return q, err
	}
	if q.Offset < 0 {
		return q, fmt.Errorf("%w: offset must not be negative, got %d", ErrInvalidArgument, q.Offset)
	}
	if q.Sort == "" {
		q.Sort = SortHealth
	}
	if !slices.Contains(TableSorts(), q.Sort) {
		return q, fmt.Errorf("%w: unknown table sort %q", ErrInvalidArgument, q.Sort)
	}
	switch q.Order {
	case "":
		q.Order = q.Sort.DefaultOrder()
	case OrderAsc, OrderDesc:
	default:
		return q, fmt.Errorf("%w: sort order %q is not asc or desc", ErrInvalidArgument, q.Order)
	}
	if len(q.Search) > MaxTableSearch {
		return q, fmt.Errorf("%w: table search is %d bytes, at most %d", ErrInvalidArgument, len(q.Search), MaxTableSearch)
	}
	for _, s := range q.LastStatuses {
		if !slices.Contains(JobStatuses(), s) {
			return q, fmt.Errorf("%w: unknown job status %q", ErrInvalidArgument, s)
		}
	}
	return q, nil
}

// orderKey is one key of the ORDER BY of tableHealthSQL.
type orderKey struct {
	expr string
	// desc is the key's direction in the sort's default order.
	desc bool
	// fixed keys keep their direction when the order is reversed: where
	// missing data goes, and the id that makes the order total.
	fixed bool
}

// unhealthySQL selects the table_id of every table whose last job (the
// newest by id) failed or was lost. It starts from the failed and lost rows
// (the partial index of migration 0010) and probes the newest row of only
// those tables, so the health order costs no probe for a table that never
// failed: most of them.
var unhealthySQL = fmt.Sprintf(`SELECT f.table_id FROM (
		SELECT table_id, max(id) AS id FROM table_maintenance_job WHERE status IN ('%s', '%s') GROUP BY table_id
	) f
	WHERE f.id = (SELECT max(j.id) FROM table_maintenance_job j WHERE j.table_id = f.table_id)`, StatusFailed, StatusLost)

// tableHealthSQL renders q (validated) as two statements: page (with
// pageArgs) selects the ids of one page's tables, in order; count (with
// countArgs) the number of tables the filters keep. The page's statement
// reads the tables with their latest metrics' columns, nothing per table
// unless the status filter or the last-job sort asks for it (a probe of
// the table's newest job row each).
func tableHealthSQL(d sqlDialect, q TableHealthQuery) (page string, pageArgs []any, count string, countArgs []any) {
	var args []any
	bind := func(v any) string {
		args = append(args, v)
		return d.param(len(args))
	}
	var where []string
	if q.Search != "" {
		where = append(where, `lower(t.catalog || '.' || t.namespace || '.' || t.name) LIKE lower(`+
			bind("%"+escapeLike(q.Search)+"%")+`) ESCAPE '\'`)
	}
	if len(q.LastStatuses) > 0 || q.NoJob {
		// '' stands for no job: no status is empty (JobStatuses).
		var in []string
		for _, s := range q.LastStatuses {
			in = append(in, bind(string(s)))
		}
		if q.NoJob {
			in = append(in, "''")
		}
		where = append(where, `coalesce((SELECT j.status FROM table_maintenance_job j WHERE j.table_id = t.id ORDER BY j.id DESC LIMIT 1), '') IN (`+
			strings.Join(in, ", ")+`)`)
	}
	filter := ""
	if len(where) > 0 {
		filter = " WHERE " + strings.Join(where, " AND ")
	}
	count, countArgs = "SELECT count(*) FROM maintained_table t"+filter, slices.Clone(args)

	from := " FROM maintained_table t"
	var keys []orderKey
	switch q.Sort {
	case SortHealth:
		page = "WITH unhealthy AS (" + unhealthySQL + ") "
		from += " LEFT JOIN table_latest_metrics m ON m.table_id = t.id LEFT JOIN unhealthy u ON u.table_id = t.id"
		keys = []orderKey{
			{expr: "CASE WHEN u.table_id IS NULL THEN 1 ELSE 0 END"},
			{expr: "CASE WHEN m.table_id IS NULL THEN 1 ELSE 0 END", fixed: true},
			{expr: "coalesce(m.small_file_number, 0) + coalesce(m.delete_file_number, 0)", desc: true},
			{expr: "m.manifest_number", desc: true},
			{expr: "m.snapshot_number", desc: true},
		}
	case SortName:
		keys = []orderKey{{expr: "t.catalog"}, {expr: "t.namespace"}, {expr: "t.name"}}
	case SortLastJob:
		keys = []orderKey{{expr: "(SELECT max(j.id) FROM table_maintenance_job j WHERE j.table_id = t.id)", desc: true}}
	default:
		from += " LEFT JOIN table_latest_metrics m ON m.table_id = t.id"
		for _, c := range latestMetricColumns {
			if c.sort == q.Sort {
				keys = []orderKey{{expr: "m." + c.column, desc: true}}
			}
		}
	}
	keys = append(keys, orderKey{expr: "t.id", fixed: true})

	reverse := q.Order != q.Sort.DefaultOrder()
	order := make([]string, len(keys))
	for i, k := range keys {
		desc := k.desc
		if reverse && !k.fixed {
			desc = !desc
		}
		dir := " ASC NULLS LAST"
		if desc {
			dir = " DESC NULLS LAST"
		}
		order[i] = k.expr + dir
	}
	page += "SELECT t.id" + from + filter + " ORDER BY " + strings.Join(order, ", ") +
		" LIMIT " + bind(q.Limit) + " OFFSET " + bind(q.Offset)
	return page, args, count, countArgs
}

// quoteJSONKey returns key for a JSON key literal in SQL text. Keys are
// the store's own constants (latestMetricColumns); one that needs quoting is a
// programming error.
func quoteJSONKey(key string) string {
	if strings.ContainsAny(key, `'"\$.[]`) {
		panic(fmt.Sprintf("store: metrics key %q needs quoting", key))
	}
	return key
}

// escapeLike escapes LIKE's wildcards and its escape character in s, for
// LIKE … ESCAPE '\'.
func escapeLike(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
}

// pageJobsSQL selects the id of the newest job row of every distinct types
// value (chain) of each table in list, from the (table_id, types, id) index
// alone (migration 0010). The newest row of the table and of each type are
// among these rows: a type's newest row is the newest of the chains that
// include it. It reads every row of those tables' history, which PurgeJobs
// bounds (500 per table by default); a walk over the distinct chains (a
// recursive query) would read fewer, but PostgreSQL cannot estimate its
// size and compiles it with its JIT, which cost more than the walk saved.
// The rows themselves are read by id in a second statement.
func pageJobsSQL(list string) string {
	return `SELECT max(id) FROM table_maintenance_job WHERE table_id IN ` + list + ` GROUP BY table_id, types`
}

// latestMetricsUpsertSQL makes the newest table_snapshot_metrics row of
// table p(1) its table_latest_metrics row, after UpsertSnapshotMetrics
// wrote the row (table p(1), policy p(2), snapshot p(3)) in the same
// transaction, with its latestMetricColumns taken out of the JSON. It
// reads the newest row back (one probe of the by-time index of migration
// 0009) rather than copying the written one, so a row rewritten with an
// older recorded_at hands the place to the row that is now newest. The
// update's condition keeps a newer row that a concurrent transaction
// committed first (PostgreSQL re-checks it against that row after waiting
// for its lock): a row only replaces an older one, or the row it is a
// rewrite of.
func latestMetricsUpsertSQL(d sqlDialect) string {
	cols := []string{"table_id", "policy_id", "snapshot_id", "metrics_value", "recorded_at"}
	values := slices.Clone(cols)
	var set []string
	for _, c := range cols[1:] {
		set = append(set, c+" = excluded."+c)
	}
	for _, c := range latestMetricColumns {
		cols = append(cols, c.column)
		values = append(values, d.jsonNumber("metrics_value", c.key))
		set = append(set, c.column+" = excluded."+c.column)
	}
	return `INSERT INTO table_latest_metrics (` + strings.Join(cols, ", ") + `)
		SELECT ` + strings.Join(values, ", ") + ` FROM table_snapshot_metrics
		WHERE table_id = ` + d.param(1) + `
		ORDER BY recorded_at DESC, policy_id DESC, snapshot_id DESC LIMIT 1
		ON CONFLICT (table_id) DO UPDATE SET ` + strings.Join(set, ", ") + `
		WHERE (excluded.recorded_at, excluded.policy_id, excluded.snapshot_id) >=
				(table_latest_metrics.recorded_at, table_latest_metrics.policy_id, table_latest_metrics.snapshot_id)
			OR (table_latest_metrics.policy_id = ` + d.param(2) + ` AND table_latest_metrics.snapshot_id = ` + d.param(3) + `)`
}

// ListTableHealth returns one page of the registered tables, every
// incarnation its own row, filtered and ordered by q, with their latest
// metrics, last job and newest job of each maintenance type.
// ErrInvalidArgument for a limit out of range, a negative offset, an
// unknown sort, order or status, or a search longer than MaxTableSearch.
func (s *sqlStore) ListTableHealth(ctx context.Context, q TableHealthQuery) (TableHealthPage, error) {
	q, err := validateTableHealthQuery(q)
	if err != nil {
		return TableHealthPage{}, err
	}
	r := s.b.read()
	pageSQL, pageArgs, countSQL, countArgs := tableHealthSQL(s.b, q)
	ids, err := collect(ctx, r, func(row scanner) (int64, error) {
		var id int64
		return id, row.Scan(&id)
	}, pageSQL, pageArgs...)
	if err != nil {
		return TableHealthPage{}, s.b.wrap("list table health", err)
	}
	var total int
	switch {
	case q.Offset == 0 && len(ids) < q.Limit:
		total = len(ids) // the whole list is on the page
	default:
		if err := r.queryRow(ctx, countSQL, countArgs...).Scan(&total); err != nil {
			return TableHealthPage{}, s.b.wrap("list table health: count", err)
		}
	}
	if len(ids) == 0 {
		return TableHealthPage{Tables: []TableHealth{}, Total: total}, nil
	}

	out := TableHealthPage{Tables: make([]TableHealth, len(ids)), Total: total}
	at := make(map[int64]*TableHealth, len(ids))
	for i, id := range ids {
		out.Tables[i] = TableHealth{LastJobOf: map[string]*Job{}}
		at[id] = &out.Tables[i]
	}
	list, idArgs := inList(s.b.param, 1, len(ids)), anyArgs(ids)
	tables, err := collect(ctx, r, scanTable, `SELECT `+tableCols+` FROM maintained_table WHERE id IN `+list, idArgs...)
	if err != nil {
		return TableHealthPage{}, s.b.wrap("list table health: tables", err)
	}
	for _, t := range tables {
		at[t.ID].Table = t
	}
	metrics, err := collect(ctx, r, scanMetrics, `SELECT table_id, policy_id, snapshot_id, metrics_value, recorded_at
		FROM table_latest_metrics WHERE table_id IN `+list, idArgs...)
	if err != nil {
		return TableHealthPage{}, s.b.wrap("list table health: metrics", err)
	}
	for _, m := range metrics {
		at[m.TableID].Metrics = &m
	}
	jobIDs, err := collect(ctx, r, func(row scanner) (int64, error) {
		var id int64
		return id, row.Scan(&id)
	}, pageJobsSQL(list), idArgs...)
	if err != nil {
		return TableHealthPage{}, s.b.wrap("list table health: job ids", err)
	}
	if len(jobIDs) == 0 {
		return out, nil
	}
	jobs, err := collect(ctx, r, scanJob, `SELECT `+jobCols+` FROM table_maintenance_job WHERE id IN `+
		inList(s.b.param, 1, len(jobIDs)), anyArgs(jobIDs)...)
	if err != nil {
		return TableHealthPage{}, s.b.wrap("list table health: jobs", err)
	}
	for _, j := range jobs {
		th := at[j.TableID]
		if th.LastJob == nil || j.ID > th.LastJob.ID {
			th.LastJob = &j
		}
		for _, typ := range j.Types {
			if cur := th.LastJobOf[typ]; cur == nil || j.ID > cur.ID {
				th.LastJobOf[typ] = &j
			}
		}
	}
	return out, nil
}
