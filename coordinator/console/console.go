// Package console is the coordinator's operator console: server-rendered
// HTML pages under /ui over the ledger, with inline SVG charts drawn on the
// server. Its templates and CSS are embedded in the binary; pages load no
// external resource and run no JavaScript.
//
// Access is the /v1 API's: the read token or the admin token, given to the
// login form (which stores it in an HttpOnly, SameSite=Strict cookie) or
// as an Authorization: Bearer header. Without either token configured every
// page answers 403. Mutations need the admin token, a CSRF token bound to
// it, and a request that is not cross-site.
//
// It runs no SQL of its own: it reads through store.LedgerQueries and the
// Store's own reads.
package console

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/tms-dev/tms/coordinator/admin"
	"github.com/tms-dev/tms/coordinator/flow"
	"github.com/tms-dev/tms/coordinator/scheduler"
	"github.com/tms-dev/tms/internal/bearer"
	"github.com/tms-dev/tms/internal/invalid"
	"github.com/tms-dev/tms/store"
)

const (
	// DefaultTableLimit is the tables page's page size without ?limit=.
	DefaultTableLimit = 100
	// JobHistory is how many job rows a table page shows.
	JobHistory = 50
	// CookieName is the cookie the login form sets.
	CookieName = "tms_token"
	// maxFormBytes bounds a form body.
	maxFormBytes = 8 << 10
)

//go:embed templates/*.html
var templateFS embed.FS

// Config configures a Console.
type Config struct {
	// Store is the ledger. Required; it must implement store.LedgerQueries
	// (both backends do).
	Store store.Store
	// AdminToken is the admin token, already resolved; "" = not set. It
	// reads every page and may cancel jobs.
	AdminToken string
	// ReadToken is the read-only token, already resolved; "" = not set.
	// With neither token set every page answers 403.
	ReadToken string
	// Cancel cancels job row jobID and returns a message for the operator.
	// Nil: the job page shows no cancel button and the cancel POST answers
	// 501.
	Cancel func(ctx context.Context, jobID int64) (string, error)
	// LocalLogPath is where the local submitter of this node writes job
	// jobID's runner log (serve passes LocalSubmitter.LogPath); nil when
	// this node submits some other way.
	LocalLogPath func(jobID int64) string
	// NodeID is this coordinator's node id, and Watchdog its engine's
	// health (serve passes Engine.Healthy: nil, or why the watchdog holds
	// the node unhealthy). The queue page shows it on this node's row; nil:
	// not shown.
	NodeID   string
	Watchdog func() error
	// Plan computes a page of the plan (serve passes its flow's Plan). Nil:
	// the plan page answers 501.
	Plan func(ctx context.Context, q flow.PlanQuery) (flow.Plan, error)
	// DeadNodeAfter is the heartbeat age after which the queue page calls a
	// coordinator node dead; serve passes the engine's DeadNodeAfter().
	// Defaults to scheduler.DefaultHeartbeatInterval ×
	// scheduler.DefaultMissedHeartbeatsLimit (6 minutes). Must not be
	// negative.
	DeadNodeAfter time.Duration
	// Now is the clock. Defaults to time.Now.
	Now func() time.Time
	// Log receives the console's logs. Defaults to a no-op logger.
	Log *zap.Logger
}

// Console serves the /ui pages. Create it with New.
type Console struct {
	cfg         Config
	ledger      store.LedgerQueries
	admin, read bearer.Token
	csrfKey     []byte
	logins      loginLimiter
	pages       map[string]*template.Template
	handler     http.Handler
}

// New validates cfg and returns the console.
func New(cfg Config) (*Console, error) {
	if cfg.Store == nil {
		return nil, fmt.Errorf("%w: console: a store is required", invalid.ErrArgument)
	}
	if cfg.DeadNodeAfter < 0 {
		return nil, fmt.Errorf("%w: console: dead-node limit %s is negative", invalid.ErrArgument, cfg.DeadNodeAfter)
	}
	cfg.DeadNodeAfter = cmp.Or(cfg.DeadNodeAfter, scheduler.DefaultHeartbeatInterval*scheduler.DefaultMissedHeartbeatsLimit)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = zap.NewNop()
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("console: csrf key: %w", err)
	}
	c := &Console{cfg: cfg, ledger: cfg.Store, admin: bearer.New(cfg.AdminToken), read: bearer.New(cfg.ReadToken),
		csrfKey: key, pages: map[string]*template.Template{}}
	funcs := template.FuncMap{"when": c.when, "whenPtr": c.whenPtr, "join": strings.Join, "snap": snap, "tablePath": tablePath,
		"list": func(s ...string) []string { return s }}
	for _, p := range []string{"login", "message", "tables", "table", "job", "jobs", "queue", "plan"} {
		t, err := template.New(p).Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+p+".html")
		if err != nil {
			return nil, fmt.Errorf("console: template %s: %w", p, err)
		}
		c.pages[p] = t
	}
	c.handler = c.routes()
	return c, nil
}

// Handler returns the console's routes; mount it on /ui and /ui/.
func (c *Console) Handler() http.Handler { return c.handler }

func (c *Console) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /ui/login", c.loginForm)
	mux.HandleFunc("POST /ui/login", c.login)
	mux.HandleFunc("POST /ui/logout", c.logout)
	mux.Handle("GET /ui", c.authed(c.tables))
	mux.Handle("GET /ui/{$}", c.authed(c.tables))
	mux.Handle("GET /ui/tables/{name}", c.authed(c.table))
	mux.Handle("GET /ui/jobs", c.authed(c.jobs))
	mux.Handle("GET /ui/queue", c.authed(c.queue))
	mux.Handle("GET /ui/jobs/{id}", c.authed(c.job))
	mux.Handle("POST /ui/jobs/{id}/cancel", c.authed(c.cancel))
	mux.Handle("GET /ui/plan", c.authed(c.plan))
	mux.Handle("/ui/", c.authed(func(w http.ResponseWriter, r *http.Request, s session) {
		c.message(w, s, http.StatusNotFound, "Not found", "There is no page "+r.URL.Path+".")
	}))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src data:; form-action 'self'")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "same-origin") // no-referrer would make browsers send Origin: null on same-origin posts
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Cache-Control", "no-store")
		if !c.admin.Set() && !c.read.Set() {
			c.message(w, session{}, http.StatusForbidden, "Console disabled",
				"The console is disabled: no admin or read token is configured on this coordinator.")
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// page is what the layout renders.
type page struct {
	Title   string
	Session session
	CSRF    string
	Data    any
}

func (c *Console) render(w http.ResponseWriter, s session, code int, name, title string, data any) {
	p := page{Title: title, Session: s, Data: data}
	if s.LoggedIn {
		p.CSRF = c.csrf(s)
	}
	var buf bytes.Buffer
	if err := c.pages[name].ExecuteTemplate(&buf, "layout", p); err != nil {
		c.cfg.Log.Error("console: render", zap.String("page", name), zap.Error(err))
		http.Error(w, "internal error; the coordinator's log has the detail", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	_, _ = w.Write(buf.Bytes())
}

// messageData is the message page.
type messageData struct {
	Text string
	Back string // link back, optional
}

func (c *Console) message(w http.ResponseWriter, s session, code int, title, text string) {
	c.render(w, s, code, "message", title, messageData{Text: text})
}

// fail answers err: 404 for an unknown row, 400 for bad input, else 500
// (logged; the page does not show internal detail).
func (c *Console) fail(w http.ResponseWriter, r *http.Request, s session, err error) {
	var ie *admin.InputError
	switch {
	case errors.Is(err, store.ErrNotFound):
		c.message(w, s, http.StatusNotFound, "Not found", err.Error())
	case errors.As(err, &ie), errors.Is(err, invalid.ErrArgument):
		c.message(w, s, http.StatusBadRequest, "Bad request", err.Error())
	default:
		c.cfg.Log.Error("console request failed", zap.String("method", r.Method), zap.String("path", r.URL.Path), zap.Error(err))
		c.message(w, s, http.StatusInternalServerError, "Error", "Internal error; the coordinator's log has the detail.")
	}
}

type jobData struct {
	Job       store.Job
	Table     *store.Table
	TableName string
	Outcomes  string
	CanCancel bool
	// Log says where the runner's log is.
	Log string
	// Metrics are the metrics at the before and after snapshots, one row
	// per key either holds, in jobMetricKeys order.
	Metrics []metricRow
}

// metricRow is a metric before and after a job.
type metricRow struct{ Key, Before, After string }

// jobMetricKeys are the sampler's keys (sampler.Metrics) in the order the
// job page lists them.
var jobMetricKeys = []string{"file-number", "data-file-number", "small-file-number", "data-file-mse", "avg-file-size",
	"total-file-size", "record-count", "delete-file-number", "position-delete-file-number", "equality-delete-file-number",
	"position-delete-record-count", "equality-delete-record-count", "deletion-vector-number", "delete-ratio",
	"max-partition-delete-file-number", "manifest-number", "avg-manifest-size", "snapshot-number", "oldest-snapshot-age-ms", "partition-number",
	"max-partition-small-file-number"}

// jobMetrics reads the metrics at j's before and after snapshots.
func (c *Console) jobMetrics(ctx context.Context, j store.Job) ([]metricRow, error) {
	if j.BeforeSnapshotID == nil && j.AfterSnapshotID == nil {
		return nil, nil
	}
	ms, err := c.cfg.Store.ListSnapshotMetrics(ctx, j.TableID)
	if err != nil {
		return nil, err
	}
	decode := func(m *store.SnapshotMetrics) map[string]any {
		var v map[string]any
		if m != nil {
			_ = json.Unmarshal(m.Value, &v)
		}
		return v
	}
	before, after := decode(store.MetricsAt(ms, j.BeforeSnapshotID, j.PolicyID)), decode(store.MetricsAt(ms, j.AfterSnapshotID, j.PolicyID))
	if before == nil && after == nil {
		return nil, nil
	}
	show := func(v any) string {
		if f, ok := v.(float64); ok {
			return formatValue(f)
		}
		return formatMetric(v)
	}
	var rows []metricRow
	for _, k := range jobMetricKeys {
		b, okB := before[k]
		a, okA := after[k]
		if okB || okA {
			rows = append(rows, metricRow{Key: k, Before: show(b), After: show(a)})
		}
	}
	return rows, nil
}

// jobLog says where job j's runner log is: this node's log folder for the
// local submitter, or the platform's, under the external id.
func (c *Console) jobLog(j store.Job) string {
	switch {
	case j.JobID == "":
		return "none yet: the job has not been submitted"
	case j.Submitter == "local" && c.cfg.LocalLogPath != nil:
		return fmt.Sprintf("%s on node %s (the local submitter's --log-dir)", c.cfg.LocalLogPath(j.ID), j.Node)
	case j.Submitter == "local":
		return fmt.Sprintf("job-%d.log in the --log-dir of node %s", j.ID, j.Node)
	case j.Submitter == "":
		return "with the job's platform, external id " + j.JobID
	}
	return fmt.Sprintf("with the %s submitter's platform, external id %s", j.Submitter, j.JobID)
}

func (c *Console) loadJob(w http.ResponseWriter, r *http.Request, s session) (store.Job, bool) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		c.message(w, s, http.StatusBadRequest, "Bad request", fmt.Sprintf("job id %q: want a positive integer", r.PathValue("id")))
		return store.Job{}, false
	}
	j, err := c.cfg.Store.GetJob(r.Context(), id)
	if err != nil {
		c.fail(w, r, s, err)
		return store.Job{}, false
	}
	return j, true
}

func (c *Console) job(w http.ResponseWriter, r *http.Request, s session) {
	j, ok := c.loadJob(w, r, s)
	if !ok {
		return
	}
	d := jobData{Job: j, CanCancel: s.Admin && j.InFlight() && c.cfg.Cancel != nil, Log: c.jobLog(j)}
	var err error
	if d.Metrics, err = c.jobMetrics(r.Context(), j); err != nil {
		c.fail(w, r, s, err)
		return
	}
	if t, err := c.cfg.Store.GetTable(r.Context(), j.TableID); err == nil {
		d.Table = &t
		d.TableName = t.Catalog + "." + t.Namespace + "." + t.Name
	} else if !errors.Is(err, store.ErrNotFound) {
		c.fail(w, r, s, err)
		return
	}
	if len(j.Outcomes) > 0 {
		var buf bytes.Buffer
		if json.Indent(&buf, j.Outcomes, "", "  ") == nil {
			d.Outcomes = buf.String()
		} else {
			d.Outcomes = string(j.Outcomes)
		}
	}
	c.render(w, s, http.StatusOK, "job", fmt.Sprintf("Job %d", j.ID), d)
}

// cancel is POST /ui/jobs/{id}/cancel: admin token, CSRF token, not
// cross-site.
func (c *Console) cancel(w http.ResponseWriter, r *http.Request, s session) {
	if c.cfg.Cancel == nil {
		c.message(w, s, http.StatusNotImplemented, "Not implemented", "Cancelling from the console is not available on this coordinator.")
		return
	}
	if !s.Admin {
		c.message(w, s, http.StatusForbidden, "Forbidden", "The read-only token cannot cancel jobs: this needs the admin token.")
		return
	}
	if crossSite(r) {
		c.message(w, s, http.StatusForbidden, "Forbidden", "CSRF check failed: cross-site request.")
		return
	}
	if !c.csrfOK(w, r, s) {
		return
	}
	j, ok := c.loadJob(w, r, s)
	if !ok {
		return
	}
	msg, err := c.cfg.Cancel(r.Context(), j.ID)
	if err != nil {
		c.fail(w, r, s, err)
		return
	}
	c.cfg.Log.Info("console: job cancel requested", zap.Int64("job", j.ID), zap.String("result", msg))
	c.render(w, s, http.StatusOK, "message", fmt.Sprintf("Job %d", j.ID),
		messageData{Text: cmp.Or(msg, "Cancel requested."), Back: fmt.Sprintf("/ui/jobs/%d", j.ID)})
}

// when formats a time for the pages; zero is a dash.
func (c *Console) when(t time.Time) string {
	if t.IsZero() {
		return "–"
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

// snap formats an optional snapshot id.
func snap(id *int64) string {
	if id == nil {
		return "–"
	}
	return strconv.FormatInt(*id, 10)
}

// tablePath is the page of t.
func tablePath(t store.Table) string {
	return "/ui/tables/" + url.PathEscape(t.Catalog+"."+t.Namespace+"."+t.Name)
}
