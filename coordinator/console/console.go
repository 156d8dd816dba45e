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
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/tms-dev/tms/internal/bearer"

	"go.uber.org/zap"

	"github.com/tms-dev/tms/coordinator/admin"
	"github.com/tms-dev/tms/coordinator/scheduler"
	"github.com/tms-dev/tms/store"
)

// Limits of the pages.
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
	sched       store.Scheduler // nil if the store has no task table
	admin, read bearer.Token
	csrfKey     []byte
	pages       map[string]*template.Template
	handler     http.Handler
}

// New validates cfg and returns the console.
func New(cfg Config) (*Console, error) {
	if cfg.Store == nil {
		return nil, fmt.Errorf("%w: console: a store is required", store.ErrInvalidArgument)
	}
	ledger, err := store.LedgerQueriesOf(cfg.Store)
	if err != nil {
		return nil, err
	}
	if cfg.DeadNodeAfter < 0 {
		return nil, fmt.Errorf("%w: console: dead-node limit %s is negative", store.ErrInvalidArgument, cfg.DeadNodeAfter)
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
	c := &Console{cfg: cfg, ledger: ledger, admin: bearer.New(cfg.AdminToken), read: bearer.New(cfg.ReadToken),
		csrfKey: key, pages: map[string]*template.Template{}}
	c.sched, _ = store.TasksOf(cfg.Store) // both backends have it; a test double may not
	funcs := template.FuncMap{"when": c.when, "join": strings.Join, "snap": snap, "tablePath": tablePath}
	for _, p := range []string{"login", "message", "tables", "table", "job", "jobs", "queue"} {
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
	for _, p := range []struct{ path, title string }{{"/ui/plan", "Plan"}} {
		mux.Handle("GET "+p.path, c.authed(func(w http.ResponseWriter, r *http.Request, s session) {
			c.message(w, s, http.StatusOK, p.title, "This page is not built yet.")
		}))
	}
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

// session is who a request is.
type session struct {
	LoggedIn bool
	Admin    bool
	tok      string // the token that authenticated the request
}

// CSRF is the form token of mutations: HMAC-SHA256 of the session's token
// under the console's random key, hex.
func (c *Console) csrf(s session) string {
	m := hmac.New(sha256.New, c.csrfKey)
	m.Write([]byte(s.tok))
	return hex.EncodeToString(m.Sum(nil))
}

// requestToken returns the token r carries: the bearer header, else the
// cookie.
func requestToken(r *http.Request) string {
	if tok, ok := bearer.FromRequest(r); ok {
		return tok
	}
	ck, err := r.Cookie(CookieName)
	if err != nil {
		return ""
	}
	raw, err := base64.RawURLEncoding.DecodeString(ck.Value)
	if err != nil {
		return ""
	}
	return string(raw)
}

// sessionOf checks r's token against both tokens (no early exit).
func (c *Console) sessionOf(r *http.Request) session {
	tok := requestToken(r)
	if tok == "" {
		return session{}
	}
	isAdmin, isRead := c.admin.Matches(tok), c.read.Matches(tok)
	if !isAdmin && !isRead {
		return session{}
	}
	return session{LoggedIn: true, Admin: isAdmin, tok: tok}
}

// authed serves h to requests with a valid token and sends the others to
// the login form.
func (c *Console) authed(h func(http.ResponseWriter, *http.Request, session)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := c.sessionOf(r)
		if !s.LoggedIn {
			http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
			return
		}
		h(w, r, s)
	})
}

// crossSite reports whether r may come from another origin. A browser's
// Sec-Fetch-Site, which pages cannot set, decides when present: only
// same-origin passes (same-site is another port or subdomain). Without it,
// the Origin header must name this host; "null" (a privacy-sensitive
// context) does not. A request with neither is not a browser's form post.
func crossSite(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" {
		return site != "same-origin"
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return false
	}
	u, err := url.Parse(origin)
	return err != nil || u.Host == "" || !strings.EqualFold(u.Host, r.Host)
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
	case errors.As(err, &ie), errors.Is(err, store.ErrInvalidArgument):
		c.message(w, s, http.StatusBadRequest, "Bad request", err.Error())
	default:
		c.cfg.Log.Error("console request failed", zap.String("method", r.Method), zap.String("path", r.URL.Path), zap.Error(err))
		c.message(w, s, http.StatusInternalServerError, "Error", "Internal error; the coordinator's log has the detail.")
	}
}

// loginData is the login page.
type loginData struct{ Error string }

func (c *Console) loginForm(w http.ResponseWriter, r *http.Request) {
	c.render(w, c.sessionOf(r), http.StatusOK, "login", "Log in", loginData{})
}

func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	if crossSite(r) {
		c.message(w, session{}, http.StatusForbidden, "Forbidden", "CSRF check failed: cross-site request.")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		c.render(w, session{}, http.StatusBadRequest, "login", "Log in", loginData{Error: "Bad form: " + err.Error()})
		return
	}
	tok := r.PostForm.Get("token")
	isAdmin, isRead := c.admin.Matches(tok), c.read.Matches(tok)
	if tok == "" || (!isAdmin && !isRead) {
		c.render(w, session{}, http.StatusUnauthorized, "login", "Log in", loginData{Error: "Invalid token."})
		return
	}
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: base64.RawURLEncoding.EncodeToString([]byte(tok)),
		Path: "/ui", HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	http.Redirect(w, r, "/ui", http.StatusSeeOther)
}

// logout clears the cookie. A request with a valid token must carry its
// CSRF token (the nav's form does); one without may always log out.
func (c *Console) logout(w http.ResponseWriter, r *http.Request) {
	s := c.sessionOf(r)
	if crossSite(r) {
		c.message(w, s, http.StatusForbidden, "Forbidden", "CSRF check failed: cross-site request.")
		return
	}
	if s.LoggedIn && !c.csrfOK(w, r, s) {
		return
	}
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: "", Path: "/ui", MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
}

// metricKeys are the metrics the tables page and the charts show, by the
// sampler's JSON keys (sampler.Metrics).
var metricKeys = []struct{ Key, Label string }{
	{"data-file-number", "Data files"},
	{"small-file-number", "Small files"},
	{"data-file-mse", "Data-file MSE"},
	{"delete-file-number", "Delete files"},
	{"manifest-number", "Manifests"},
	{"snapshot-number", "Snapshots"},
}

// chartKeys are the metrics the table page plots.
var chartKeys = []struct{ Key, Label string }{
	{"file-number", "Files (data and delete)"},
	{"small-file-number", "Small files"},
	{"delete-file-number", "Delete files"},
	{"manifest-number", "Manifests"},
	{"snapshot-number", "Snapshots"},
}

// tableRow is a row of the tables page.
type tableRow struct {
	store.Table
	Metrics []string // formatted, in metricKeys order; "–" if absent
	LastJob *store.Job
}

type tablesData struct {
	Columns []string
	Rows    []tableRow
	Limit   int
	Next    string // ?after= of the next page, "" on the last
}

func (c *Console) tables(w http.ResponseWriter, r *http.Request, s session) {
	q := r.URL.Query()
	limit := DefaultTableLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > store.MaxQueryLimit {
			c.message(w, s, http.StatusBadRequest, "Bad request", fmt.Sprintf("limit %q: want 1 to %d", v, store.MaxQueryLimit))
			return
		}
		limit = n
	}
	var after int64
	if v := q.Get("after"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			c.message(w, s, http.StatusBadRequest, "Bad request", fmt.Sprintf("after %q: want a table id", v))
			return
		}
		after = n
	}
	rows, err := c.ledger.ListTableStatus(r.Context(), after, limit)
	if err != nil {
		c.fail(w, r, s, err)
		return
	}
	d := tablesData{Rows: make([]tableRow, len(rows)), Limit: limit}
	for _, k := range metricKeys {
		d.Columns = append(d.Columns, k.Label)
	}
	for i, ts := range rows {
		var m map[string]any
		if ts.Metrics != nil {
			_ = json.Unmarshal(ts.Metrics.Value, &m)
		}
		row := tableRow{Table: ts.Table, LastJob: ts.LastJob}
		for _, k := range metricKeys {
			row.Metrics = append(row.Metrics, formatMetric(m[k.Key]))
		}
		d.Rows[i] = row
	}
	if len(rows) == limit {
		d.Next = strconv.FormatInt(rows[len(rows)-1].ID, 10)
	}
	c.render(w, s, http.StatusOK, "tables", "Tables", d)
}

// formatMetric renders a metric value: integers as such, other numbers
// with 4 significant digits, absent as a dash.
func formatMetric(v any) string {
	f, ok := v.(float64)
	switch {
	case v == nil:
		return "–"
	case !ok:
		return fmt.Sprint(v)
	case f == math.Trunc(f) && math.Abs(f) < 1e15:
		return strconv.FormatInt(int64(f), 10)
	default:
		return strconv.FormatFloat(f, 'g', 4, 64)
	}
}

// Chart geometry, in SVG user units.
const (
	chartW, chartH         = 640, 180
	padL, padR, padT, padB = 60, 16, 12, 28
	plotW, plotH           = chartW - padL - padR, chartH - padT - padB
	timelineH              = 40
	timeLabel              = "2006-01-02 15:04"
)

// point is a plotted value.
type point struct {
	X, Y  float64
	Title string
}

// chart is one server-drawn line plot.
type chart struct {
	Label        string
	W, H         int
	Points       []point
	Polyline     string
	X0, X1       float64 // plot area
	Y0, Y1       float64
	YMax, YMin   string // axis labels
	TFirst, TEnd string
}

// timeline marks every metrics row once, at its recorded time.
type timeline struct {
	W, H   int
	X0, X1 float64
	Y      float64
	// Marks is one <circle class="sample"> per row, built in charts from
	// numbers and escaped text (a template range over 10,000 rows is most
	// of a page's time); N is how many.
	Marks  template.HTML
	N      int
	TFirst string
	TEnd   string
}

type tableData struct {
	Table    store.Table
	Name     string
	Timeline *timeline
	Charts   []chart
	Jobs     []store.Job
}

func (c *Console) table(w http.ResponseWriter, r *http.Request, s session) {
	ctx := r.Context()
	t, err := c.findTable(ctx, r.PathValue("name"))
	if err != nil {
		c.fail(w, r, s, err)
		return
	}
	ms, err := c.cfg.Store.ListSnapshotMetrics(ctx, t.ID)
	if err != nil {
		c.fail(w, r, s, err)
		return
	}
	jobs, err := c.cfg.Store.ListJobs(ctx, t.ID, JobHistory)
	if err != nil {
		c.fail(w, r, s, err)
		return
	}
	d := tableData{Table: t, Name: t.Catalog + "." + t.Namespace + "." + t.Name, Jobs: jobs}
	if len(ms) > 0 {
		d.Timeline, d.Charts = charts(ms)
	}
	c.render(w, s, http.StatusOK, "table", d.Name, d)
}

// findTable resolves a table given as a row id or CATALOG.NAMESPACE.TABLE
// (the newest incarnation).
func (c *Console) findTable(ctx context.Context, s string) (store.Table, error) {
	if s != "" && !strings.Contains(s, ".") {
		id, err := strconv.ParseInt(s, 10, 64)
		if err != nil || id <= 0 {
			return store.Table{}, fmt.Errorf("%w: table %q: want a table id or CATALOG.NAMESPACE.TABLE", store.ErrInvalidArgument, s)
		}
		return c.cfg.Store.GetTable(ctx, id)
	}
	name, err := admin.ParseTableName(s, "table")
	if err != nil {
		return store.Table{}, err
	}
	return c.cfg.Store.FindTable(ctx, name.Catalog, name.Namespace, name.Table)
}

// maxTitled is how many marks a plot draws with a tooltip each; above it
// a chart draws its line only, and the timeline bare marks, so a table with
// 10,000 samples renders a page of a few hundred KB in milliseconds.
const maxTitled = 200

// chartSample is the part of a metrics row the charts read, in chartKeys
// order (nil: absent).
type chartSample struct {
	Files     *float64 `json:"file-number"`
	Small     *float64 `json:"small-file-number"`
	Deletes   *float64 `json:"delete-file-number"`
	Manifests *float64 `json:"manifest-number"`
	Snapshots *float64 `json:"snapshot-number"`
}

func (c chartSample) values() [5]*float64 {
	return [5]*float64{c.Files, c.Small, c.Deletes, c.Manifests, c.Snapshots}
}

// charts draws the sample timeline and one chart per chartKeys metric
// over ms (oldest first, at least one row). The timeline keeps one mark per
// row (an operator counts samples there); a chart's line keeps, per pixel
// column, the lowest and highest value, which is all a line of plotW pixels
// can show.
func charts(ms []store.SnapshotMetrics) (*timeline, []chart) {
	t0, t1 := ms[0].RecordedAt, ms[len(ms)-1].RecordedAt
	span := t1.Sub(t0).Seconds()
	xOf := func(at time.Time) float64 {
		if span <= 0 {
			return padL + plotW/2
		}
		return round(padL + plotW*at.Sub(t0).Seconds()/span)
	}
	first, last := t0.UTC().Format(timeLabel), t1.UTC().Format(timeLabel)
	values := make([][5]*float64, len(ms))
	tl := &timeline{W: chartW, H: timelineH, X0: padL, X1: padL + plotW, Y: timelineH / 2, TFirst: first, TEnd: last}
	var marks strings.Builder
	titled := len(ms) <= maxTitled
	y := strconv.FormatFloat(tl.Y, 'f', -1, 64)
	for i, m := range ms {
		var cs chartSample
		_ = json.Unmarshal(m.Value, &cs)
		values[i] = cs.values()
		x := strconv.FormatFloat(xOf(m.RecordedAt), 'f', -1, 64)
		if titled {
			title := fmt.Sprintf("snapshot %d, policy %d, %s", m.SnapshotID, m.PolicyID, m.RecordedAt.UTC().Format(time.RFC3339))
			marks.WriteString(`<circle class="sample" cx="` + x + `" cy="` + y + `" r="4"><title>` + template.HTMLEscapeString(title) + "</title></circle>\n")
		} else {
			marks.WriteString(`<circle class="sample" cx="` + x + `" cy="` + y + `" r="2"/>` + "\n")
		}
	}
	tl.Marks = template.HTML(marks.String()) // numbers and escaped text only
	tl.N = len(ms)
	var out []chart
	for ki, k := range chartKeys {
		ch := chart{Label: k.Label, W: chartW, H: chartH, X0: padL, X1: padL + plotW, Y0: padT, Y1: padT + plotH,
			TFirst: first, TEnd: last}
		maxV, n := 0.0, 0
		for _, v := range values {
			if f := v[ki]; f != nil {
				maxV, n = math.Max(maxV, *f), n+1
			}
		}
		top := maxV
		if top <= 0 {
			top = 1
		}
		yOf := func(f float64) float64 { return round(padT + plotH*(1-math.Max(f, 0)/top)) }
		var pts []string
		add := func(x, y float64) {
			pts = append(pts, strconv.FormatFloat(x, 'f', -1, 64)+","+strconv.FormatFloat(y, 'f', -1, 64))
		}
		if n <= maxTitled {
			for i, v := range values {
				if f := v[ki]; f != nil {
					p := point{X: xOf(ms[i].RecordedAt), Y: yOf(*f),
						Title: fmt.Sprintf("%s: %s (snapshot %d)", ms[i].RecordedAt.UTC().Format(time.RFC3339), formatMetric(*f), ms[i].SnapshotID)}
					ch.Points = append(ch.Points, p)
					add(p.X, p.Y)
				}
			}
		} else {
			// Per pixel column, the first value, then the column's extremes
			// in time order: the line's shape at this width.
			col, lo, hi := math.NaN(), 0.0, 0.0
			flush := func() {
				if math.IsNaN(col) {
					return
				}
				add(col, hi) // smaller y is higher on screen
				if lo != hi {
					add(col, lo)
				}
			}
			for i, v := range values {
				f := v[ki]
				if f == nil {
					continue
				}
				x, yv := math.Round(xOf(ms[i].RecordedAt)), yOf(*f)
				if x != col {
					flush()
					col, lo, hi = x, yv, yv
					continue
				}
				lo, hi = math.Max(lo, yv), math.Min(hi, yv)
			}
			flush()
		}
		ch.Polyline = strings.Join(pts, " ")
		ch.YMax, ch.YMin = formatMetric(maxV), "0"
		out = append(out, ch)
	}
	return tl, out
}

func round(f float64) float64 { return math.Round(f*10) / 10 }

type jobData struct {
	Job       store.Job
	Table     *store.Table
	TableName string
	Outcomes  string
	CanCancel bool
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
	d := jobData{Job: j, CanCancel: s.Admin && j.InFlight() && c.cfg.Cancel != nil}
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

// csrfOK parses r's form and checks its csrf field against s; it answers
// the request itself when not.
func (c *Console) csrfOK(w http.ResponseWriter, r *http.Request, s session) bool {
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		c.message(w, s, http.StatusBadRequest, "Bad request", "Bad form: "+err.Error())
		return false
	}
	got, err := hex.DecodeString(r.PostForm.Get("csrf"))
	want, _ := hex.DecodeString(c.csrf(s))
	if err != nil || !hmac.Equal(got, want) {
		c.message(w, s, http.StatusForbidden, "Forbidden", "CSRF check failed.")
		return false
	}
	return true
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
