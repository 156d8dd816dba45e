package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/coordinator/console"
	"github.com/tms-dev/tms/coordinator/flow"
	"github.com/tms-dev/tms/store"
)

// The tables page.

// tableNames are the names of the tables page's rows, in order.
var tableNames = regexp.MustCompile(`<td><a href="/ui/tables/[^"]*">cat\.db\.([^<]*)</a></td>`)

func rowNames(body string) []string {
	var out []string
	for _, m := range tableNames.FindAllStringSubmatch(body, -1) {
		out = append(out, html.UnescapeString(m[1]))
	}
	return out
}

// link returns the href of the link whose text is text, unescaped.
func link(t *testing.T, body, text string) string {
	t.Helper()
	m := regexp.MustCompile(`<a href="([^"]*)">` + regexp.QuoteMeta(text) + `</a>`).FindStringSubmatch(body)
	require.NotNil(t, m, "no link %q", text)
	return html.UnescapeString(m[1])
}

// metrics records value as tbl's latest metrics.
func (f *fixture) metrics(tbl store.Table, value string) {
	f.t.Helper()
	require.NoError(f.t, f.st.UpsertSnapshotMetrics(context.Background(), store.SnapshotMetrics{TableID: tbl.ID, SnapshotID: 1,
		Value: json.RawMessage(value), RecordedAt: now}))
}

// finish closes job j with status and outcomes (may be empty).
func (f *fixture) finish(j store.Job, status store.JobStatus, outcomes string) {
	f.t.Helper()
	fin := store.Finish{Status: status, Error: "the error of " + string(status)}
	if outcomes != "" {
		fin.Outcomes = json.RawMessage(outcomes)
	}
	require.NoError(f.t, f.st.FinishJob(context.Background(), j.ID, j.Fence, fin))
}

// jobOf creates an in-flight job row of table with types.
func (f *fixture) jobOf(tableID int64, types ...string) store.Job {
	f.t.Helper()
	j, err := f.st.CreateJob(context.Background(), store.NewJob{TableID: tableID, PolicyID: 1, Types: types, Trigger: store.TriggerCron})
	require.NoError(f.t, err)
	return j
}

// healthTables registers five tables whose health order is
// broken (last job failed), heavy (most small + delete files), light,
// clean (nothing to do, a job in flight) and fresh (no metrics, no job).
func healthTables(f *fixture) map[string]store.Job {
	clean, _, light, broken, heavy := f.table("clean"), f.table("fresh"), f.table("light"), f.table("broken"), f.table("heavy")
	f.metrics(heavy, `{"data-file-number": 1234, "small-file-number": 77, "data-file-mse": 1.5e17, "delete-file-number": 5,
		"manifest-number": 12, "snapshot-number": 31, "oldest-snapshot-age-ms": 93600000}`)
	f.metrics(light, `{"data-file-number": 40, "small-file-number": 3, "delete-file-number": 0, "manifest-number": 2,
		"snapshot-number": 4, "oldest-snapshot-age-ms": 754000}`)
	f.metrics(broken, `{"data-file-number": 10, "small-file-number": 1, "manifest-number": 1}`)
	f.metrics(clean, `{"data-file-number": 8, "small-file-number": 0, "delete-file-number": 0, "manifest-number": 1}`)
	jobs := map[string]store.Job{}
	jobs["heavy"] = f.jobOf(heavy.ID, "compaction", "manifest-rewrite", "snapshot-expiry")
	f.finish(jobs["heavy"], store.StatusSucceeded,
		`[{"type":"compaction","outcome":"done","reason":"rewrote 77 files"},{"type":"manifest-rewrite","outcome":"skipped","reason":"below threshold"},{"type":"snapshot-expiry","outcome":"ended-drift"}]`)
	jobs["heavy-orphans"] = f.jobOf(heavy.ID, "orphan-cleanup")
	f.finish(jobs["heavy-orphans"], store.StatusLost, "")
	jobs["heavy-last"] = f.jobOf(heavy.ID, "compaction")
	f.finish(jobs["heavy-last"], store.StatusSucceeded, `[{"type":"compaction","outcome":"conflict","error":"commit conflict <b>"}]`)
	jobs["broken"] = f.jobOf(broken.ID, "compaction")
	f.finish(jobs["broken"], store.StatusFailed, `[{"type":"compaction","outcome":"failed","error":"boom"}]`)
	jobs["clean"] = f.jobOf(clean.ID, "snapshot-expiry")
	return jobs
}

func TestTablesPage(t *testing.T) {
	onBackends(t, func(t *testing.T, backend string) {
		f := setup(t, backend, nil)
		jobs := healthTables(f)
		ck := f.login(readToken)

		r := f.do(http.MethodGet, "/ui", ck, nil)
		require.Equal(t, http.StatusOK, r.code)
		require.Equal(t, []string{"broken", "heavy", "light", "clean", "fresh"}, rowNames(r.body), "unhealthy first")
		require.Contains(t, r.body, "Ordered unhealthy first: tables whose last job failed or was lost")
		require.Contains(t, r.body, "Tables 1–5 of 5.")
		require.Equal(t, 1, strings.Count(r.body, `<tr class="unhealthy">`))
		require.Contains(t, r.body, `<tr class="unhealthy">
<td><a href="/ui/tables/cat.db.broken">cat.db.broken</a></td>`)
		// The metrics, the oldest snapshot's age as a duration.
		for _, want := range []string{`<td class="n">1234</td>`, `<td class="n">77</td>`, `<td class="n">1.5e&#43;17</td>`,
			`<td class="n">5</td>`, `<td class="n">12</td>`, `<td class="n">31</td>`, `<td class="n">1d 2h</td>`, `<td class="n">12m 34s</td>`} {
			require.Contains(t, r.body, want)
		}
		require.Equal(t, 5*7, strings.Count(r.body, `<td class="n">`), "seven metrics a row")
		// The last job and, per maintenance type, the newest job with that
		// type's outcome, or its status where it recorded none.
		require.Contains(t, r.body, fmt.Sprintf(`<td><a href="/ui/jobs/%d">compaction</a></td><td class="status-succeeded">succeeded</td>`, jobs["heavy-last"].ID))
		for _, want := range []string{
			fmt.Sprintf(`<td class="type outcome-conflict" title="commit conflict &lt;b&gt;"><a href="/ui/jobs/%d">conflict</a>`, jobs["heavy-last"].ID),
			fmt.Sprintf(`<td class="type outcome-skipped" title="below threshold"><a href="/ui/jobs/%d">skipped</a>`, jobs["heavy"].ID),
			fmt.Sprintf(`<td class="type outcome-ended-drift"><a href="/ui/jobs/%d">ended-drift</a>`, jobs["heavy"].ID),
			fmt.Sprintf(`<td class="type outcome-lost" title="the error of lost"><a href="/ui/jobs/%d">lost</a>`, jobs["heavy-orphans"].ID),
			fmt.Sprintf(`<td class="type outcome-failed" title="boom"><a href="/ui/jobs/%d">failed</a>`, jobs["broken"].ID),
			fmt.Sprintf(`<td class="type outcome-pending"><a href="/ui/jobs/%d">pending</a>`, jobs["clean"].ID),
		} {
			require.Contains(t, r.body, want)
		}
		for _, typ := range []string{"compaction", "delete-rewrite", "manifest-rewrite", "snapshot-expiry", "orphan-cleanup"} {
			require.Contains(t, r.body, `<th class="type">`+typ+`</th>`)
		}
		require.Equal(t, 1+4+4+5+5, strings.Count(r.body, `<td class="type">–</td>`), "types that never ran: heavy 1 (delete-rewrite), broken 4, light 5, clean 4, fresh 5")
		require.NotContains(t, r.body, "Next page")
		require.NotContains(t, r.body, "Previous page")

		// Column headers sort; the current one links to the other direction.
		require.Equal(t, "/ui?sort=small-files", link(t, r.body, "Small files"))
		require.Equal(t, "/ui?sort=name", link(t, r.body, "Table"))
		require.Equal(t, "/ui?sort=last-job", link(t, r.body, "Last job"))
		r = f.do(http.MethodGet, "/ui?sort=small-files", ck, nil)
		require.Equal(t, []string{"heavy", "light", "broken", "clean", "fresh"}, rowNames(r.body))
		require.Equal(t, "/ui?order=asc&sort=small-files", link(t, r.body, "Small files"))
		require.Contains(t, r.body, `Small files</a> ▼</th>`)
		require.Equal(t, "/ui", link(t, r.body, "Unhealthy first"))
		r = f.do(http.MethodGet, "/ui?order=asc&sort=small-files", ck, nil)
		require.Equal(t, []string{"clean", "broken", "light", "heavy", "fresh"}, rowNames(r.body), "no metrics last either way")
		require.Equal(t, "/ui?sort=small-files", link(t, r.body, "Small files"))
		require.Contains(t, r.body, `Small files</a> ▲</th>`)
		for path, want := range map[string][]string{
			"/ui?sort=name":                 {"broken", "clean", "fresh", "heavy", "light"},
			"/ui?sort=name&order=desc":      {"light", "heavy", "fresh", "clean", "broken"},
			"/ui?sort=oldest":               {"heavy", "light", "clean", "fresh", "broken"},
			"/ui?sort=mse":                  {"heavy", "clean", "fresh", "light", "broken"},
			"/ui?sort=last-job":             {"clean", "broken", "heavy", "fresh", "light"},
			"/ui?sort=health&order=asc":     {"clean", "light", "heavy", "fresh", "broken"},
			"/ui?sort=manifests&order=desc": {"heavy", "light", "clean", "broken", "fresh"},
		} {
			r := f.do(http.MethodGet, path, ck, nil)
			require.Equal(t, http.StatusOK, r.code, path)
			require.Equal(t, want, rowNames(r.body), path)
		}

		// The filter: a GET form; its values stay in the sort links.
		r = f.do(http.MethodGet, "/ui?q=DB.HE", ck, nil)
		require.Equal(t, []string{"heavy"}, rowNames(r.body))
		require.Contains(t, r.body, `<form method="get" action="/ui" class="filter">`)
		require.Contains(t, r.body, `name="q" value="DB.HE"`)
		require.Contains(t, r.body, "Tables 1–1 of 1 matching.")
		require.Equal(t, "/ui?q=DB.HE&sort=name", link(t, r.body, "Table"))
		r = f.do(http.MethodGet, "/ui?status=failed", ck, nil)
		require.Equal(t, []string{"broken"}, rowNames(r.body))
		require.Contains(t, r.body, `<option value="failed" selected>failed</option>`)
		r = f.do(http.MethodGet, "/ui?status=none,pending&sort=name", ck, nil)
		require.Equal(t, []string{"clean", "fresh", "light"}, rowNames(r.body))
		r = f.do(http.MethodGet, "/ui?status=succeeded&status=failed&q=e", ck, nil)
		require.Equal(t, []string{"broken", "heavy"}, rowNames(r.body))
		r = f.do(http.MethodGet, "/ui?q=nothing", ck, nil)
		require.Empty(t, rowNames(r.body))
		require.Contains(t, r.body, "No tables match the filter.")
		require.Contains(t, r.body, `<a href="/ui">Clear</a>`)

		// New metrics move a table; a newer job moves it out of the failed.
		require.NoError(t, f.st.UpsertSnapshotMetrics(context.Background(), store.SnapshotMetrics{TableID: jobs["clean"].TableID,
			SnapshotID: 2, Value: json.RawMessage(`{"small-file-number": 500}`), RecordedAt: now.Add(time.Minute)}))
		f.finish(jobs["clean"], store.StatusSucceeded, "")
		f.finish(f.jobOf(jobs["broken"].TableID, "compaction"), store.StatusSucceeded, "")
		r = f.do(http.MethodGet, "/ui", ck, nil)
		require.Equal(t, []string{"clean", "heavy", "light", "broken", "fresh"}, rowNames(r.body))
		require.NotContains(t, r.body, `class="unhealthy"`)
	})
}

func TestTablesPagination(t *testing.T) {
	t.Parallel()
	f := setup(t, store.BackendSQLite, nil)
	healthTables(f)
	ck := f.login(readToken)
	all := []string{"broken", "heavy", "light", "clean", "fresh"}

	// Following Next visits every table once, in order.
	path := "/ui?limit=2"
	var pages, seen []string
	for path != "" {
		r := f.do(http.MethodGet, path, ck, nil)
		require.Equal(t, http.StatusOK, r.code, path)
		pages = append(pages, path)
		seen = append(seen, rowNames(r.body)...)
		path = ""
		if strings.Contains(r.body, "Next page") {
			path = link(t, r.body, "Next page")
		}
	}
	require.Equal(t, all, seen)
	require.Equal(t, []string{"/ui?limit=2", "/ui?limit=2&offset=2", "/ui?limit=2&offset=4"}, pages)

	r := f.do(http.MethodGet, "/ui?limit=2&offset=2", ck, nil)
	require.Contains(t, r.body, "Tables 3–4 of 5.")
	require.Equal(t, "/ui?limit=2", link(t, r.body, "Previous page"))
	r = f.do(http.MethodGet, "/ui?limit=2&offset=4&sort=name&q=e", ck, nil)
	require.Empty(t, rowNames(r.body), "past a filtered end")
	require.Contains(t, r.body, "No tables on this page; 4 match.")
	require.Equal(t, "/ui?limit=2&q=e&sort=name", link(t, r.body, "First page"))
	require.Equal(t, "/ui?limit=2&offset=2&q=e&sort=name", link(t, r.body, "Previous page"))
	r = f.do(http.MethodGet, "/ui?offset=100", ck, nil)
	require.Equal(t, http.StatusOK, r.code)
	require.Contains(t, r.body, "No tables on this page; 5 registered.")

	// Bad parameters answer 400 naming the parameter.
	for bad, want := range map[string]string{
		"/ui?limit=0":                       "Query parameter limit: &#34;0&#34;: want 1 to 1000",
		"/ui?limit=1001":                    "Query parameter limit",
		"/ui?limit=x":                       "Query parameter limit",
		"/ui?offset=-1":                     "Query parameter offset",
		"/ui?offset=x":                      "Query parameter offset",
		"/ui?sort=size":                     "Query parameter sort: unknown sort &#34;size&#34;; want one of health, name, data-files",
		"/ui?order=up":                      "Query parameter order: &#34;up&#34;: want asc or desc",
		"/ui?status=broken":                 "Query parameter status: unknown job status &#34;broken&#34;; want none or one of pending",
		"/ui?q=" + strings.Repeat("x", 201): "Query parameter q: 201 bytes: want at most 200",
		"/ui?sort=%3Cscript%3E":             "Query parameter sort: unknown sort &#34;&lt;script&gt;&#34;",
	} {
		r := f.do(http.MethodGet, bad, ck, nil)
		require.Equal(t, http.StatusBadRequest, r.code, bad)
		require.Contains(t, r.body, want, bad)
		require.Empty(t, rowNames(r.body))
	}
}

func TestTablesPageEscapes(t *testing.T) {
	t.Parallel()
	f := setup(t, store.BackendSQLite, nil)
	const evil = "<script>alert(1)</script>"
	tbl := f.table(evil)
	f.metrics(tbl, `{"small-file-number": 1}`)
	j := f.jobOf(tbl.ID, "compaction")
	f.finish(j, store.StatusFailed, `[{"type":"compaction","outcome":"failed\"><script>","error":"<img src=x onerror=alert(2)>"}]`)
	f.table("plain")
	ck := f.login(readToken)

	for _, path := range []string{"/ui", "/ui?q=" + url.QueryEscape(evil), "/ui?q=" + url.QueryEscape("<SCRIPT>")} {
		r := f.do(http.MethodGet, path, ck, nil)
		require.Equal(t, http.StatusOK, r.code, path)
		require.NotContains(t, r.body, "<script>", path)
		require.NotContains(t, r.body, "<img", path)
		require.Contains(t, r.body, "cat.db.&lt;script&gt;alert(1)&lt;/script&gt;</a>", path)
		require.Equal(t, evil, rowNames(r.body)[0], path)
		require.Contains(t, r.body, `href="`+tablePage(tbl)+`"`, "the link is the path-escaped name")
		require.Contains(t, r.body, `title="&lt;img src=x onerror=alert(2)&gt;"`)
	}
	r := f.do(http.MethodGet, "/ui?q="+url.QueryEscape(evil), ck, nil)
	require.Contains(t, r.body, `name="q" value="&lt;script&gt;alert(1)&lt;/script&gt;"`, "the filter echoes it escaped")
	require.Equal(t, "/ui?q=%3Cscript%3Ealert%281%29%3C%2Fscript%3E&sort=name", link(t, r.body, "Table"))
	require.Equal(t, []string{evil}, rowNames(r.body))
}

// Unknown pages are 404.
func TestUnknownPage(t *testing.T) {
	t.Parallel()
	f := setup(t, store.BackendSQLite, nil)
	r := f.do(http.MethodGet, "/ui/nope", f.login(readToken), nil)
	require.Equal(t, http.StatusNotFound, r.code)
	require.Contains(t, r.body, "There is no page /ui/nope.")
}

// TestTablesPageShowsPlan: with a plan, each row lists its effective
// policies with their verdicts and the next instant one of them is due.
func TestTablesPageShowsPlan(t *testing.T) {
	t.Parallel()
	f := setup(t, store.BackendSQLite, func(cfg *console.Config) {
		fl, err := flow.NewFlow(cfg.Store, nil, flow.FlowConfig{DBURL: "unused://the plan submits nothing"})
		require.NoError(t, err)
		cfg.Plan = fl.Plan
	})
	ctx := context.Background()
	covered, other := f.table("covered"), f.table("<b>other</b>")
	p, err := f.st.CreatePolicy(ctx, store.NewPolicy{Name: "hourly", Type: "system_iceberg_compaction", Enabled: true,
		Content: json.RawMessage(`{"schedule": {"crontab": "@hourly"}}`)})
	require.NoError(t, err)
	_, _, err = f.st.Attach(ctx, "hourly", store.PolicyObject{Level: store.LevelTable, Catalog: "cat", Namespace: "db", Table: covered.Name})
	require.NoError(t, err)
	require.NoError(t, flow.SyncPolicyTask(ctx, f.st, p, now))
	row, err := f.st.GetTask(ctx, flow.ExpandKey(p.ID))
	require.NoError(t, err)

	r := f.do(http.MethodGet, "/ui?sort=name", readToken, nil)
	require.Equal(t, http.StatusOK, r.code, r.body)
	require.Contains(t, r.body, "<th>Policies (plan)</th><th>Next due</th>")
	require.Equal(t, 2, strings.Count(r.body, `<td class="plan">`))
	require.Contains(t, r.body, `compaction: hourly <span class="verdict-run">run</span>`, "no sample yet: the runner samples first")
	require.Contains(t, r.body, row.ExecutionTime.UTC().Format("2006-01-02 15:04:05Z"), "the policy-expand row's instant")
	require.Contains(t, r.body, `<td class="plan">none</td>`, "%s has no policy", other.Name)
	require.NotContains(t, r.body, "<b>other</b>")
}
