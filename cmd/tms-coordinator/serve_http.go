package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"go.uber.org/zap"

	"github.com/tms-dev/tms/coordinator/admin"
	"github.com/tms-dev/tms/coordinator/config"
	"github.com/tms-dev/tms/coordinator/console"
	"github.com/tms-dev/tms/coordinator/flow"
	"github.com/tms-dev/tms/coordinator/httpapi"
	"github.com/tms-dev/tms/coordinator/scheduler"
	"github.com/tms-dev/tms/coordinator/submit"
	"github.com/tms-dev/tms/internal/cli"
	"github.com/tms-dev/tms/store"
)

// httpAPI is the HTTP side of serve: its metrics exist before the engine
// (they observe its claims), the server after it.
type httpAPI struct {
	listen  string    // the address to bind, "off" for none
	tokens  [3]string // admin, read, commit
	metrics *httpapi.Metrics
	ln      net.Listener
	srv     *httpapi.Server
	served  bool // serve ran: the listener is its
}

// newHTTPAPI is the API on listen with the tokens of res.
func newHTTPAPI(listen string, res *config.Resolved) *httpAPI {
	return &httpAPI{listen: listen, tokens: [3]string{res.AdminToken, res.ReadToken, res.CommitToken}}
}

// prepare creates the metrics and binds the address, so that a busy port
// fails serve before it claims anything.
func (api *httpAPI) prepare(ctx context.Context, st store.Store) error {
	m, err := httpapi.NewMetrics(httpapi.MetricsConfig{Store: st})
	if err != nil {
		return err
	}
	api.metrics = m
	if api.listen == "off" {
		return nil
	}
	var lc net.ListenConfig
	if api.ln, err = lc.Listen(ctx, "tcp", api.listen); err != nil {
		return cli.ExitError{Code: cli.ExitFailure, Err: fmt.Errorf("--listen %s: %w", api.listen, err)}
	}
	return nil
}

// observe hooks the metrics into the engine's configuration.
func (a *httpAPI) observe(cfg *scheduler.Config) {
	cfg.OnClaim, cfg.OnExecuted = a.metrics.ObserveClaim, a.metrics.ObserveExecution
}

// build creates the server over the running parts.
func (a *httpAPI) build(st store.Store, sub submit.Submitter, eng *scheduler.Engine, fl *flow.Flow, log *zap.Logger) error {
	a.metrics.AttachEngine(eng.Stats)
	a.metrics.AttachFlow(fl.Stats)
	a.metrics.AttachWatchdog(eng.Healthy)
	if a.ln == nil {
		return nil
	}
	res, err := httpapi.NewResources(httpapi.ResourcesConfig{Store: st, Submitter: sub, Log: log.Named("api"), Plan: fl.Plan,
		Catalogs: admin.LiveNodeCatalogs(st, eng.DeadNodeAfter(), time.Now)})
	if err != nil {
		return err
	}
	ui, err := console.New(console.Config{Store: st, AdminToken: a.tokens[0], ReadToken: a.tokens[1], Log: log.Named("ui"), Plan: fl.Plan,
		LocalLogPath: localLogPath(sub), NodeID: eng.NodeID(), Watchdog: eng.Healthy,
		Cancel: consoleCancel(st, sub), DeadNodeAfter: eng.DeadNodeAfter()})
	if err != nil {
		return err
	}
	a.srv, err = httpapi.New(httpapi.Config{
		Listen: a.ln.Addr().String(), Store: st, Metrics: a.metrics, Resources: res, UI: ui.Handler(), Log: log.Named("http"),
		AdminToken: a.tokens[0], ReadToken: a.tokens[1], CommitToken: a.tokens[2], CommitJobs: fl.CommitJobs(),
		Ready:          func(context.Context) error { return eng.Healthy() },
		OnCommitJobDue: func(at time.Time) { eng.WakeAt(flow.KindCommitJob, at) },
	})
	return err
}

// consoleCancel is the console's cancel: admin.CancelJob, as the API
// cancels, with its outcome as a message for the operator.
func consoleCancel(st store.Store, sub submit.Submitter) func(ctx context.Context, id int64) (string, error) {
	return func(ctx context.Context, id int64) (string, error) {
		res, err := admin.CancelJob(ctx, st, sub, id, "from the console", time.Now())
		var nf *admin.NotInFlightError
		switch {
		case errors.As(err, &nf):
			return fmt.Sprintf("job %d not cancelled: %s", id, nf.Error()), nil
		case err != nil:
			return "", fmt.Errorf("cancel job %d: %w", id, err)
		case res.Closed:
			return fmt.Sprintf("job %d cancelled: its row is closed", id), nil
		}
		return fmt.Sprintf("job %d: the submitter was asked to stop it; its runner closes the row", id), nil
	}
}

// addr is the bound address, "off" without a server.
func (a *httpAPI) addr() string {
	if a.ln == nil {
		return "off"
	}
	return a.ln.Addr().String()
}

// serve serves until ctx ends; it returns at once without a server.
func (a *httpAPI) serve(ctx context.Context) error {
	a.served = true
	if a.srv == nil {
		if a.ln != nil {
			return a.ln.Close()
		}
		return nil
	}
	return a.srv.Serve(ctx, a.ln)
}

// close closes the listener when serve never ran on it.
func (a *httpAPI) close() {
	if a.ln != nil && !a.served {
		_ = a.ln.Close()
	}
}

// localLogPath is the local submitter's LogPath, nil for other submitters.
func localLogPath(sub submit.Submitter) func(int64) string {
	if l, ok := sub.(*submit.LocalSubmitter); ok {
		return l.LogPath
	}
	return nil
}
