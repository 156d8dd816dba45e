package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/tms-dev/tms/coordinator/console"
	"github.com/tms-dev/tms/coordinator/httpapi"
	"github.com/tms-dev/tms/internal/invalid"
	"github.com/tms-dev/tms/store"
	"github.com/tms-dev/tms/store/testdb"
)

// The tokens setup configures.
const (
	adminToken = "admin-secret"
	readToken  = "read;secret \"quoted\"" // not a valid cookie value as is
)

const csp = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; form-action 'self'"

var now = time.Date(2030, 6, 1, 12, 0, 0, 0, time.UTC)

// fixture is one test's console over its own database.
type fixture struct {
	t   *testing.T
	st  store.Store
	srv *httptest.Server

	mu      sync.Mutex
	cancels []int64
}

// onBackends runs fn once per backend, in parallel.
func onBackends(t *testing.T, fn func(t *testing.T, backend string)) {
	for _, backend := range []string{store.BackendPostgres, store.BackendSQLite} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			fn(t, backend)
		})
	}
}

// setup migrates a fresh database of backend and serves a console over it
// with both tokens and a recording Cancel; mutate (may be nil) adjusts the
// config first.
func setup(t *testing.T, backend string, mutate func(*console.Config)) *fixture {
	t.Helper()
	log := zaptest.NewLogger(t)
	_, st := testdb.OpenMigrated(t, backend, log)
	f := &fixture{t: t, st: st}
	cfg := console.Config{Store: st, AdminToken: adminToken, ReadToken: readToken, Log: log,
		Now: func() time.Time { return now },
		Cancel: func(_ context.Context, id int64) (string, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.cancels = append(f.cancels, id)
			return fmt.Sprintf("cancel of job %d <requested>", id), nil
		}}
	if mutate != nil {
		mutate(&cfg)
	}
	c, err := console.New(cfg)
	require.NoError(t, err)
	f.srv = httptest.NewServer(c.Handler())
	t.Cleanup(f.srv.Close)
	return f
}

// response is what a request answered.
type response struct {
	code   int
	body   string
	header http.Header
	resp   *http.Response
}

// do sends a request without following redirects. auth is a cookie
// (*http.Cookie), a bearer token (string) or nil; form (may be nil) is
// sent url-encoded; hdr are extra headers as name, value pairs.
func (f *fixture) do(method, path string, auth any, form url.Values, hdr ...string) response {
	f.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequestWithContext(f.t.Context(), method, f.srv.URL+path, body)
	require.NoError(f.t, err)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	switch a := auth.(type) {
	case *http.Cookie:
		req.AddCookie(a)
	case string:
		req.Header.Set("Authorization", "Bearer "+a)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	client := f.srv.Client()
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := client.Do(req)
	require.NoError(f.t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(f.t, err)
	// Every answer carries the security headers.
	require.Equal(f.t, csp, resp.Header.Get("Content-Security-Policy"), "%s %s", method, path)
	require.Equal(f.t, "DENY", resp.Header.Get("X-Frame-Options"))
	require.Equal(f.t, "same-origin", resp.Header.Get("Referrer-Policy"))
	return response{code: resp.StatusCode, body: string(out), header: resp.Header, resp: resp}
}

// login posts tok to the login form, expects success and returns the
// cookie.
func (f *fixture) login(tok string) *http.Cookie {
	f.t.Helper()
	r := f.do(http.MethodPost, "/ui/login", nil, url.Values{"token": {tok}})
	require.Equal(f.t, http.StatusSeeOther, r.code, r.body)
	require.Equal(f.t, "/ui", r.header.Get("Location"))
	cookies := r.resp.Cookies()
	require.Len(f.t, cookies, 1)
	return cookies[0]
}

// table registers cat.db.name.
func (f *fixture) table(name string) store.Table {
	f.t.Helper()
	t, err := f.st.RegisterTable(context.Background(), store.TableRef{Catalog: "cat", Namespace: "db", Name: name, UUID: "u-" + name})
	require.NoError(f.t, err)
	return t
}

// job creates an in-flight job row of table.
func (f *fixture) job(tableID int64) store.Job {
	f.t.Helper()
	j, err := f.st.CreateJob(context.Background(), store.NewJob{TableID: tableID, Types: []string{"compaction", "snapshot-expiry"},
		Trigger: store.TriggerCommit})
	require.NoError(f.t, err)
	return j
}

// fail finishes job j as failed with msg.
func (f *fixture) fail(j store.Job, msg string) {
	f.t.Helper()
	require.NoError(f.t, f.st.StartJob(context.Background(), j.ID, j.Fence, time.Time{}))
	require.NoError(f.t, f.st.FinishJob(context.Background(), j.ID, j.Fence, store.Finish{Status: store.StatusFailed, Error: msg,
		Outcomes: json.RawMessage(`[{"type":"compaction","outcome":"failed","error":"<b>boom</b>"}]`)}))
}

func (f *fixture) cancelled() []int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]int64(nil), f.cancels...)
}

func tablePage(t store.Table) string {
	return "/ui/tables/" + url.PathEscape(t.Catalog+"."+t.Namespace+"."+t.Name)
}

var csrfField = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)

// csrfOf returns the CSRF token of a page's forms.
func csrfOf(t *testing.T, body string) string {
	t.Helper()
	m := csrfField.FindStringSubmatch(body)
	require.NotNil(t, m, body)
	return m[1]
}

func TestForbiddenWithoutTokens(t *testing.T) {
	t.Parallel()
	f := setup(t, store.BackendSQLite, func(c *console.Config) { c.AdminToken, c.ReadToken = "", "" })
	tbl := f.table("orders")
	for _, p := range []string{"/ui", "/ui/", "/ui/login", tablePage(tbl), "/ui/jobs/1", "/ui/nope"} {
		r := f.do(http.MethodGet, p, "", nil)
		require.Equal(t, http.StatusForbidden, r.code, p)
		require.Contains(t, r.body, "no admin or read token is configured")
		require.NotContains(t, r.body, "orders")
	}
	// Not even a token that would have been right gets in.
	r := f.do(http.MethodPost, "/ui/login", nil, url.Values{"token": {""}})
	require.Equal(t, http.StatusForbidden, r.code)
	require.Empty(t, r.resp.Cookies())
	require.Equal(t, http.StatusForbidden, f.do(http.MethodPost, "/ui/jobs/1/cancel", adminToken, nil).code)
}

func TestRedirectsToLogin(t *testing.T) {
	t.Parallel()
	f := setup(t, store.BackendSQLite, nil)
	tbl := f.table("orders")
	j := f.job(tbl.ID)
	bad := &http.Cookie{Name: console.CookieName, Value: "d3Jvbmc"} // base64url("wrong")
	for _, auth := range []any{nil, bad, "wrong"} {
		for _, p := range []string{"/ui", "/ui/", tablePage(tbl), fmt.Sprintf("/ui/jobs/%d", j.ID), "/ui/jobs", "/ui/queue", "/ui/nope"} {
			r := f.do(http.MethodGet, p, auth, nil)
			require.Equal(t, http.StatusSeeOther, r.code, "%s %v", p, auth)
			require.Equal(t, "/ui/login", r.header.Get("Location"))
			require.NotContains(t, r.body, "orders")
		}
		r := f.do(http.MethodPost, fmt.Sprintf("/ui/jobs/%d/cancel", j.ID), auth, url.Values{})
		require.Equal(t, http.StatusSeeOther, r.code)
	}
	require.Empty(t, f.cancelled())
	// A bearer header works like the cookie.
	r := f.do(http.MethodGet, "/ui", readToken, nil)
	require.Equal(t, http.StatusOK, r.code)
	require.Contains(t, r.body, "cat.db.orders")
}

func TestLogin(t *testing.T) {
	t.Parallel()
	f := setup(t, store.BackendSQLite, nil)
	f.table("orders")

	r := f.do(http.MethodGet, "/ui/login", nil, nil)
	require.Equal(t, http.StatusOK, r.code)
	require.Equal(t, "text/html; charset=utf-8", r.header.Get("Content-Type"))
	require.Contains(t, r.body, `<form method="post" action="/ui/login">`)
	require.NotContains(t, r.body, "/ui/logout", "no nav before login")

	for _, wrong := range []string{"", "admin-secre", adminToken + "x", "<script>alert(1)</script>"} {
		r := f.do(http.MethodPost, "/ui/login", nil, url.Values{"token": {wrong}})
		require.Equal(t, http.StatusUnauthorized, r.code, wrong)
		require.Contains(t, r.body, `<p class="err">Invalid token.</p>`)
		require.Contains(t, r.body, `name="token"`)
		require.NotContains(t, r.body, "<script>alert(1)</script>", "the candidate is not echoed")
		require.Empty(t, r.resp.Cookies())
	}

	for _, tok := range []string{adminToken, readToken} {
		ck := f.login(tok)
		require.Equal(t, console.CookieName, ck.Name)
		require.True(t, ck.HttpOnly)
		require.Equal(t, http.SameSiteStrictMode, ck.SameSite)
		require.Equal(t, "/ui", ck.Path)
		require.False(t, ck.Secure, "plain HTTP")
		r := f.do(http.MethodGet, "/ui", ck, nil)
		require.Equal(t, http.StatusOK, r.code)
		require.Contains(t, r.body, "cat.db.orders")
		require.Contains(t, r.body, `action="/ui/logout"`)
	}

	// A login from another site is refused.
	r = f.do(http.MethodPost, "/ui/login", nil, url.Values{"token": {adminToken}}, "Origin", "https://evil.example")
	require.Equal(t, http.StatusForbidden, r.code)
	require.Empty(t, r.resp.Cookies())

	// Logout needs the session's CSRF token, then clears the cookie.
	ck := f.login(readToken)
	r = f.do(http.MethodPost, "/ui/logout", ck, url.Values{})
	require.Equal(t, http.StatusForbidden, r.code)
	require.Contains(t, r.body, "CSRF check failed")
	require.Empty(t, r.resp.Cookies())
	r = f.do(http.MethodPost, "/ui/logout", ck, url.Values{"csrf": {csrfOf(t, f.do(http.MethodGet, "/ui", ck, nil).body)}})
	require.Equal(t, http.StatusSeeOther, r.code)
	require.Equal(t, "/ui/login", r.header.Get("Location"))
	cookies := r.resp.Cookies()
	require.Len(t, cookies, 1)
	require.Equal(t, console.CookieName, cookies[0].Name)
	require.Negative(t, cookies[0].MaxAge)
}

func TestSecureCookieOverTLS(t *testing.T) {
	t.Parallel()
	f := setup(t, store.BackendSQLite, nil)
	c, err := console.New(console.Config{Store: f.st, ReadToken: readToken})
	require.NoError(t, err)
	srv := httptest.NewTLSServer(c.Handler())
	defer srv.Close()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+"/ui/login", strings.NewReader("token="+url.QueryEscape(readToken)))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	client := srv.Client()
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Len(t, resp.Cookies(), 1)
	require.True(t, resp.Cookies()[0].Secure)
}

func TestEscaping(t *testing.T) {
	onBackends(t, func(t *testing.T, backend string) {
		f := setup(t, backend, nil)
		const evil = "<script>alert(1)</script>"
		const evilErr = `<img src=x onerror="alert(2)">&'`
		tbl := f.table(evil)
		f.fail(f.job(tbl.ID), evilErr)
		require.NoError(t, f.st.UpsertSnapshotMetrics(context.Background(), store.SnapshotMetrics{TableID: tbl.ID, SnapshotID: 1,
			Value: json.RawMessage(`{"file-number": 3, "data-file-number": 2}`), RecordedAt: now}))
		ck := f.login(readToken)

		r := f.do(http.MethodGet, "/ui", ck, nil)
		require.Equal(t, http.StatusOK, r.code)
		require.NotContains(t, r.body, evil)
		require.Contains(t, r.body, "cat.db.&lt;script&gt;alert(1)&lt;/script&gt;")
		require.Contains(t, r.body, `href="`+tablePage(tbl)+`"`, "the link is the path-escaped name")

		r = f.do(http.MethodGet, tablePage(tbl), ck, nil)
		require.Equal(t, http.StatusOK, r.code, r.body)
		require.NotContains(t, r.body, evil)
		require.NotContains(t, r.body, "<img")
		require.Contains(t, r.body, "&lt;script&gt;alert(1)&lt;/script&gt;")
		require.Contains(t, r.body, "&lt;img src=x onerror=&#34;alert(2)&#34;&gt;&amp;&#39;")

		r = f.do(http.MethodGet, "/ui/jobs/1", ck, nil)
		require.Equal(t, http.StatusOK, r.code)
		require.NotContains(t, r.body, evil)
		require.NotContains(t, r.body, "<img")
		require.NotContains(t, r.body, "<b>boom")
		require.Contains(t, r.body, "&lt;img src=x onerror=&#34;alert(2)&#34;&gt;&amp;&#39;")
		require.Contains(t, r.body, "&lt;b&gt;boom&lt;/b&gt;")

		// A 404's text quotes the path, escaped.
		r = f.do(http.MethodGet, "/ui/"+url.PathEscape(evil), ck, nil)
		require.Equal(t, http.StatusNotFound, r.code)
		require.NotContains(t, r.body, evil)
		require.Contains(t, r.body, "&lt;script&gt;")
	})
}

func TestNewRequiresStore(t *testing.T) {
	t.Parallel()
	_, err := console.New(console.Config{})
	require.ErrorIs(t, err, invalid.ErrArgument)
}

// TestMountedOnServer checks the httpapi wiring: /ui and /ui/ reach the
// console, which does its own authentication.
func TestMountedOnServer(t *testing.T) {
	t.Parallel()
	f := setup(t, store.BackendSQLite, nil)
	c, err := console.New(console.Config{Store: f.st, AdminToken: adminToken})
	require.NoError(t, err)
	s, err := httpapi.New(httpapi.Config{Store: f.st, AdminToken: adminToken, UI: c.Handler()})
	require.NoError(t, err)
	for _, tc := range []struct {
		path, auth string
		code       int
	}{{"/ui", "", http.StatusSeeOther}, {"/ui/", "", http.StatusSeeOther}, {"/ui/login", "", http.StatusOK},
		{"/ui", adminToken, http.StatusOK}, {"/ui/tables/cat.db.nope", adminToken, http.StatusNotFound}} {
		req := httptest.NewRequestWithContext(t.Context(), http.MethodGet, tc.path, nil)
		if tc.auth != "" {
			req.Header.Set("Authorization", "Bearer "+tc.auth)
		}
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, req)
		require.Equal(t, tc.code, rec.Code, tc.path)
		require.Equal(t, csp, rec.Header().Get("Content-Security-Policy"), tc.path)
	}
	// Without UI the routes are not found.
	s, err = httpapi.New(httpapi.Config{Store: f.st, AdminToken: adminToken})
	require.NoError(t, err)
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/ui", nil))
	require.Equal(t, http.StatusNotFound, rec.Code)
}
