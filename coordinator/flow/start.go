package flow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"go.uber.org/zap"

	"github.com/tms-dev/tms/coordinator/scheduler"
	"github.com/tms-dev/tms/coordinator/submit"
	"github.com/tms-dev/tms/jobspec"
	"github.com/tms-dev/tms/store"
)

// This file turns a gated run into a job: its ledger row, its spec and its
// submission.

// start inserts the ledger row and completes the claim in one transaction,
// then submits the job and records its external id. A table that got a job
// in flight since the gate (another node won the race the partial unique
// index decides) defers the row instead. A submit that fails closes the
// row failed: the task is gone, the next trigger tries again.
func (f *Flow) start(ctx context.Context, x *scheduler.Execution, kind string, tbl store.Table, types []gated, trig store.Trigger) error {
	cat, ok := f.catalogs[tbl.Catalog]
	if !ok {
		f.skip(kind, "unknown catalog", zap.String("catalog", tbl.Catalog))
		return x.Complete(ctx, nil)
	}
	spec := jobspec.Spec{
		Catalog: jobspec.CatalogSpec{WarehouseDir: cat.WarehouseDir},
		Table:   tbl.Namespace + "." + tbl.Name,
	}
	if cat.WarehouseDir == "" {
		spec.Catalog = jobspec.CatalogSpec{Name: cat.Name, Properties: cat.Properties}
	}
	var names []string
	opts := map[string]string{}
	for _, g := range types {
		spec.Steps = append(spec.Steps, jobspec.StepSpec{Type: g.c.Type, Policy: g.p.Content})
		names = append(names, string(g.c.Type))
		mergeJobOptions(opts, g.c.JobOptions)
	}
	rawSpec, err := json.Marshal(spec)
	if err != nil {
		return err
	}
	// The transaction that creates the ledger row and completes the claim
	// runs on its own deadline, not the claim's context: a callback
	// cancelled while that commit is in flight (a node shutting down past
	// its ShutdownTimeout) would see "context canceled" for a commit that
	// may have landed, and a landed row that nobody submits is closed lost
	// once the node is gone. Uncancelled, the commit either lands (and the
	// job is submitted below) or is refused by the claim's fence.
	cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), submitTimeout)
	defer ccancel()
	var job store.Job
	err = x.Complete(cctx, func(ctx context.Context, tx store.TxWriter) error {
		job, err = tx.CreateJob(ctx, store.NewJob{TableID: tbl.ID, PolicyID: types[0].p.ID, Types: names, Trigger: trig,
			Spec: rawSpec, Node: x.Node()})
		return err
	})
	if errors.Is(err, store.ErrInFlight) {
		return f.deferBusy(ctx, x, kind, tbl.ID, zap.Int64("table", tbl.ID), zap.Int64("policy", types[0].p.ID))
	}
	if err != nil {
		return err
	}
	// The claim is settled: the task row is gone, and the engine cancels a
	// callback whose row is gone at its next heartbeat. The ledger row
	// exists now and must get its job, so what follows runs on its own
	// deadline instead of the claim's context.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), submitTimeout)
	defer cancel()
	ident := tbl.Catalog + "." + spec.Table
	ext, err := f.sub.Submit(ctx, submit.JobRequest{JobID: job.ID, Fence: job.Fence, DBURL: f.cfg.DBURL, Table: ident,
		Types: spec.ChainTypes(), CatalogProps: cat.Secrets, JobOptions: opts})
	if err != nil {
		f.cfg.Log.Error("submit failed; closing the job row", zap.Int64("job", job.ID), zap.String("table", ident), zap.Error(err))
		ferr := f.st.FinishJob(ctx, job.ID, job.Fence, store.Finish{Status: store.StatusFailed, Error: "submit: " + err.Error()})
		return errors.Join(fmt.Errorf("submit job %d: %w", job.ID, err), ferr)
	}
	f.mu.Lock()
	f.runs[kind]++
	f.mu.Unlock()
	f.cfg.Log.Info("job submitted", zap.String("kind", kind), zap.Int64("job", job.ID), zap.String("table", ident),
		zap.Strings("types", names), zap.String("external_job_id", ext))
	// The runner may already have started: a stale fence here only means
	// the row moved on, and the external id is then not needed.
	if err := f.st.SetJobID(ctx, job.ID, job.Fence, ext, submit.Kind(f.sub)); err != nil && !errors.Is(err, store.ErrStaleFence) {
		return fmt.Errorf("record external job id of job %d: %w", job.ID, err)
	}
	return nil
}

// mergeJobOptions merges src into dst: a key both have keeps the larger
// value when both are amounts of the same kind (plain numbers: cores,
// executors; or sizes with Spark's suffixes: 4g, 512m, 1.5t), else the
// first value.
func mergeJobOptions(dst, src map[string]string) {
	for k, v := range src {
		old, ok := dst[k]
		if !ok {
			dst[k] = v
			continue
		}
		a, sizeA, errA := jobAmount(old)
		b, sizeB, errB := jobAmount(v)
		if errA == nil && errB == nil && sizeA == sizeB && b > a {
			dst[k] = v
		}
	}
}

// jobAmount reads a jobOptions value as an amount: a plain number, or a
// size with a Spark/JVM suffix (k, m, g, t, p, optionally followed by b;
// any case), in bytes. size says which.
func jobAmount(v string) (n float64, size bool, err error) {
	s := strings.ToLower(strings.TrimSpace(v))
	if n, err := strconv.ParseFloat(s, 64); err == nil {
		return n, false, nil
	}
	s = strings.TrimSuffix(s, "b")
	for i, unit := range []string{"k", "m", "g", "t", "p"} {
		if num, ok := strings.CutSuffix(s, unit); ok {
			n, err := strconv.ParseFloat(num, 64)
			if err != nil {
				return 0, false, err
			}
			return n * math.Pow(1024, float64(i+1)), true, nil
		}
	}
	return 0, false, fmt.Errorf("not an amount: %q", v)
}
