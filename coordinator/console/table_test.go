package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tms-dev/tms/coordinator/console"
	"github.com/tms-dev/tms/store"
)

func TestTablePage(t *testing.T) {
	t.Parallel()
	f := setup(t, store.BackendSQLite, nil)
	tbl, empty := f.table("orders"), f.table("empty")
	rows := []string{
		`{"file-number": 10, "small-file-number": 8, "delete-file-number": 2, "manifest-number": 4, "snapshot-number": 3, "delete-ratio": 0.25}`,
		`{"file-number": 12, "small-file-number": 9, "delete-file-number": 2, "manifest-number": 5, "snapshot-number": 4, "delete-ratio": 0.5}`,
		`{"file-number": 3}`, // other keys absent: no point there
		`{"file-number": 4, "small-file-number": 0, "delete-file-number": 0, "manifest-number": 1, "snapshot-number": 1, "delete-ratio": 0}`,
	}
	for i, v := range rows {
		require.NoError(t, f.st.UpsertSnapshotMetrics(context.Background(), store.SnapshotMetrics{TableID: tbl.ID, PolicyID: 1,
			SnapshotID: int64(100 + i), Value: json.RawMessage(v), RecordedAt: now.Add(time.Duration(i) * time.Hour)}))
	}
	done := f.job(tbl.ID)
	f.fail(done, "it broke")
	live := f.job(tbl.ID)
	require.NoError(t, f.st.SetBeforeSnapshot(context.Background(), live.ID, live.Fence, 103))
	require.NoError(t, f.st.SetJobID(context.Background(), live.ID, live.Fence, "ext-77", "local"))
	ck := f.login(readToken)

	r := f.do(http.MethodGet, tablePage(tbl), ck, nil)
	require.Equal(t, http.StatusOK, r.code, r.body)
	require.Equal(t, len(rows), strings.Count(r.body, `<circle class="sample"`))
	require.Equal(t, 6, strings.Count(r.body, `<polyline class="line"`))
	require.Equal(t, 4+3*5, strings.Count(r.body, `<circle class="point"`))
	for _, want := range []string{"Files (data and delete)", "Small files", "Delete files", "Manifests", "Snapshots",
		"Delete debt (deleted rows / rows)", ": 0.5 (snapshot 101)</title>",
		"2030-06-01 12:00", "2030-06-01 15:00", ">12</text>", // y axis max of file-number
		`points="60,`, "snapshot 103, policy 1",
		fmt.Sprintf(`<a href="/ui/jobs/%d">%d</a>`, live.ID, live.ID), ">ext-77<", ">local<", ">103<", "it broke", ">commit<"} {
		require.Contains(t, r.body, want)
	}
	require.Less(t, strings.Index(r.body, fmt.Sprintf(`/ui/jobs/%d"`, live.ID)), strings.Index(r.body, fmt.Sprintf(`/ui/jobs/%d"`, done.ID)),
		"newest job first")

	// By row id too.
	require.Equal(t, http.StatusOK, f.do(http.MethodGet, fmt.Sprintf("/ui/tables/%d", tbl.ID), ck, nil).code)

	r = f.do(http.MethodGet, tablePage(empty), ck, nil)
	require.Equal(t, http.StatusOK, r.code)
	require.Zero(t, strings.Count(r.body, "<circle"))
	require.Contains(t, r.body, "No metrics recorded yet.")
	require.Contains(t, r.body, "No jobs yet.")

	for _, p := range []string{"/ui/tables/cat.db.missing", "/ui/tables/999"} {
		r = f.do(http.MethodGet, p, ck, nil)
		require.Equal(t, http.StatusNotFound, r.code, p)
		require.Contains(t, r.body, "<h1>Not found</h1>")
	}
	require.Equal(t, http.StatusBadRequest, f.do(http.MethodGet, "/ui/tables/cat..x", ck, nil).code)
}

// ran creates a job of table that started at start and, unless status is
// in flight (running), finished at end as status with outcomes; before and
// after are its snapshots (0: none).
func (f *fixture) ran(tableID int64, types []string, start, end time.Time, status store.JobStatus, before, after int64, outcomes string) store.Job {
	f.t.Helper()
	ctx := context.Background()
	j, err := f.st.CreateJob(ctx, store.NewJob{TableID: tableID, Types: types, Trigger: store.TriggerCron})
	require.NoError(f.t, err)
	require.NoError(f.t, f.st.StartJob(ctx, j.ID, j.Fence, start))
	if before != 0 {
		require.NoError(f.t, f.st.SetBeforeSnapshot(ctx, j.ID, j.Fence, before))
	}
	if status == store.StatusRunning {
		return j
	}
	fin := store.Finish{Status: status, At: end}
	if after != 0 {
		fin.AfterSnapshotID = &after
	}
	if outcomes != "" {
		fin.Outcomes = json.RawMessage(outcomes)
	}
	require.NoError(f.t, f.st.FinishJob(ctx, j.ID, j.Fence, fin))
	return j
}

// svgs returns the page's SVG elements, the timeline first.
func svgs(t *testing.T, body string) []string {
	t.Helper()
	var out []string
	for rest := body; ; {
		i := strings.Index(rest, "<svg")
		if i < 0 {
			return out
		}
		n := strings.Index(rest[i:], "</svg>")
		require.Positive(t, n)
		out = append(out, rest[i:i+n])
		rest = rest[i+n:]
	}
}

// jobRect matches a job marker: its classes, position and title.
var jobRect = regexp.MustCompile(`<rect class="(job[^"]*)" x="([0-9.]+)" y="[0-9.]+" width="([0-9.]+)" height="[0-9.]+"><title>([^<]*)</title></rect>`)

func TestTablePageMarksJobs(t *testing.T) {
	onBackends(t, func(t *testing.T, backend string) {
		f := setup(t, backend, nil)
		ctx := context.Background()
		tbl := f.table("orders")
		// Six samples an hour apart, ending five hours before the console's
		// now: the x axis is 300 minutes over 564 units from x=60.
		base := now.Add(-10 * time.Hour)
		rows := []string{
			`{"file-number": 120, "small-file-number": 100, "data-file-mse": 4.5e14, "delete-file-number": 10, "manifest-number": 20, "snapshot-number": 30}`,
			`{"file-number": 130, "small-file-number": 110, "data-file-mse": 5e14, "delete-file-number": 11, "manifest-number": 21, "snapshot-number": 31}`,
			`{"file-number": 8, "small-file-number": 2, "data-file-mse": 1.5e12, "delete-file-number": 0, "manifest-number": 4, "snapshot-number": 2}`,
			`{"file-number": 9, "small-file-number": 3, "delete-file-number": 1, "manifest-number": 5, "snapshot-number": 3}`,
			`{"file-number": 50}`, // the other metrics absent at snapshot 104
			`{"file-number": 7, "small-file-number": 1, "delete-file-number": 0, "manifest-number": 3, "snapshot-number": 1}`,
		}
		for i, v := range rows {
			require.NoError(t, f.st.UpsertSnapshotMetrics(ctx, store.SnapshotMetrics{TableID: tbl.ID, PolicyID: 1,
				SnapshotID: int64(100 + i), Value: json.RawMessage(v), RecordedAt: base.Add(time.Duration(i) * time.Hour)}))
		}
		at := func(h, m int) time.Time { return base.Add(time.Duration(h)*time.Hour + time.Duration(m)*time.Minute) }
		types := []string{"compaction", "manifest-rewrite"}

		before := f.ran(tbl.ID, types, at(-5, 0), at(-4, 0), store.StatusSucceeded, 90, 91, "") // ended before the first sample
		done := f.ran(tbl.ID, types, at(1, 10), at(1, 50), store.StatusSucceeded, 101, 102,
			`[{"type":"compaction","outcome":"done","reason":"mse above threshold","before_snapshot_id":101,"after_snapshot_id":102,"duration_ms":1500},
			  {"type":"manifest-rewrite","outcome":"skipped","reason":"nothing to <rewrite>","duration_ms":0}]`)
		failed := f.ran(tbl.ID, []string{"<script>x</script>"}, at(3, 0), at(3, 30), store.StatusFailed, 103, 0,
			`[{"type":"<script>x</script>","outcome":"failed","error":"<b>boom</b>","duration_ms":7}]`)
		unknown := f.ran(tbl.ID, types, at(3, 40), at(4, 0), store.StatusSucceeded, 999, 104, `["odd"]`) // no row of snapshot 999
		live := f.ran(tbl.ID, types, at(4, 30), time.Time{}, store.StatusRunning, 104, 0, "")            // in flight: to now, past the range
		ck := f.login(readToken)

		r := f.do(http.MethodGet, tablePage(tbl), ck, nil)
		require.Equal(t, http.StatusOK, r.code, r.body)
		require.Contains(t, r.body, "Bands mark the 4 jobs that ran within the sampled range")
		require.NotContains(t, r.body, "Only the newest")
		require.NotContains(t, r.body, "<script>x")
		marked := []store.Job{done, failed, unknown, live}
		charts := svgs(t, r.body)
		require.Len(t, charts, 8, "the timeline and seven charts")
		require.Equal(t, 8*len(marked), strings.Count(r.body, `class="job`))
		for ci, svg := range charts {
			rects := jobRect.FindAllStringSubmatch(svg, -1)
			require.Len(t, rects, len(marked), "chart %d: one marker per job in the range", ci)
			for i, j := range marked { // oldest first
				require.Contains(t, rects[i][4], fmt.Sprintf("job %d (", j.ID), "chart %d", ci)
			}
			require.NotContains(t, svg, fmt.Sprintf("job %d (", before.ID), "chart %d: outside the range", ci)
			// Where they are: from start to finish on the axis, the one in
			// flight to the right edge (x = 624).
			require.Equal(t, []string{"job job-succeeded", "191.6", "75.2"}, rects[0][1:4], "chart %d", ci)
			require.Equal(t, "job job-failed", rects[1][1], "chart %d", ci)
			require.Equal(t, "job job-running", rects[3][1], "chart %d", ci)
			x, err := strconv.ParseFloat(rects[3][2], 64)
			require.NoError(t, err)
			w, err := strconv.ParseFloat(rects[3][3], 64)
			require.NoError(t, err)
			require.InDelta(t, 624, x+w, 0.11, "chart %d", ci)
			require.InDelta(t, 60+564*270/300.0, x, 0.11, "chart %d", ci)
		}

		// The titles: the metric at the before and after snapshots, from
		// the rows.
		title := func(ci, i int) string { return jobRect.FindAllStringSubmatch(charts[ci], -1)[i][4] }
		head := fmt.Sprintf("job %d (compaction, manifest-rewrite) succeeded: snapshot 101 → 102", done.ID)
		require.Equal(t, head+"; 2030-06-01T03:10:00Z to 2030-06-01T03:50:00Z", title(0, 0))
		for ci, want := range []string{"files 130 → 8", "small files 110 → 2", "data-file MSE 5e+14 → 1.5e+12", "delete files 11 → 0", "manifests 21 → 4", "snapshots 31 → 2"} {
			require.Equal(t, head+"; "+want, title(ci+1, 0))
		}
		require.Equal(t, fmt.Sprintf("job %d (&lt;script&gt;x&lt;/script&gt;) failed: snapshot 103 → –; files 9 → –", failed.ID), title(1, 1))
		require.Equal(t, fmt.Sprintf("job %d (compaction, manifest-rewrite) succeeded: snapshot 999 → 104; files – → 50", unknown.ID), title(1, 2))
		require.Equal(t, fmt.Sprintf("job %d (compaction, manifest-rewrite) succeeded: snapshot 999 → 104", unknown.ID), title(2, 2),
			"neither side has small files")
		require.Equal(t, fmt.Sprintf("job %d (compaction, manifest-rewrite) running: snapshot 104 → –; files 50 → –", live.ID), title(1, 3))
		require.Equal(t, fmt.Sprintf("job %d (compaction, manifest-rewrite) running: snapshot 104 → –; 2030-06-01T06:30:00Z to now (in flight)", live.ID),
			title(0, 3))

		// The history: per-type outcomes, reasons and durations; a dash
		// without outcomes; the list as stored when it is not one of objects.
		for _, want := range []string{
			`compaction: <span class="outcome-done">done</span> in 1.5s, snapshot 101 → 102; mse above threshold</div>`,
			`manifest-rewrite: <span class="outcome-skipped">skipped</span> in 0s; nothing to &lt;rewrite&gt;</div>`,
			`&lt;script&gt;x&lt;/script&gt;: <span class="outcome-failed">failed</span> in 7ms; <span class="err">&lt;b&gt;boom&lt;/b&gt;</span></div>`,
			`<code>[&#34;odd&#34;]</code>`,
			`<td class="status-running">running</td>` + "\n<td>–</td>",
			`<td>40m0s</td>`, `<td>5h30m0s so far</td>`,
		} {
			require.Contains(t, r.body, want)
		}
		require.NotContains(t, r.body, "all jobs of this table", "fewer jobs than the history shows")

		// Once finished, the job in flight ends at its finish; a job that
		// started after the last sample is not marked.
		fin := int64(105)
		require.NoError(t, f.st.FinishJob(ctx, live.ID, live.Fence, store.Finish{Status: store.StatusSucceeded, AfterSnapshotID: &fin, At: at(4, 50)}))
		later := f.ran(tbl.ID, types, at(6, 0), at(6, 30), store.StatusSucceeded, 105, 106, "")
		r = f.do(http.MethodGet, tablePage(tbl), ck, nil)
		require.Equal(t, http.StatusOK, r.code, r.body)
		require.Equal(t, 8*len(marked), strings.Count(r.body, `class="job`))
		require.NotContains(t, r.body, fmt.Sprintf("job %d (", later.ID))
		charts = svgs(t, r.body)
		require.Equal(t, fmt.Sprintf("job %d (compaction, manifest-rewrite) succeeded: snapshot 104 → 105; files 50 → 7", live.ID), title(1, 3))
		require.Equal(t, fmt.Sprintf("job %d (compaction, manifest-rewrite) succeeded: snapshot 104 → 105; 2030-06-01T06:30:00Z to 2030-06-01T06:50:00Z", live.ID),
			title(0, 3))
	})
}

// TestTablePageMarksNewestJobs checks the bound: of more jobs than
// console.JobMarks in the range, the newest are marked and the page says so.
func TestTablePageMarksNewestJobs(t *testing.T) {
	t.Parallel()
	f := setup(t, store.BackendSQLite, nil)
	ctx := context.Background()
	tbl := f.table("busy")
	// Two samples, and a job every two minutes between them.
	span := 2 * (console.JobMarks + 2) * time.Minute
	base := now.Add(-span)
	for i, h := range []time.Duration{0, span} {
		require.NoError(t, f.st.UpsertSnapshotMetrics(ctx, store.SnapshotMetrics{TableID: tbl.ID, SnapshotID: int64(i + 1),
			Value: json.RawMessage(`{"file-number": 1}`), RecordedAt: base.Add(h)}))
	}
	var jobs []store.Job
	for i := range console.JobMarks + 2 {
		j, err := f.st.CreateJob(ctx, store.NewJob{TableID: tbl.ID, Types: []string{"compaction"}, Trigger: store.TriggerCron})
		require.NoError(t, err)
		start := base.Add(time.Duration(2*i) * time.Minute)
		require.NoError(t, f.st.StartJob(ctx, j.ID, j.Fence, start))
		require.NoError(t, f.st.FinishJob(ctx, j.ID, j.Fence, store.Finish{Status: store.StatusSucceeded, At: start.Add(time.Minute)}))
		jobs = append(jobs, j)
	}
	ck := f.login(readToken)

	r := f.do(http.MethodGet, tablePage(tbl), ck, nil)
	require.Equal(t, http.StatusOK, r.code, r.body)
	require.Equal(t, 8*console.JobMarks, strings.Count(r.body, `class="job`)) // the timeline and seven charts
	oldest := jobs[2]                                                         // the newest JobMarks are jobs[2:]
	require.Contains(t, r.body, fmt.Sprintf("<title>job %d (compaction) succeeded; ", oldest.ID))
	require.NotContains(t, r.body, fmt.Sprintf("<title>job %d (", jobs[1].ID))
	require.Contains(t, r.body, fmt.Sprintf("Only the newest %d jobs are marked, back to job %d (created ", console.JobMarks, oldest.ID))
	require.Contains(t, r.body, fmt.Sprintf(`<a href="/ui/jobs?table=%d&amp;before=%d">older jobs</a>`, tbl.ID, oldest.ID))
	require.Contains(t, r.body, fmt.Sprintf(`The newest %d; <a href="/ui/jobs?table=%d">all jobs of this table</a>.`, console.JobHistory, tbl.ID))
	require.Equal(t, console.JobHistory, strings.Count(r.body, `<td><a href="/ui/jobs/`))
}

// TestTablePageReadsSamples checks the charts read the metrics keys of
// each row's top level as json.Unmarshal would, whatever else the row holds.
func TestTablePageReadsSamples(t *testing.T) {
	onBackends(t, func(t *testing.T, backend string) {
		f := setup(t, backend, nil)
		tbl := f.table("odd")
		rows := []string{
			`{"meta": {"note": "}\"{", "list": [1, {"file-number": 99}]}, "file-number": 5, "small-file-number": null,
			  "delete-file-number": "7", "manifest-number": 2e1, "snapshot-number": -0.5, "delete-ratio": 1e-1}`,
			`{"file\u002dnumber": 9, "small-file-number": 1.25}`,
			`{"file-number": 3, "file-number": 4}`,
		}
		for i, v := range rows {
			require.NoError(t, f.st.UpsertSnapshotMetrics(context.Background(), store.SnapshotMetrics{TableID: tbl.ID,
				SnapshotID: int64(i + 1), Value: json.RawMessage(v), RecordedAt: now.Add(time.Duration(i) * time.Hour)}))
		}
		r := f.do(http.MethodGet, tablePage(tbl), f.login(readToken), nil)
		require.Equal(t, http.StatusOK, r.code, r.body)
		charts := svgs(t, r.body)
		require.Len(t, charts, 8)
		point := func(h int, v string, snap int) string {
			return fmt.Sprintf("<title>%s: %s (snapshot %d)</title>", now.Add(time.Duration(h)*time.Hour).Format(time.RFC3339), v, snap)
		}
		for i, want := range [][]string{
			{point(0, "5", 1), point(1, "9", 2), point(2, "4", 3)}, // files: not the nested 99; the last of a repeated key
			{point(1, "1.25", 2)}, // small files: null is absent
			nil,                   // data-file MSE: absent
			nil,                   // delete files: a string is absent
			{point(0, "20", 1)},
			{point(0, "-0.5", 1)},
			{point(0, "0.1", 1)}, // delete debt
		} {
			require.Equal(t, len(want), strings.Count(charts[i+1], `<circle class="point"`), chartName(i))
			for _, w := range want {
				require.Contains(t, charts[i+1], w, chartName(i))
			}
		}
	})
}

func chartName(i int) string {
	return []string{"files", "small files", "data-file MSE", "delete files", "manifests", "snapshots", "delete ratio"}[i]
}
