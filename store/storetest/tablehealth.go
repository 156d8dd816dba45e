package storetest

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/store"
)

// exerciseTableHealth runs the conformance tests of
// store.LedgerQueries.ListTableHealth (the console's tables page). open is
// as for Exercise.
func exerciseTableHealth(t *testing.T, open func(t *testing.T) store.Store) {
	t.Helper()
	setup := func(t *testing.T) *healthFixture {
		t.Helper()
		b := &bundle{s: open(t), ctx: t.Context()}
		return &healthFixture{bundle: b, q: b.s, byID: map[int64]string{}}
	}
	t.Run("HealthOrder", func(t *testing.T) {
		t.Parallel()
		exerciseHealthOrder(t, setup(t))
	})
	t.Run("Sorts", func(t *testing.T) {
		t.Parallel()
		exerciseHealthSorts(t, setup(t))
	})
	t.Run("Filters", func(t *testing.T) {
		t.Parallel()
		exerciseHealthFilters(t, setup(t))
	})
	t.Run("Pages", func(t *testing.T) {
		t.Parallel()
		exerciseHealthPages(t, setup(t))
	})
	t.Run("LatestMetrics", func(t *testing.T) {
		t.Parallel()
		exerciseLatestMetrics(t, setup(t))
	})
	t.Run("LastJobOfEachType", func(t *testing.T) {
		t.Parallel()
		exerciseLastJobOf(t, setup(t))
	})
	t.Run("NonNumbersSortAsAbsent", func(t *testing.T) {
		t.Parallel()
		h := setup(t)
		for name, value := range map[string]string{
			"number": `{"small-file-number": 2, "manifest-number": 1.5e3}`,
			"string": `{"small-file-number": "900", "manifest-number": "9"}`,
			"object": `{"small-file-number": {"n": 900}, "manifest-number": [9]}`,
			"null":   `{"small-file-number": null, "manifest-number": true}`,
		} {
			h.metrics(t, h.table(t, name), 0, 1, 0, value)
		}
		for _, order := range []store.SortOrder{store.OrderAsc, store.OrderDesc} {
			for _, sort := range []store.TableSort{store.SortSmallFiles, store.SortManifests} {
				require.Equal(t, "number", h.names(t, store.TableHealthQuery{Sort: sort, Order: order})[0], "%s %s", sort, order)
			}
		}
		require.Equal(t, "number", h.names(t, store.TableHealthQuery{})[0])
		page := h.list(t, store.TableHealthQuery{Sort: store.SortName})
		require.JSONEq(t, `{"small-file-number": "900", "manifest-number": "9"}`, string(page.Tables[3].Metrics.Value), "the metrics stay as written")
	})
	t.Run("Invalid", func(t *testing.T) {
		t.Parallel()
		h := setup(t)
		for _, bad := range []store.TableHealthQuery{
			{Limit: 0}, {Limit: store.MaxQueryLimit + 1}, {Limit: 10, Offset: -1},
			{Limit: 10, Sort: "size"}, {Limit: 10, Order: "up"},
			{Limit: 10, LastStatuses: []store.JobStatus{"none"}},
			{Limit: 10, Search: strings.Repeat("x", store.MaxTableSearch+1)},
		} {
			_, err := h.q.ListTableHealth(h.ctx, bad)
			require.ErrorIs(t, err, store.ErrInvalidArgument, "%+v", bad)
		}
	})
}

// healthFixture is a bundle with the ledger queries and the names of the
// tables it registered, so orders read as names.
type healthFixture struct {
	*bundle
	q    store.LedgerQueries
	byID map[int64]string
}

var healthBase = time.Date(2030, 5, 1, 0, 0, 0, 0, time.UTC)

// table registers cat.db.sch.name.
func (h *healthFixture) table(t *testing.T, name string) store.Table {
	t.Helper()
	tbl := h.bundle.table(t, name)
	h.byID[tbl.ID] = name
	return tbl
}

// metrics records value as tbl's metrics of snapshot snap, taken at
// healthBase + at.
func (h *healthFixture) metrics(t *testing.T, tbl store.Table, policyID, snap int64, at time.Duration, value string) {
	t.Helper()
	require.NoError(t, h.s.UpsertSnapshotMetrics(h.ctx, store.SnapshotMetrics{
		TableID: tbl.ID, PolicyID: policyID, SnapshotID: snap, Value: json.RawMessage(value), RecordedAt: healthBase.Add(at)}))
}

// finished creates a job row of tbl with types and closes it with status
// (a terminal status) and outcomes (may be empty).
func (h *healthFixture) finished(t *testing.T, tbl store.Table, types string, status store.JobStatus, outcomes string) store.Job {
	t.Helper()
	j := h.running(t, tbl, types)
	f := store.Finish{Status: status}
	if outcomes != "" {
		f.Outcomes = json.RawMessage(outcomes)
	}
	require.NoError(t, h.s.FinishJob(h.ctx, j.ID, j.Fence, f))
	return h.get(t, j.ID)
}

// running creates an in-flight job row of tbl with types.
func (h *healthFixture) running(t *testing.T, tbl store.Table, types string) store.Job {
	t.Helper()
	j, err := h.s.CreateJob(h.ctx, store.NewJob{TableID: tbl.ID, PolicyID: 1, Types: strings.Split(types, ","), Trigger: store.TriggerCommit})
	require.NoError(t, err)
	return j
}

// list runs q (limit 100 unless set) and returns the page.
func (h *healthFixture) list(t *testing.T, q store.TableHealthQuery) store.TableHealthPage {
	t.Helper()
	if q.Limit == 0 {
		q.Limit = 100
	}
	page, err := h.q.ListTableHealth(h.ctx, q)
	require.NoError(t, err, "%+v", q)
	return page
}

// names runs q and returns the page's table names in order.
func (h *healthFixture) names(t *testing.T, q store.TableHealthQuery) []string {
	t.Helper()
	return h.namesOf(h.list(t, q))
}

func (h *healthFixture) namesOf(page store.TableHealthPage) []string {
	out := make([]string, len(page.Tables))
	for i, th := range page.Tables {
		out[i] = h.byID[th.ID]
	}
	return out
}

func reversed(s []string) []string {
	out := slices.Clone(s)
	slices.Reverse(out)
	return out
}

// healthTables registers the tables of the order tests:
//
//	failed   last job failed (an older one succeeded), few files
//	lost     last job lost, no metrics
//	m60      small 50 + delete 10, 5 manifests
//	m60x     small 30 + delete 30, 9 manifests, 2 snapshots
//	m60y     small 60 + delete 0, 9 manifests, 3 snapshots
//	healed   no small or delete files, 1 manifest; failed, then succeeded
//	nokeys   metrics without any of the keys
//	bare     no metrics, no job
//	running  small 1, a job in flight
func healthTables(t *testing.T, h *healthFixture) {
	t.Helper()
	metrics := func(tbl store.Table, data, small, del, mse, manifests, snapshots, age int) {
		h.metrics(t, tbl, 0, 1, time.Hour, fmt.Sprintf(`{"data-file-number": %d, "small-file-number": %d, "delete-file-number": %d,
			"data-file-mse": %d.5, "manifest-number": %d, "snapshot-number": %d, "oldest-snapshot-age-ms": %d}`,
			data, small, del, mse, manifests, snapshots, age))
	}
	failed := h.table(t, "failed")
	metrics(failed, 10, 1, 0, 7, 1, 1, 100)
	h.finished(t, failed, "compaction", store.StatusSucceeded, "")
	h.finished(t, failed, "compaction", store.StatusFailed, "")
	lost := h.table(t, "lost")
	h.finished(t, lost, "snapshot-expiry", store.StatusLost, "")
	m60 := h.table(t, "m60")
	metrics(m60, 300, 50, 10, 1000, 5, 9, 500)
	m60x := h.table(t, "m60x")
	metrics(m60x, 200, 30, 30, 3, 9, 2, 300)
	h.finished(t, m60x, "compaction", store.StatusSucceeded, "")
	m60y := h.table(t, "m60y")
	metrics(m60y, 100, 60, 0, 20, 9, 3, 900)
	healed := h.table(t, "healed")
	metrics(healed, 5, 0, 0, 0, 1, 1, 0)
	h.finished(t, healed, "compaction", store.StatusFailed, "")
	h.finished(t, healed, "compaction", store.StatusSucceeded, "")
	nokeys := h.table(t, "nokeys")
	h.metrics(t, nokeys, 0, 1, time.Hour, `{"file-number": 4}`)
	h.table(t, "bare")
	running := h.table(t, "running")
	metrics(running, 50, 1, 0, 100, 2, 8, 200)
	h.running(t, running, "compaction,manifest-rewrite")
}

func exerciseHealthOrder(t *testing.T, h *healthFixture) {
	empty := h.list(t, store.TableHealthQuery{})
	require.Empty(t, empty.Tables)
	require.Zero(t, empty.Total)

	healthTables(t, h)
	worstFirst := []string{"failed", "lost", "m60y", "m60x", "m60", "running", "healed", "nokeys", "bare"}
	require.Equal(t, worstFirst, h.names(t, store.TableHealthQuery{}), "the default order")
	require.Equal(t, worstFirst, h.names(t, store.TableHealthQuery{Sort: store.SortHealth, Order: store.OrderDesc}))
	// Reversed, the healthiest first; tables without metrics stay after
	// those with within each group.
	require.Equal(t, []string{"healed", "nokeys", "running", "m60", "m60x", "m60y", "bare", "failed", "lost"},
		h.names(t, store.TableHealthQuery{Order: store.OrderAsc}))

	page := h.list(t, store.TableHealthQuery{})
	require.Equal(t, 9, page.Total)
	byName := map[string]store.TableHealth{}
	for _, th := range page.Tables {
		byName[h.byID[th.ID]] = th
	}
	require.Equal(t, store.StatusFailed, byName["failed"].LastJob.Status)
	require.Equal(t, store.StatusSucceeded, byName["healed"].LastJob.Status)
	require.True(t, byName["running"].LastJob.InFlight())
	require.Nil(t, byName["bare"].LastJob)
	require.Nil(t, byName["bare"].Metrics)
	require.NotNil(t, byName["bare"].LastJobOf)
	require.Nil(t, byName["lost"].Metrics)
	require.JSONEq(t, `{"file-number": 4}`, string(byName["nokeys"].Metrics.Value))
	require.Equal(t, "cat", byName["m60"].Catalog)
	require.Equal(t, "db.sch", byName["m60"].Namespace)
}

func exerciseHealthSorts(t *testing.T, h *healthFixture) {
	healthTables(t, h)
	all := []string{"failed", "lost", "m60", "m60x", "m60y", "healed", "nokeys", "bare", "running"} // by id
	require.Equal(t, []string{"bare", "failed", "healed", "lost", "m60", "m60x", "m60y", "nokeys", "running"},
		h.names(t, store.TableHealthQuery{Sort: store.SortName}), "name ascending by default")
	require.Equal(t, []string{"running", "nokeys", "m60y", "m60x", "m60", "lost", "healed", "failed", "bare"},
		h.names(t, store.TableHealthQuery{Sort: store.SortName, Order: store.OrderDesc}))

	// The metric sorts: by the metric, largest first by default; tables
	// without the metric last in both directions; ties by id.
	values := map[string]map[store.TableSort]float64{
		"failed":  {store.SortDataFiles: 10, store.SortSmallFiles: 1, store.SortDeleteFiles: 0, store.SortMSE: 7.5, store.SortManifests: 1, store.SortSnapshots: 1, store.SortOldest: 100},
		"m60":     {store.SortDataFiles: 300, store.SortSmallFiles: 50, store.SortDeleteFiles: 10, store.SortMSE: 1000.5, store.SortManifests: 5, store.SortSnapshots: 9, store.SortOldest: 500},
		"m60x":    {store.SortDataFiles: 200, store.SortSmallFiles: 30, store.SortDeleteFiles: 30, store.SortMSE: 3.5, store.SortManifests: 9, store.SortSnapshots: 2, store.SortOldest: 300},
		"m60y":    {store.SortDataFiles: 100, store.SortSmallFiles: 60, store.SortDeleteFiles: 0, store.SortMSE: 20.5, store.SortManifests: 9, store.SortSnapshots: 3, store.SortOldest: 900},
		"healed":  {store.SortDataFiles: 5, store.SortSmallFiles: 0, store.SortDeleteFiles: 0, store.SortMSE: 0.5, store.SortManifests: 1, store.SortSnapshots: 1, store.SortOldest: 0},
		"running": {store.SortDataFiles: 50, store.SortSmallFiles: 1, store.SortDeleteFiles: 0, store.SortMSE: 100.5, store.SortManifests: 2, store.SortSnapshots: 8, store.SortOldest: 200},
	}
	idx := func(name string) int { return slices.Index(all, name) }
	for _, sort := range []store.TableSort{store.SortDataFiles, store.SortSmallFiles, store.SortMSE, store.SortDeleteFiles,
		store.SortManifests, store.SortSnapshots, store.SortOldest} {
		for _, desc := range []bool{true, false} {
			want := slices.Clone(all)
			slices.SortStableFunc(want, func(a, b string) int {
				va, oka := values[a][sort]
				vb, okb := values[b][sort]
				switch {
				case oka != okb && oka:
					return -1
				case oka != okb:
					return 1
				case va != vb && desc:
					return cmp.Compare(vb, va)
				case va != vb:
					return cmp.Compare(va, vb)
				}
				return cmp.Compare(idx(a), idx(b))
			})
			order := store.OrderAsc
			if desc {
				order = store.OrderDesc
			}
			require.Equal(t, want, h.names(t, store.TableHealthQuery{Sort: sort, Order: order}), "%s %s", sort, order)
			if desc {
				require.Equal(t, want, h.names(t, store.TableHealthQuery{Sort: sort}), "%s: descending by default", sort)
			}
		}
	}
	// Spot checks of the model above.
	require.Equal(t, []string{"m60y", "m60", "m60x", "failed", "running", "healed", "lost", "nokeys", "bare"},
		h.names(t, store.TableHealthQuery{Sort: store.SortSmallFiles}))
	require.Equal(t, []string{"healed", "m60x", "failed", "m60y", "running", "m60", "lost", "nokeys", "bare"},
		h.names(t, store.TableHealthQuery{Sort: store.SortMSE, Order: store.OrderAsc}))

	// By the last job's creation, newest first; tables without a job last.
	require.Equal(t, []string{"running", "healed", "m60x", "lost", "failed", "m60", "m60y", "nokeys", "bare"},
		h.names(t, store.TableHealthQuery{Sort: store.SortLastJob}))
	require.Equal(t, []string{"failed", "lost", "m60x", "healed", "running", "m60", "m60y", "nokeys", "bare"},
		h.names(t, store.TableHealthQuery{Sort: store.SortLastJob, Order: store.OrderAsc}))
}

func exerciseHealthFilters(t *testing.T, h *healthFixture) {
	healthTables(t, h)
	for _, name := range []string{"Sales_2024", "sales%2024", "salesX2024"} {
		h.table(t, name)
	}
	names := func(q store.TableHealthQuery) []string {
		t.Helper()
		q.Sort = store.SortName
		page := h.list(t, q)
		require.Len(t, page.Tables, page.Total, "one page holds them all")
		return h.namesOf(page)
	}
	// Search: a substring of catalog.namespace.name, any case, with LIKE's
	// wildcards taken literally.
	require.Equal(t, []string{"m60", "m60x", "m60y"}, names(store.TableHealthQuery{Search: "m60"}))
	require.Equal(t, []string{"m60", "m60x", "m60y"}, names(store.TableHealthQuery{Search: "DB.SCH.M6"}))
	require.Equal(t, []string{"Sales_2024"}, names(store.TableHealthQuery{Search: "sales_"}))
	require.Equal(t, []string{"sales%2024"}, names(store.TableHealthQuery{Search: "%2"}))
	require.Len(t, names(store.TableHealthQuery{Search: "cat.db.sch."}), 12)
	require.Empty(t, names(store.TableHealthQuery{Search: "cat.db.sch.m60z"}))
	require.Empty(t, names(store.TableHealthQuery{Search: `\`}))

	// The last job's status.
	status := func(ss ...store.JobStatus) store.TableHealthQuery { return store.TableHealthQuery{LastStatuses: ss} }
	require.Equal(t, []string{"failed"}, names(status(store.StatusFailed)), "healed's failure is not its last job")
	require.Equal(t, []string{"healed", "m60x"}, names(status(store.StatusSucceeded)))
	require.Equal(t, []string{"failed", "lost"}, names(status(store.StatusFailed, store.StatusLost)))
	require.Equal(t, []string{"running"}, names(status(store.StatusPending, store.StatusRunning)))
	require.Equal(t, []string{"Sales_2024", "bare", "m60", "m60y", "nokeys", "sales%2024", "salesX2024"},
		names(store.TableHealthQuery{NoJob: true}))
	require.Equal(t, []string{"lost", "nokeys"}, names(store.TableHealthQuery{NoJob: true, LastStatuses: []store.JobStatus{store.StatusLost}, Search: "o"}),
		"filters combine")

	// Filters and the health order together.
	require.Equal(t, []string{"failed", "lost", "m60x", "healed"},
		h.names(t, store.TableHealthQuery{LastStatuses: []store.JobStatus{store.StatusFailed, store.StatusLost, store.StatusSucceeded}}))
}

func exerciseHealthPages(t *testing.T, h *healthFixture) {
	healthTables(t, h)
	for _, sort := range []store.TableSort{store.SortHealth, store.SortName, store.SortSmallFiles, store.SortLastJob} {
		all := h.names(t, store.TableHealthQuery{Sort: sort})
		require.Len(t, all, 9)
		for _, limit := range []int{1, 2, 4, 8, 9, 10} {
			var got []string
			for offset := 0; offset < len(all); offset += limit {
				page := h.list(t, store.TableHealthQuery{Sort: sort, Offset: offset, Limit: limit})
				require.Equal(t, 9, page.Total, "%s limit %d offset %d", sort, limit, offset)
				require.Len(t, page.Tables, min(limit, len(all)-offset))
				got = append(got, h.namesOf(page)...)
			}
			require.Equal(t, all, got, "%s limit %d: every table once, in order", sort, limit)
		}
	}
	// Past the end: no rows, and still the total.
	for _, offset := range []int{9, 10, 1000} {
		page := h.list(t, store.TableHealthQuery{Offset: offset, Limit: 5})
		require.Empty(t, page.Tables)
		require.Equal(t, 9, page.Total, "offset %d", offset)
	}
	page := h.list(t, store.TableHealthQuery{Offset: 100, Limit: 5, Search: "m60"})
	require.Equal(t, 3, page.Total, "the filtered total")
	page = h.list(t, store.TableHealthQuery{Offset: 100, Limit: 5, LastStatuses: []store.JobStatus{store.StatusCancelled}})
	require.Zero(t, page.Total)
	page = h.list(t, store.TableHealthQuery{Offset: 1, Limit: 1, Sort: store.SortName, Order: store.OrderDesc, Search: "m60"})
	require.Equal(t, []string{"m60x"}, h.namesOf(page))
	require.Equal(t, 3, page.Total)
}

func exerciseLatestMetrics(t *testing.T, h *healthFixture) {
	healthTables(t, h)
	healed := h.byName(t, "healed")
	m60 := h.byName(t, "m60")
	latest := func(tbl store.Table) *store.SnapshotMetrics {
		t.Helper()
		for _, th := range h.list(t, store.TableHealthQuery{Sort: store.SortName}).Tables {
			if th.ID == tbl.ID {
				return th.Metrics
			}
		}
		t.Fatalf("table %d not listed", tbl.ID)
		return nil
	}
	order := func() []string { return h.names(t, store.TableHealthQuery{}) }
	require.Equal(t, []string{"failed", "lost", "m60y", "m60x", "m60", "running", "healed", "nokeys", "bare"}, order())

	// Newer metrics move a table: healed now has the most small files.
	h.metrics(t, healed, 2, 7, 2*time.Hour, `{"small-file-number": 500, "delete-file-number": 1}`)
	require.Equal(t, []string{"failed", "lost", "healed", "m60y", "m60x", "m60", "running", "nokeys", "bare"}, order())
	require.Equal(t, [2]int64{2, 7}, [2]int64{latest(healed).PolicyID, latest(healed).SnapshotID})
	require.Equal(t, healthBase.Add(2*time.Hour), latest(healed).RecordedAt)

	// Older metrics, of another snapshot or policy, do not replace newer
	// ones.
	h.metrics(t, healed, 2, 6, 90*time.Minute, `{"small-file-number": 0}`)
	h.metrics(t, healed, 9, 9, time.Minute, `{"small-file-number": 0}`)
	require.Equal(t, int64(7), latest(healed).SnapshotID)
	require.JSONEq(t, `{"small-file-number": 500, "delete-file-number": 1}`, string(latest(healed).Value))
	require.Equal(t, "healed", order()[2])

	// At the same instant the higher policy, then snapshot id, is the
	// newer, as in ListSnapshotMetrics.
	h.metrics(t, healed, 2, 8, 2*time.Hour, `{"small-file-number": 0}`)
	require.Equal(t, int64(8), latest(healed).SnapshotID)
	h.metrics(t, healed, 1, 99, 2*time.Hour, `{"small-file-number": 1000}`)
	require.Equal(t, int64(8), latest(healed).SnapshotID, "a lower policy id at the same instant is older")
	require.Equal(t, "healed", order()[6])

	// Rewriting the latest row with new values replaces it.
	h.metrics(t, healed, 2, 8, 2*time.Hour, `{"small-file-number": 600}`)
	require.JSONEq(t, `{"small-file-number": 600}`, string(latest(healed).Value))
	require.Equal(t, "healed", order()[2])
	// Rewriting it as older hands the place to the row now newest.
	h.metrics(t, healed, 2, 8, 0, `{"small-file-number": 600}`)
	require.Equal(t, int64(7), latest(healed).SnapshotID)

	// A table's first metrics give it a place among the tables with metrics.
	h.metrics(t, h.byName(t, "bare"), 0, 1, time.Minute, `{"small-file-number": 55, "delete-file-number": 5}`)
	require.Equal(t, []string{"failed", "lost", "healed", "m60y", "m60x", "m60", "bare", "running", "nokeys"}, order())

	// The latest metrics are those ListTableStatus and ListSnapshotMetrics
	// call latest.
	h.metrics(t, m60, 3, 2, 3*time.Hour, `{"small-file-number": 1}`)
	status, err := h.q.ListTableStatus(h.ctx, 0, 100)
	require.NoError(t, err)
	for _, ts := range status {
		got := latest(ts.Table)
		if ts.Metrics == nil {
			require.Nil(t, got, h.byID[ts.ID])
			continue
		}
		all, err := h.s.ListSnapshotMetrics(h.ctx, ts.ID)
		require.NoError(t, err)
		last := all[len(all)-1]
		require.NotNil(t, got, h.byID[ts.ID])
		require.Equal(t, [2]int64{last.PolicyID, last.SnapshotID}, [2]int64{got.PolicyID, got.SnapshotID}, h.byID[ts.ID])
		require.Equal(t, [2]int64{last.PolicyID, last.SnapshotID}, [2]int64{ts.Metrics.PolicyID, ts.Metrics.SnapshotID}, h.byID[ts.ID])
		require.Equal(t, last.RecordedAt, got.RecordedAt)
		require.JSONEq(t, string(last.Value), string(got.Value))
	}
}

// byName returns the registered table named name.
func (h *healthFixture) byName(t *testing.T, name string) store.Table {
	t.Helper()
	for id, n := range h.byID {
		if n == name {
			tbl, err := h.s.GetTable(h.ctx, id)
			require.NoError(t, err)
			return tbl
		}
	}
	t.Fatalf("no table %q", name)
	return store.Table{}
}

func exerciseLastJobOf(t *testing.T, h *healthFixture) {
	tbl, other := h.table(t, "t"), h.table(t, "other")
	c1 := h.finished(t, tbl, "compaction,manifest-rewrite", store.StatusSucceeded,
		`[{"type":"compaction","outcome":"done"},{"type":"manifest-rewrite","outcome":"skipped"}]`)
	x1 := h.finished(t, tbl, "snapshot-expiry", store.StatusFailed, `[{"type":"snapshot-expiry","outcome":"failed","error":"boom"}]`)
	o1 := h.finished(t, other, "orphan-cleanup", store.StatusSucceeded, "")
	c2 := h.finished(t, tbl, "compaction", store.StatusSucceeded, "")
	x2 := h.finished(t, tbl, "compaction,snapshot-expiry", store.StatusLost, "")
	m1 := h.finished(t, tbl, "manifest-rewrite", store.StatusSkipped, "")
	c3 := h.running(t, tbl, "compaction")
	for range 20 { // a long history of the other table does not hide its chains
		h.finished(t, other, "compaction", store.StatusSucceeded, "")
	}
	bare := h.table(t, "bare")

	page := h.list(t, store.TableHealthQuery{Sort: store.SortName})
	require.Equal(t, []string{"bare", "other", "t"}, h.namesOf(page))
	require.Nil(t, page.Tables[0].LastJob)
	require.Empty(t, page.Tables[0].LastJobOf)
	require.Equal(t, bare.ID, page.Tables[0].ID)

	got := page.Tables[2]
	require.Equal(t, c3.ID, got.LastJob.ID)
	ids := map[string]int64{}
	for typ, j := range got.LastJobOf {
		ids[typ] = j.ID
		require.Equal(t, tbl.ID, j.TableID)
	}
	require.Equal(t, map[string]int64{"compaction": c3.ID, "manifest-rewrite": m1.ID, "snapshot-expiry": x2.ID}, ids)
	require.Equal(t, store.StatusLost, got.LastJobOf["snapshot-expiry"].Status)
	require.True(t, got.LastJobOf["compaction"].InFlight())
	for _, older := range []store.Job{c1, x1, c2} {
		require.NotContains(t, slices.Collect(maps.Values(ids)), older.ID, "a newer row of each type exists")
	}

	// Outcomes come with the rows.
	require.NoError(t, h.s.FinishJob(h.ctx, c3.ID, c3.Fence, store.Finish{Status: store.StatusSucceeded,
		Outcomes: json.RawMessage(`[{"type":"compaction","outcome":"ended-drift"}]`)}))
	page = h.list(t, store.TableHealthQuery{Sort: store.SortName, Search: ".t"})
	require.Len(t, page.Tables, 1)
	require.JSONEq(t, `[{"type":"compaction","outcome":"ended-drift"}]`, string(page.Tables[0].LastJobOf["compaction"].Outcomes))

	page = h.list(t, store.TableHealthQuery{Sort: store.SortName, Search: "other"})
	require.Len(t, page.Tables, 1)
	require.Equal(t, o1.ID, page.Tables[0].LastJobOf["orphan-cleanup"].ID)
	require.Equal(t, store.StatusSucceeded, page.Tables[0].LastJobOf["orphan-cleanup"].Status)
	require.Greater(t, page.Tables[0].LastJobOf["compaction"].ID, o1.ID)
	require.Equal(t, page.Tables[0].LastJobOf["compaction"].ID, page.Tables[0].LastJob.ID)
	require.Len(t, page.Tables[0].LastJobOf, 2)
}
