package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/tms-dev/tms/coordinator/scheduler"
	"github.com/tms-dev/tms/internal/cli"
	"github.com/tms-dev/tms/store"
)

// benchKind is the no-op task kind the benchmark drains.
const benchKind = "bench-noop"

// runBench drains --tasks no-op one-shot tasks with --nodes in-process
// engines of --threads threads each, every engine on its own connection
// pool as separate processes would be. Rows are inserted before the clock
// starts, as river-baseline does; the figure counts committed completions
// (rows deleted under their fence), not handler calls.
func runBench(ctx context.Context, env cli.Env) error {
	fs := cli.NewFlags("tms-coordinator", "bench", env.Stderr)
	var (
		db                    string
		schema                string
		tasks, nodes, threads int
		timeout               time.Duration
	)
	fs.StringVar(&db, "db", dbFromEnv(), "database URL: postgres://… or sqlite://PATH (env TMS_DB)")
	fs.StringVar(&schema, "schema", "tms_bench", "PostgreSQL only: schema to drop, recreate and use")
	fs.IntVar(&tasks, "tasks", 20000, "one-shot no-op tasks to drain")
	fs.IntVar(&nodes, "nodes", 2, "in-process coordinator nodes")
	fs.IntVar(&threads, "threads", 8, "threads per node")
	fs.DurationVar(&timeout, "timeout", 5*time.Minute, "give up after this long")
	if err := cli.Parse(fs, env.Args); err != nil {
		return err
	}
	if tasks < 1 || nodes < 1 || threads < 1 {
		return cli.Usagef("--tasks, --nodes and --threads must be positive")
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	if strings.HasPrefix(db, "postgres") {
		var err error
		if db, err = store.ResetPostgresSchema(ctx, db, schema); err != nil {
			return classify(err)
		}
		db = withPoolSize(db, threads+4)
	}
	if _, err := store.Migrate(ctx, db, env.Log); err != nil {
		return classify(err)
	}

	kind := scheduler.Kind{Name: benchKind, Handler: func(context.Context, *scheduler.Execution) error { return nil }}

	engines := make([]*scheduler.Engine, nodes)
	for i := range engines {
		s, err := store.Open(ctx, db, env.Log)
		if err != nil {
			return classify(err)
		}
		defer s.Close()
		engines[i], err = scheduler.New(s, scheduler.Config{
			NodeID:       fmt.Sprintf("bench-%d", i),
			Pools:        map[string]int{benchKind: threads},
			PollInterval: time.Second,
			Log:          env.Log,
		}, kind)
		if err != nil {
			return err
		}
		if i == 0 {
			if err := insertBenchTasks(ctx, s, tasks); err != nil {
				return err
			}
		}
	}

	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	errs := make(chan error, nodes)
	start := time.Now()
	for _, e := range engines {
		wg.Go(func() { errs <- e.Run(runCtx) })
	}
	completed := func() int64 {
		var n int64
		for _, e := range engines {
			n += e.Stats().Completed
		}
		return n
	}
	var elapsed time.Duration
	for ctx.Err() == nil {
		if completed() >= int64(tasks) {
			elapsed = time.Since(start)
			break
		}
		time.Sleep(2 * time.Millisecond) // like river-baseline's wait loop
	}
	stop()
	wg.Wait()
	close(errs)
	for err := range errs {
		// A node still starting when the others drained everything is
		// stopped in its registration: that is not a failure.
		if err != nil && !(elapsed > 0 && errors.Is(err, context.Canceled)) {
			return err
		}
	}
	if elapsed == 0 {
		return fmt.Errorf("only %d of %d tasks done before the timeout", completed(), tasks)
	}
	fmt.Fprintf(env.Stdout, "tms: %d no-op tasks, %d nodes x %d threads, %s, drained in %.3fs\n",
		tasks, nodes, threads, backendOf(db), elapsed.Seconds())
	_, err := fmt.Fprintf(env.Stdout, "tms_tasks_per_sec=%.0f\n", float64(tasks)/elapsed.Seconds())
	return err
}

func insertBenchTasks(ctx context.Context, sch store.Scheduler, n int) error {
	ts := make([]store.NewTask, n)
	for i := range ts {
		ts[i] = store.NewTask{TaskKey: store.TaskKey{Name: benchKind, Instance: fmt.Sprint(i)}}
	}
	created, err := sch.ScheduleTasks(ctx, ts, time.Now().Add(-time.Second))
	if err != nil {
		return err
	}
	if created != n {
		return errors.New("bench: the task table was not empty")
	}
	return nil
}

// withPoolSize sets pool_max_conns unless the URL sets it: each thread
// holds a connection while it completes its task.
func withPoolSize(db string, n int) string {
	u, err := url.Parse(db)
	if err != nil {
		return db
	}
	q := u.Query()
	if q.Get("pool_max_conns") == "" {
		q.Set("pool_max_conns", fmt.Sprint(n))
	}
	u.RawQuery = q.Encode()
	return u.String()
}

func backendOf(db string) string {
	if strings.HasPrefix(db, "sqlite") {
		return "sqlite"
	}
	return "postgres"
}
