package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/catalogs"
	"github.com/tms-dev/tms/internal/cli"
	"github.com/tms-dev/tms/testdata"
)

// busyDuration is how long the busy-table test keeps a writer and the
// maintenance chain running against each other, per ledger backend. The
// backends run one after the other: the test keeps a writer and a runner
// process busy, and the suite's timing-sensitive tests share the machine.
// BenchmarkBusyTableSoak is the long run.
const busyDuration = 25 * time.Second

// busyPolicies make every type of the chain work on every run: compaction
// of every small file, a manifest rewrite from 4 manifests, expiry of
// snapshots older than 2 s beyond the last 3.
var busyPolicies = map[string]string{
	"compaction.json":       `{"type": "compaction", "content": {"minDataFileMse": 0, "rewriteOptions": {"min-input-files": 2}}}`,
	"manifest-rewrite.json": `{"type": "manifest-rewrite", "content": {"minManifestNumber": 4}}`,
	"snapshot-expiry.json":  `{"type": "snapshot-expiry", "content": {"older-than": "2s", "retain-last": 3}}`,
}

// A writer appends every 100–300 ms (and now and then deletes rows,
// copy-on-write) while the runner replays compaction → manifest-rewrite →
// snapshot-expiry on the table over and over, on each ledger backend. At
// the end the table holds exactly the rows the writer intended (read by
// this test's own Parquet reader, not through iceberg-go's scan), most
// compactions landed, and no file is left that the table does not
// reference.
func TestBusyTableChain(t *testing.T) {
	runnerBinary(t) // skips under -short
	t.Parallel()
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			l := newLedger(t, be.url(t))
			const name = "tms.small_files"
			dir := testdata.BuildAdjustedT(t, func(r *testdata.Recipe) { r.Appends = 20 }, name)
			w := newBusyWriter(t, dir, name)
			w.setProps(t, iceberg.Properties{table.WriteDeleteModeKey: table.WriteModeCopyOnWrite})
			pdir := t.TempDir()
			args := []string{"replay", "--warehouse-dir", dir, "--table", name, "--ledger", l.url, "--json",
				"--types", "compaction,manifest-rewrite,snapshot-expiry"}
			for f, content := range busyPolicies {
				require.NoError(t, os.WriteFile(filepath.Join(pdir, f), []byte(content), 0o600))
				args = append(args, "--policy", filepath.Join(pdir, f))
			}

			ctx, stop := context.WithCancel(t.Context())
			var wg sync.WaitGroup
			wg.Add(1)
			go func() { defer wg.Done(); w.run(ctx, true, 100, 300, 1) }()
			outcomes := map[string]map[string]int{}
			rebased, rebases := map[string]int{}, map[string]int{}
			deadline := time.Now().Add(busyDuration)
			runs := 0
			for time.Now().Before(deadline) {
				r := execRunner(t, nil, args...)
				require.Equal(t, cli.ExitOK, r.code, r.stderr)
				var rep replayJSON
				require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep), r.stdout)
				for _, ty := range rep.Types {
					if outcomes[ty.Type] == nil {
						outcomes[ty.Type] = map[string]int{}
					}
					outcomes[ty.Type][ty.Outcome]++
					if ty.Type == "compaction" && ty.Outcome != "done" {
						t.Logf("compaction %s: %s", ty.Outcome, ty.Reason)
					}
					if n := rebasesIn(ty.Reason); n > 0 {
						rebased[ty.Type]++
						rebases[ty.Type] += n
					}
				}
				runs++
			}
			stop()
			wg.Wait()
			require.NoError(t, w.err)
			t.Logf("%d runs; outcomes %v; runs that rebased %v, rebases %v; writer: %d appends, %d deletes, %d commits retried after a conflict",
				runs, outcomes, rebased, rebases, w.appends, w.deletes, w.conflicts)

			require.Equal(t, w.intendedIDs(), readIDs(t, w.load(t)), "the table holds exactly the writer's rows")
			c := outcomes["compaction"]
			worked := c["done"] + c["conflict"] + c["ended-drift"]
			require.GreaterOrEqual(t, c["done"]*10, worked*6, "compaction lands in most runs that had work")
			require.Zero(t, outcomes["compaction"]["failed"])
			require.Empty(t, strayFiles(t, w.load(t)), "every file under the table is referenced")
		})
	}
}

// rebasesIn reads "rebased N times" from a done reason.
func rebasesIn(reason string) int {
	i := strings.Index(reason, "rebased ")
	if i < 0 {
		return 0
	}
	var n int
	_, _ = fmt.Sscanf(reason[i:], "rebased %d times", &n)
	return n
}

// busyWriter appends rows with fresh ids to a table, as a streaming writer
// would, retrying a commit that lost to a concurrent one, and now and then
// deletes some of its earlier rows; it remembers which ids should be live.
// It deletes the files of its own failed commits, so that whatever is left
// unreferenced was left by someone else.
type busyWriter struct {
	cat   catalog.Catalog
	ident table.Identifier
	mu    sync.Mutex
	live  map[int64]bool
	next  int64
	err   error

	appends, deletes, conflicts int
}

func newBusyWriter(t testing.TB, dir, name string) *busyWriter {
	t.Helper()
	cat, err := catalogs.OpenLocal(t.Context(), dir, false)
	require.NoError(t, err)
	ident, err := catalogs.ParseIdent(name)
	require.NoError(t, err)
	w := &busyWriter{cat: cat, ident: ident, live: map[int64]bool{}, next: 10_000_000}
	for _, id := range readIDs(t, w.load(t)) {
		w.live[id] = true
	}
	return w
}

func (w *busyWriter) load(t testing.TB) *table.Table {
	t.Helper()
	tbl, err := w.cat.LoadTable(t.Context(), w.ident)
	require.NoError(t, err)
	return tbl
}

func (w *busyWriter) setProps(t *testing.T, props iceberg.Properties) {
	t.Helper()
	txn := w.load(t).NewTransaction()
	require.NoError(t, txn.SetProperties(props))
	_, err := txn.Commit(t.Context())
	require.NoError(t, err)
}

// run writes until ctx is done, one commit every minMs to maxMs
// milliseconds, each append touching days partitions (days of ts from
// 2024-01-01); with deletes, every 8th write deletes a few live ids instead.
func (w *busyWriter) run(ctx context.Context, deletes bool, minMs, maxMs, days int) {
	rng := rand.New(rand.NewPCG(7, 9))
	for i := 1; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Duration(minMs+rng.IntN(max(1, maxMs-minMs))) * time.Millisecond):
		}
		var err error
		if deletes && i%8 == 0 {
			err = w.commit(ctx, w.deleteSome(rng))
		} else {
			err = w.commit(ctx, w.appendRows(10, days))
		}
		if err != nil && ctx.Err() == nil {
			w.err = err
			return
		}
	}
}

// op is one writer commit on a freshly loaded table; apply reports which
// ids it adds and removes once it commits.
type op func(ctx context.Context, tbl *table.Table) (*table.Table, []int64, []int64, error)

func (w *busyWriter) commit(ctx context.Context, do op) error {
	for attempt := 0; attempt < 20; attempt++ {
		rec := &createdFiles{}
		loaded, err := w.cat.LoadTable(ctx, w.ident)
		if err != nil {
			return err
		}
		tbl := table.New(loaded.Identifier(), loaded.Metadata(), loaded.MetadataLocation(), func(ctx context.Context) (iceio.IO, error) {
			fs, err := loaded.FS(ctx)
			if err != nil {
				return nil, err
			}
			return recordingFS{fs.(iceio.WriteFileIO), rec}, nil
		}, w.cat)
		_, added, removed, err := do(ctx, tbl)
		if err == nil {
			w.mu.Lock()
			for _, id := range added {
				w.live[id] = true
			}
			for _, id := range removed {
				delete(w.live, id)
			}
			w.mu.Unlock()
			return nil
		}
		rec.removeAll()
		if ctx.Err() != nil {
			return nil
		}
		if !errors.Is(err, table.ErrCommitFailed) && !strings.Contains(err.Error(), "requirement failed") &&
			!strings.Contains(err.Error(), "database is locked") && !strings.Contains(err.Error(), "SQLITE_BUSY") {
			return err
		}
		w.conflicts++
	}
	return fmt.Errorf("writer: gave up after 20 conflicts")
}

func (w *busyWriter) appendRows(n, days int) op {
	return func(ctx context.Context, tbl *table.Table) (*table.Table, []int64, []int64, error) {
		sc, err := table.SchemaToArrowSchema(tbl.Schema(), nil, false, false)
		if err != nil {
			return nil, nil, nil, err
		}
		w.mu.Lock()
		first := w.next
		w.mu.Unlock()
		rows := make([]string, n)
		ids := make([]int64, n)
		for i := range rows {
			ids[i] = first + int64(i)
			rows[i] = fmt.Sprintf(`{"id": %d, "category": "books", "amount": %d.25, "ts": "2024-01-%02dT10:00:00Z", "note": "busy"}`, ids[i], i, 1+i%days)
		}
		at, err := array.TableFromJSON(memory.DefaultAllocator, sc, []string{"[" + strings.Join(rows, ",") + "]"})
		if err != nil {
			return nil, nil, nil, err
		}
		defer at.Release()
		out, err := tbl.AppendTable(ctx, at, int64(n), nil)
		if err != nil {
			return nil, nil, nil, err
		}
		w.mu.Lock()
		w.next += int64(n)
		w.appends++
		w.mu.Unlock()
		return out, ids, nil, nil
	}
}

// deleteSome deletes up to 3 of the writer's own live ids.
func (w *busyWriter) deleteSome(rng *rand.Rand) op {
	return func(ctx context.Context, tbl *table.Table) (*table.Table, []int64, []int64, error) {
		w.mu.Lock()
		var mine []int64
		for id := range w.live {
			if id >= 10_000_000 {
				mine = append(mine, id)
			}
		}
		w.mu.Unlock()
		slices.Sort(mine)
		rng.Shuffle(len(mine), func(i, j int) { mine[i], mine[j] = mine[j], mine[i] })
		victims := mine[:min(3, len(mine))]
		if len(victims) == 0 {
			return tbl, nil, nil, nil
		}
		out, err := tbl.Delete(ctx, iceberg.IsIn(iceberg.Reference("id"), victims...), nil)
		if err != nil {
			return nil, nil, nil, err
		}
		w.mu.Lock()
		w.deletes++
		w.mu.Unlock()
		return out, nil, victims, nil
	}
}

func (w *busyWriter) intendedIDs() []int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]int64, 0, len(w.live))
	for id := range w.live {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// createdFiles remembers the files a writer attempt created.
type createdFiles struct {
	mu    sync.Mutex
	paths []string
}

// removeAll deletes the files of a failed attempt: a lost commit race in
// the SQL catalog is reported before anything lands, so none of them is
// referenced.
func (c *createdFiles) removeAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.paths {
		_ = os.Remove(strings.TrimPrefix(p, "file://"))
	}
}

// recordingFS records every file created through it.
type recordingFS struct {
	iceio.WriteFileIO
	rec *createdFiles
}

func (r recordingFS) Create(name string) (iceio.FileWriter, error) {
	r.rec.mu.Lock()
	r.rec.paths = append(r.rec.paths, name)
	r.rec.mu.Unlock()
	return r.WriteFileIO.Create(name)
}

func (r recordingFS) WriteFile(name string, p []byte) error {
	r.rec.mu.Lock()
	r.rec.paths = append(r.rec.paths, name)
	r.rec.mu.Unlock()
	return r.WriteFileIO.WriteFile(name, p)
}

// readIDs reads the id column of every live data file of tbl's current
// snapshot straight from Parquet (arrow-go), without iceberg-go's scan; the
// busy tests write no delete files (copy-on-write), which it checks.
func readIDs(t testing.TB, tbl *table.Table) []int64 {
	t.Helper()
	tasks, err := tbl.Scan().PlanFiles(t.Context())
	require.NoError(t, err)
	var ids []int64
	for _, task := range tasks {
		require.Empty(t, slices.Concat(task.DeleteFiles, task.EqualityDeleteFiles, task.DeletionVectorFiles), "no delete files")
		pf, err := file.OpenParquetFile(strings.TrimPrefix(task.File.FilePath(), "file://"), false)
		require.NoError(t, err)
		fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: 1 << 16}, memory.DefaultAllocator)
		require.NoError(t, err)
		at, err := fr.ReadTable(t.Context())
		require.NoError(t, err)
		idx := at.Schema().FieldIndices("id")
		require.Len(t, idx, 1)
		for _, chunk := range at.Column(idx[0]).Data().Chunks() {
			ids = append(ids, chunk.(*array.Int64).Int64Values()...)
		}
		at.Release()
		require.NoError(t, pf.Close())
	}
	slices.Sort(ids)
	return ids
}

// strayFiles lists the files under tbl's location, other than metadata
// JSON files, that no snapshot of tbl references.
func strayFiles(t *testing.T, tbl *table.Table) []string {
	t.Helper()
	fs, err := tbl.FS(t.Context())
	require.NoError(t, err)
	refs := map[string]bool{}
	for _, snap := range tbl.Metadata().Snapshots() {
		refs[snap.ManifestList] = true
		mans, err := snap.Manifests(fs)
		require.NoError(t, err)
		for _, m := range mans {
			refs[m.FilePath()] = true
			entries, err := m.FetchEntries(fs, false)
			require.NoError(t, err)
			for _, e := range entries {
				refs[e.DataFile().FilePath()] = true
			}
		}
	}
	var stray []string
	root := strings.TrimPrefix(tbl.Location(), "file://")
	require.NoError(t, filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasSuffix(p, ".metadata.json") || strings.HasSuffix(p, ".crc") {
			return err
		}
		if !refs["file://"+p] {
			stray = append(stray, p)
		}
		return nil
	}))
	return stray
}

// BenchmarkBusyTableSoak is the soak of a busy table: a writer appends to
// tms.partitioned (7 day partitions) every 300 ms, each append touching
// every partition, for TMS_SOAK (default 3m), while an onCommit-style chain
// runs compaction → manifest-rewrite → snapshot-expiry through the real
// binary whenever the table changed and 10 s passed since the last run
// finished (the coordinator's onCommit trigger with minIntervalMs 10000,
// without the coordinator). It reports the share of compaction runs that
// landed, the data files at the end against right after a quiet compaction
// (both as the chain left them), and the writer's commits that lost to a
// maintenance commit. Run once (-benchtime 1x).
func BenchmarkBusyTableSoak(b *testing.B) {
	runnerBinary(b) // skips under -short
	soak := 3 * time.Minute
	if v := os.Getenv("TMS_SOAK"); v != "" {
		d, err := time.ParseDuration(v)
		require.NoError(b, err)
		soak = d
	}
	for b.Loop() {
		const name = "tms.partitioned"
		dir := b.TempDir()
		_, err := testdata.Build(b.Context(), dir, testdata.BuildOptions{Recipes: []string{name}, Scale: 1})
		require.NoError(b, err)
		ledger := "sqlite://" + filepath.Join(b.TempDir(), "soak.db")
		pdir := b.TempDir()
		args := []string{"replay", "--warehouse-dir", dir, "--table", name, "--ledger", ledger, "--json",
			"--types", "compaction,manifest-rewrite,snapshot-expiry"}
		for f, content := range busyPolicies {
			require.NoError(b, os.WriteFile(filepath.Join(pdir, f), []byte(content), 0o600))
			args = append(args, "--policy", filepath.Join(pdir, f))
		}
		run := func() replayJSON {
			r := execRunner(b, nil, args...)
			require.Equal(b, cli.ExitOK, r.code, r.stderr)
			var rep replayJSON
			require.NoError(b, json.Unmarshal([]byte(r.stdout), &rep), r.stdout)
			return rep
		}
		dataFiles := func(rep replayJSON) float64 {
			v, _ := rep.Types[len(rep.Types)-1].MetricsAfter["data-file-number"].(float64)
			return v
		}
		quiet := dataFiles(run())

		w := newBusyWriter(b, dir, name)
		ctx, stop := context.WithCancel(b.Context())
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { defer wg.Done(); w.run(ctx, false, 300, 301, 7) }()
		var runs, done, rebasedRuns, rebaseCount int
		var last replayJSON
		seen := w.appends
		deadline := time.Now().Add(soak)
		for time.Now().Before(deadline) {
			time.Sleep(10 * time.Second) // cooldown since the last run finished
			w.mu.Lock()
			changed := w.appends != seen
			seen = w.appends
			w.mu.Unlock()
			if !changed {
				continue
			}
			last = run()
			runs++
			if n := rebasesIn(last.Types[0].Reason); n > 0 {
				rebasedRuns++
				rebaseCount += n
			}
			if last.Types[0].Outcome == "done" {
				done++
			} else {
				b.Logf("compaction %s: %s", last.Types[0].Outcome, last.Types[0].Reason)
			}
		}
		stop()
		wg.Wait()
		require.NoError(b, w.err)
		end := dataFiles(last)
		b.ReportMetric(float64(done)/float64(max(runs, 1))*100, "compaction-done-%")
		b.ReportMetric(float64(runs), "chain-runs")
		b.ReportMetric(float64(rebasedRuns), "compactions-rebased")
		b.ReportMetric(float64(rebaseCount), "rebases")
		b.ReportMetric(quiet, "quiet-data-files")
		b.ReportMetric(end, "end-data-files")
		b.ReportMetric(end/max(quiet, 1), "end/quiet")
		b.ReportMetric(float64(w.conflicts)/float64(max(w.appends, 1))*100, "writer-conflict-%")
		b.Logf("writer: %d appends, %d commits retried after losing to a maintenance commit", w.appends, w.conflicts)
	}
}
