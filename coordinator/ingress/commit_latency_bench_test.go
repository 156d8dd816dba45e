package ingress_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/tms-dev/tms/coordinator/flow"
	"github.com/tms-dev/tms/coordinator/ingress"
	"github.com/tms-dev/tms/coordinator/scheduler"
	"github.com/tms-dev/tms/store"
	"github.com/tms-dev/tms/store/testdb"
)

// BenchmarkCommitToClaimNotify measures commit → claim latency through the
// catalog trigger on PostgreSQL: one sample per iteration (-benchtime Nx
// for N samples). A commit is what a JDBC catalog client does, an UPDATE of
// iceberg_tables.metadata_location (run on a connection of the bench's own,
// standing in for Spark or iceberg-go); the claim is the commit-job
// callback starting. The commit delay is 0 and the engine's pools poll only
// hourly, so the figure is the ingress and wake path alone: trigger →
// NOTIFY → listener → table lookup → upsert (+ task NOTIFY and local wake)
// → claim. It reports p50, p99 and max in milliseconds. Goal: p99 < 1 s.
func BenchmarkCommitToClaimNotify(b *testing.B) {
	benchCommitToClaim(b, time.Hour, func(f *flow.Flow, eng *scheduler.Engine, _ string) func(context.Context, int64) (bool, error) {
		return func(ctx context.Context, id int64) (bool, error) { return f.UpsertCommit(ctx, eng, id) }
	}, 0)
}

// BenchmarkCommitToClaimPoll10s is the baseline: the original design's
// 10 s polling. The same commits go through the same trigger and
// listener, but the commit-job row is written by a plain INSERT that wakes
// nobody (no task NOTIFY, no local wake), so the engine finds it at its
// next 10 s poll. Commits are spread uniformly
// over the poll period; a sample takes 10 s on average, so run few
// (-benchtime 12x). Expect ~5 s p50 and ~10 s p99.
func BenchmarkCommitToClaimPoll10s(b *testing.B) {
	const poll = 10 * time.Second
	benchCommitToClaim(b, poll, func(_ *flow.Flow, _ *scheduler.Engine, dbURL string) func(context.Context, int64) (bool, error) {
		silent, err := pgx.Connect(b.Context(), dbURL)
		require.NoError(b, err)
		b.Cleanup(func() { _ = silent.Close(context.Background()) })
		return func(ctx context.Context, id int64) (bool, error) {
			// A plain INSERT: Scheduler.UpsertTask would NOTIFY the row's
			// name (due now) or name@due-time (due later), and either wakes
			// the pool before its poll.
			key := flow.CommitJobKey(id)
			tag, err := silent.Exec(ctx, `INSERT INTO scheduled_tasks (task_name, task_instance, execution_time)
				VALUES ($1, $2, now()) ON CONFLICT DO NOTHING`, key.Name, key.Instance)
			return tag.RowsAffected() == 1, err
		}
	}, poll)
}

// benchCommitToClaim runs the commit → claim measurement with an engine
// polling every poll and the catalog listener enqueueing through the
// function enqueue returns. Before each commit it waits a random time up
// to spread, so commits land at random points of the poll period.
func benchCommitToClaim(b *testing.B, poll time.Duration,
	enqueue func(f *flow.Flow, eng *scheduler.Engine, dbURL string) func(context.Context, int64) (bool, error), spread time.Duration) {
	ctx := context.Background()
	dbURL := testdb.PostgresURL(b)
	_, err := store.Migrate(ctx, dbURL, zap.NewNop())
	require.NoError(b, err)
	st, err := store.Open(ctx, dbURL, zap.NewNop())
	require.NoError(b, err)
	b.Cleanup(func() { _ = st.Close() })
	testdb.PostgresExec(b, dbURL, `CREATE TABLE iceberg_tables (catalog_name VARCHAR NOT NULL, table_namespace VARCHAR NOT NULL,
		table_name VARCHAR NOT NULL, iceberg_type VARCHAR, metadata_location VARCHAR, previous_metadata_location VARCHAR,
		PRIMARY KEY (catalog_name, table_namespace, table_name));
		INSERT INTO iceberg_tables VALUES ('prod', 'sales', 'orders', 'TABLE', 'file:///w/v0.metadata.json', NULL)`)
	_, err = store.InstallCatalogTrigger(ctx, dbURL, "")
	require.NoError(b, err)
	_, err = st.RegisterTable(ctx, store.TableRef{Catalog: "prod", Namespace: "sales", Name: "orders", UUID: "uuid-orders"})
	require.NoError(b, err)

	fl, err := flow.NewFlow(st, nil, flow.FlowConfig{DBURL: dbURL, CommitDelay: -1})
	require.NoError(b, err)
	claimed := make(chan time.Time, 1)
	eng, err := scheduler.New(st, scheduler.Config{PollInterval: poll}, scheduler.Kind{
		Name: flow.KindCommitJob,
		Handler: func(context.Context, *scheduler.Execution) error {
			claimed <- time.Now()
			return nil
		},
	})
	require.NoError(b, err)
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- eng.Run(runCtx) }()
	<-eng.Ready()
	ready := make(chan struct{}, 1)
	listened := make(chan error, 1)
	go func() {
		listened <- ingress.ListenCatalogCommits(runCtx, st, ingress.CatalogNotifyConfig{
			DBURL: dbURL, Ready: func() { ready <- struct{}{} }, Enqueue: enqueue(fl, eng, dbURL),
		})
	}()
	<-ready
	defer func() {
		stop()
		require.NoError(b, <-ran)
		require.NoError(b, <-listened)
	}()

	conn, err := pgx.Connect(ctx, dbURL) // the catalog client
	require.NoError(b, err)
	defer conn.Close(ctx)

	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		if spread > 0 {
			b.StopTimer()
			time.Sleep(rand.N(spread))
			b.StartTimer()
		}
		start := time.Now()
		_, err := conn.Exec(ctx, `UPDATE iceberg_tables SET previous_metadata_location = metadata_location, metadata_location = $1
			WHERE catalog_name = 'prod' AND table_namespace = 'sales' AND table_name = 'orders'`,
			fmt.Sprintf("file:///w/v%d.metadata.json", i+1))
		require.NoError(b, err)
		select {
		case at := <-claimed:
			lat = append(lat, at.Sub(start))
		case <-time.After(time.Minute):
			b.Fatalf("commit %d not claimed within a minute", i)
		}
		b.StopTimer()
		// Let the finished row's deletion land, so the next commit makes a
		// new row instead of a rerun of a picked one.
		for commitJobs(b, st) > 0 {
			time.Sleep(time.Millisecond)
		}
		b.StartTimer()
	}
	b.StopTimer()
	slices.Sort(lat)
	pct := func(p float64) float64 {
		rank := int(math.Ceil(p*float64(len(lat)))) - 1 // nearest rank
		return float64(lat[max(0, rank)].Microseconds()) / 1000
	}
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "max-ms")
	b.ReportMetric(float64(len(lat)), "samples")
}
