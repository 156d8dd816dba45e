// Package httpapi is the coordinator's HTTP server: liveness and readiness
// probes, Prometheus metrics, the commit-event webhook (POST
// /v1/commit-events) and the mount point of the /v1 REST resources, behind
// bearer-token authentication.
//
// It decides nothing about maintenance: a commit event only records its
// idempotency key and upserts the table's commit-job row, in one
// transaction, through package store; the coordinator's engine runs the
// job. It runs no SQL of its own and logs only through the *zap.Logger it is
// given.
package httpapi

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/tms-dev/tms/coordinator/flow"
	"github.com/tms-dev/tms/coordinator/ingress"
	"github.com/tms-dev/tms/internal/bearer"
	"github.com/tms-dev/tms/internal/invalid"
	"github.com/tms-dev/tms/store"
)

// Defaults of Config.
const (
	DefaultListen          = "127.0.0.1:8090"
	DefaultShutdownTimeout = 10 * time.Second
	DefaultReadyTimeout    = 2 * time.Second
	// MaxBodyBytes is the largest request body the commit webhook reads.
	MaxBodyBytes = 64 << 10
)

// Config configures a Server. Zero values take the defaults in each field's
// comment.
type Config struct {
	// Listen is the TCP address ListenAndServe binds. Defaults to
	// 127.0.0.1:8090 (loopback only).
	Listen string
	// Store is the ledger. Required.
	Store store.Store
	// AdminToken is the bearer token of the /v1 resources (all methods) and
	// of the commit webhook. Empty disables the /v1 resources: they answer
	// 403. Resolve references with secretref.Resolve.
	AdminToken string
	// ReadToken is an optional bearer token accepted for GET and HEAD on
	// the /v1 resources. Empty: reads need the admin token.
	ReadToken string
	// CommitToken is the bearer token of POST /v1/commit-events (the admin
	// token is accepted too). With neither set, the webhook answers 403.
	CommitToken string
	// Ready reports the engine's state for /readyz (the watchdog and
	// anything else the caller wants probed); nil counts as ready. It is
	// called with a context bounded by ReadyTimeout.
	Ready func(ctx context.Context) error
	// Resources serves /v1/policies, /v1/tables and /v1/jobs and their
	// subpaths, behind the admin/read token check. Nil: those routes are
	// not found.
	Resources http.Handler
	// UI is the operator console (package console), mounted on /ui and
	// its subpaths. It does its own authentication: the server adds no
	// token check. Nil: those routes are not found.
	UI http.Handler
	// Metrics are served on /metrics, and count the webhook's events.
	// Defaults to NewMetrics over Store with no engine attached.
	Metrics *Metrics
	// CommitJobs upserts the commit-job of each event the webhook records,
	// due after the flow's commit delay so a burst of commits coalesces into
	// one job: serve passes flow.Flow.CommitJobs. The zero value makes them
	// due at once.
	CommitJobs flow.CommitJobs
	// OnCommitJobDue, if set, is called after a transaction upserted
	// commit-jobs, with the time they fall due, so this node's commit pool
	// can look for them then instead of at its next poll: on PostgreSQL
	// only rows due at once are NOTIFYed, and SQLite has no NOTIFY. It must
	// be fast and must not block.
	OnCommitJobDue func(at time.Time)
	// ShutdownTimeout bounds the graceful shutdown: requests in progress
	// when the context ends get this long to finish. Defaults to 10s.
	ShutdownTimeout time.Duration
	// ReadyTimeout bounds one /readyz check. Defaults to 2s.
	ReadyTimeout time.Duration
	// Now is the clock of due times and received_at. Defaults to time.Now.
	Now func() time.Time
	// Log receives the server's logs. Defaults to a no-op logger.
	Log *zap.Logger
}

// Server is the coordinator's HTTP server. Create it with New.
type Server struct {
	cfg                 Config
	webhook             *ingress.Webhook
	admin, read, commit bearer.Token
	metrics             *Metrics
	handler             http.Handler
}

// New validates cfg and returns the server.
func New(cfg Config) (*Server, error) {
	if cfg.Store == nil {
		return nil, fmt.Errorf("%w: httpapi: a store is required", invalid.ErrArgument)
	}
	webhook, err := ingress.NewWebhook(ingress.WebhookConfig{Store: cfg.Store, CommitJobs: cfg.CommitJobs, OnCommitJobDue: cfg.OnCommitJobDue, Now: cfg.Now})
	if err != nil {
		return nil, err
	}
	cfg.Listen = cmp.Or(cfg.Listen, DefaultListen)
	cfg.ShutdownTimeout = cmp.Or(cfg.ShutdownTimeout, DefaultShutdownTimeout)
	cfg.ReadyTimeout = cmp.Or(cfg.ReadyTimeout, DefaultReadyTimeout)
	if cfg.ShutdownTimeout < 0 || cfg.ReadyTimeout < 0 {
		return nil, fmt.Errorf("%w: httpapi: timeouts must not be negative", invalid.ErrArgument)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = zap.NewNop()
	}
	if cfg.Metrics == nil {
		if cfg.Metrics, err = NewMetrics(MetricsConfig{Store: cfg.Store, Now: cfg.Now}); err != nil {
			return nil, err
		}
	}
	s := &Server{cfg: cfg, webhook: webhook, admin: bearer.New(cfg.AdminToken), read: bearer.New(cfg.ReadToken),
		commit: bearer.New(cfg.CommitToken), metrics: cfg.Metrics}
	s.handler = s.routes()
	return s, nil
}

// Handler returns the server's routes, for tests and for embedding in
// another server.
func (s *Server) Handler() http.Handler { return s.handler }

// Metrics returns the metrics the server exposes.
func (s *Server) Metrics() *Metrics { return s.metrics }

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", s.readyz)
	mux.Handle("GET /metrics", s.metrics.Handler())
	mux.HandleFunc("POST /v1/commit-events", s.commitEvents)
	if s.cfg.Resources != nil {
		guarded := s.resourceAuth(s.cfg.Resources)
		for _, p := range []string{"/v1/policies", "/v1/tables", "/v1/jobs", "/v1/plan"} {
			mux.Handle(p, guarded)
			mux.Handle(p+"/", guarded)
		}
	}
	if s.cfg.UI != nil {
		mux.Handle("/ui", s.cfg.UI)
		mux.Handle("/ui/", s.cfg.UI)
	}
	return jsonUnrouted(mux)
}

// jsonUnrouted answers the requests mux has no route for (404, or 405 for
// a path whose routes take other methods, with its Allow header) with the
// documented JSON error instead of the mux's plain text.
func jsonUnrouted(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, pattern := mux.Handler(r); pattern != "" {
			mux.ServeHTTP(w, r)
			return
		}
		rec := &statusOnly{header: w.Header()}
		mux.ServeHTTP(rec, r)
		code := cmp.Or(rec.code, http.StatusNotFound)
		msg := fmt.Sprintf("no route for %s %s", r.Method, r.URL.Path)
		if code == http.StatusMethodNotAllowed {
			msg = fmt.Sprintf("method %s is not allowed on %s (allowed: %s)", r.Method, r.URL.Path, w.Header().Get("Allow"))
		}
		writeError(w, code, msg)
	})
}

// statusOnly is a ResponseWriter that keeps the status code and drops the
// body; headers go to the real writer's.
type statusOnly struct {
	header http.Header
	code   int
}

func (s *statusOnly) Header() http.Header { return s.header }
func (s *statusOnly) WriteHeader(code int) {
	if s.code == 0 {
		s.code = code
	}
}
func (s *statusOnly) Write(b []byte) (int, error) {
	s.WriteHeader(http.StatusOK)
	return len(b), nil
}

// readyz answers 200 when the database answers with the expected schema
// and the engine is healthy, else 503 with the first reason.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.ReadyTimeout)
	defer cancel()
	reason := ""
	if err := store.SchemaCurrent(ctx, s.cfg.Store); err != nil {
		reason = "database: " + err.Error()
	} else if s.cfg.Ready != nil {
		if err := s.cfg.Ready(ctx); err != nil {
			reason = "engine: " + err.Error()
		}
	}
	if reason != "" {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "unavailable", "reason": reason})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// ListenAndServe binds cfg.Listen and serves until ctx ends (see Serve).
func (s *Server) ListenAndServe(ctx context.Context) error {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", s.cfg.Listen)
	if err != nil {
		return fmt.Errorf("httpapi: listen on %s: %w", s.cfg.Listen, err)
	}
	return s.Serve(ctx, ln)
}

// Serve serves on ln until ctx ends, then shuts down gracefully: it stops
// accepting connections and gives requests in progress ShutdownTimeout to
// finish before closing them. It returns nil after a shutdown that
// completed in time, and closes ln in every case.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          zap.NewStdLog(s.cfg.Log.Named("http")),
	}
	s.cfg.Log.Info("HTTP server listening", zap.Stringer("addr", ln.Addr()))
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("httpapi: serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.ShutdownTimeout)
	defer cancel()
	err := srv.Shutdown(sctx)
	if serr := <-served; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	if err != nil {
		_ = srv.Close()
		return fmt.Errorf("httpapi: shutdown: %w", err)
	}
	s.cfg.Log.Info("HTTP server stopped")
	return nil
}

// writeJSON answers with v as JSON.
func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// writeError answers {"error": msg}.
func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]string{"error": msg})
}
