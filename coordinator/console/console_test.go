package console_test

import (
	"context"
	"encoding/json"
	"errors"
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
	dbURL := testdb.SQLiteURL(t)
	if backend == store.BackendPostgres {
		dbURL = testdb.PostgresURL(t)
	}
	log := zaptest.NewLogger(t)
	_, err := store.Migrate(context.Background(), dbURL, log)
	require.NoError(t, err)
	st, err := store.Open(context.Background(), dbURL, log)
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
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

func TestTablesPage(t *testing.T) {
	t.Parallel()
	f := setup(t, store.BackendSQLite, nil)
	var tbls []store.Table
	for _, n := range []string{"a", "b", "c", "d", "e"} {
		tbls = append(tbls, f.table(n))
	}
	require.NoError(t, f.st.UpsertSnapshotMetrics(context.Background(), store.SnapshotMetrics{TableID: tbls[0].ID, SnapshotID: 9,
		Value: json.RawMessage(`{"data-file-number": 1234, "small-file-number": 77, "data-file-mse": 1.5e17, "delete-file-number": 5,
			"manifest-number": 12, "snapshot-number": 31}`), RecordedAt: now}))
	j := f.job(tbls[0].ID)
	ck := f.login(readToken)

	r := f.do(http.MethodGet, "/ui", ck, nil)
	require.Equal(t, http.StatusOK, r.code)
	for _, want := range []string{"Data files", "Small files", "Data-file MSE", "Delete files", "Manifests", "Snapshots",
		`<td class="n">1234</td>`, `<td class="n">77</td>`, `<td class="n">1.5e&#43;17</td>`, `<td class="n">5</td>`,
		`<td class="n">12</td>`, `<td class="n">31</td>`, fmt.Sprintf(`<a href="/ui/jobs/%d">compaction, snapshot-expiry</a>`, j.ID),
		`class="status-pending">pending<`} {
		require.Contains(t, r.body, want)
	}
	for _, tb := range tbls {
		require.Contains(t, r.body, "cat.db."+tb.Name+"<")
	}
	require.NotContains(t, r.body, "Next page")

	// Paged by ?limit= and ?after=.
	r = f.do(http.MethodGet, "/ui?limit=2", ck, nil)
	require.Equal(t, http.StatusOK, r.code)
	require.Contains(t, r.body, "cat.db.a<")
	require.Contains(t, r.body, "cat.db.b<")
	require.NotContains(t, r.body, "cat.db.c<")
	next := fmt.Sprintf(`/ui?after=%d&amp;limit=2`, tbls[1].ID)
	require.Contains(t, r.body, next)
	r = f.do(http.MethodGet, strings.ReplaceAll(next, "&amp;", "&"), ck, nil)
	require.Contains(t, r.body, "cat.db.c<")
	require.Contains(t, r.body, "cat.db.d<")
	require.NotContains(t, r.body, "cat.db.b<")
	r = f.do(http.MethodGet, fmt.Sprintf("/ui?after=%d&limit=2", tbls[3].ID), ck, nil)
	require.Contains(t, r.body, "cat.db.e<")
	require.NotContains(t, r.body, "Next page")

	for _, bad := range []string{"/ui?limit=0", "/ui?limit=1001", "/ui?limit=x", "/ui?after=-1"} {
		require.Equal(t, http.StatusBadRequest, f.do(http.MethodGet, bad, ck, nil).code, bad)
	}
	// The pages not built yet answer, and unknown pages are 404.
	for _, p := range []string{"/ui/plan"} {
		r := f.do(http.MethodGet, p, ck, nil)
		require.Equal(t, http.StatusOK, r.code, p)
		require.Contains(t, r.body, "not built yet")
	}
	require.Equal(t, http.StatusNotFound, f.do(http.MethodGet, "/ui/nope", ck, nil).code)
}

func TestTablePage(t *testing.T) {
	t.Parallel()
	f := setup(t, store.BackendSQLite, nil)
	tbl, empty := f.table("orders"), f.table("empty")
	rows := []string{
		`{"file-number": 10, "small-file-number": 8, "delete-file-number": 2, "manifest-number": 4, "snapshot-number": 3}`,
		`{"file-number": 12, "small-file-number": 9, "delete-file-number": 2, "manifest-number": 5, "snapshot-number": 4}`,
		`{"file-number": 3}`, // other keys absent: no point there
		`{"file-number": 4, "small-file-number": 0, "delete-file-number": 0, "manifest-number": 1, "snapshot-number": 1}`,
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
	require.Equal(t, 5, strings.Count(r.body, `<polyline class="line"`))
	require.Equal(t, 4+3*4, strings.Count(r.body, `<circle class="point"`))
	for _, want := range []string{"Files (data and delete)", "Small files", "Delete files", "Manifests", "Snapshots",
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

func TestJobPageAndCancel(t *testing.T) {
	onBackends(t, func(t *testing.T, backend string) {
		f := setup(t, backend, nil)
		tbl := f.table("orders")
		done := f.job(tbl.ID)
		f.fail(done, "no")
		live := f.job(tbl.ID)
		livePage, cancelPath := fmt.Sprintf("/ui/jobs/%d", live.ID), fmt.Sprintf("/ui/jobs/%d/cancel", live.ID)
		adminCk, readCk := f.login(adminToken), f.login(readToken)

		// The admin sees the cancel form on an in-flight job only.
		r := f.do(http.MethodGet, livePage, adminCk, nil)
		require.Equal(t, http.StatusOK, r.code)
		require.Contains(t, r.body, `action="`+cancelPath+`"`)
		require.Contains(t, r.body, "cat.db.orders")
		require.Contains(t, r.body, "(in flight)")
		adminCSRF := csrfOf(t, r.body)
		r = f.do(http.MethodGet, fmt.Sprintf("/ui/jobs/%d", done.ID), adminCk, nil)
		require.Equal(t, http.StatusOK, r.code)
		require.NotContains(t, r.body, "/cancel")
		r = f.do(http.MethodGet, livePage, readCk, nil)
		require.Equal(t, http.StatusOK, r.code)
		require.NotContains(t, r.body, "/cancel")
		readCSRF := csrfOf(t, r.body) // the logout form's
		require.NotEqual(t, adminCSRF, readCSRF)

		// CSRF guard.
		for _, tc := range []struct {
			name string
			form url.Values
			hdr  []string
		}{
			{"missing", url.Values{}, nil},
			{"wrong", url.Values{"csrf": {strings.Repeat("ab", 32)}}, nil},
			{"not hex", url.Values{"csrf": {"zz"}}, nil},
			{"another session's", url.Values{"csrf": {readCSRF}}, nil},
			{"cross-site origin", url.Values{"csrf": {adminCSRF}}, []string{"Origin", "https://evil.example"}},
			{"null origin", url.Values{"csrf": {adminCSRF}}, []string{"Origin", "null"}},
			{"sec-fetch-site", url.Values{"csrf": {adminCSRF}}, []string{"Sec-Fetch-Site", "cross-site"}},
			{"same-site is not same-origin", url.Values{"csrf": {adminCSRF}}, []string{"Sec-Fetch-Site", "same-site"}},
			{"a same-origin Origin does not outvote Sec-Fetch-Site", url.Values{"csrf": {adminCSRF}}, []string{"Origin", f.srv.URL, "Sec-Fetch-Site", "cross-site"}},
		} {
			r := f.do(http.MethodPost, cancelPath, adminCk, tc.form, tc.hdr...)
			require.Equal(t, http.StatusForbidden, r.code, tc.name)
			require.Contains(t, r.body, "CSRF check failed", tc.name)
		}
		// The read token cannot cancel, even with its own CSRF token.
		r = f.do(http.MethodPost, cancelPath, readCk, url.Values{"csrf": {readCSRF}})
		require.Equal(t, http.StatusForbidden, r.code)
		require.Contains(t, r.body, "needs the admin token")
		require.Empty(t, f.cancelled())

		// Right: same-origin, admin cookie, its CSRF token.
		r = f.do(http.MethodPost, cancelPath, adminCk, url.Values{"csrf": {adminCSRF}}, "Origin", f.srv.URL, "Sec-Fetch-Site", "same-origin")
		require.Equal(t, http.StatusOK, r.code, r.body)
		require.Contains(t, r.body, fmt.Sprintf("cancel of job %d &lt;requested&gt;", live.ID))
		require.Equal(t, []int64{live.ID}, f.cancelled())

		r = f.do(http.MethodPost, "/ui/jobs/999/cancel", adminCk, url.Values{"csrf": {adminCSRF}})
		require.Equal(t, http.StatusNotFound, r.code)
		require.Equal(t, http.StatusNotFound, f.do(http.MethodGet, "/ui/jobs/999", readCk, nil).code)
		require.Equal(t, http.StatusBadRequest, f.do(http.MethodGet, "/ui/jobs/x", readCk, nil).code)
		require.Equal(t, []int64{live.ID}, f.cancelled())
	})
}

func TestCancelErrorsAndUnavailable(t *testing.T) {
	t.Parallel()
	f := setup(t, store.BackendSQLite, func(c *console.Config) {
		c.Cancel = func(context.Context, int64) (string, error) { return "", errors.New("submitter <down>") }
	})
	live := f.job(f.table("orders").ID)
	ck := f.login(adminToken)
	csrf := csrfOf(t, f.do(http.MethodGet, fmt.Sprintf("/ui/jobs/%d", live.ID), ck, nil).body)
	r := f.do(http.MethodPost, fmt.Sprintf("/ui/jobs/%d/cancel", live.ID), ck, url.Values{"csrf": {csrf}})
	require.Equal(t, http.StatusInternalServerError, r.code)
	require.NotContains(t, r.body, "submitter")

	// Without a Cancel func: no button, and the POST answers 501.
	g := setup(t, store.BackendSQLite, func(c *console.Config) { c.Cancel = nil })
	live = g.job(g.table("orders").ID)
	ck = g.login(adminToken)
	r = g.do(http.MethodGet, fmt.Sprintf("/ui/jobs/%d", live.ID), ck, nil)
	require.NotContains(t, r.body, "/cancel")
	r = g.do(http.MethodPost, fmt.Sprintf("/ui/jobs/%d/cancel", live.ID), ck, url.Values{"csrf": {csrfOf(t, r.body)}})
	require.Equal(t, http.StatusNotImplemented, r.code)
}

func TestNewRequiresStore(t *testing.T) {
	t.Parallel()
	_, err := console.New(console.Config{})
	require.ErrorIs(t, err, store.ErrInvalidArgument)
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

// section returns the part of body from the heading title to the next
// heading (or the end).
func section(t *testing.T, body, title string) string {
	t.Helper()
	i := strings.Index(body, "<h2>"+title+"</h2>")
	require.GreaterOrEqual(t, i, 0, "no section %q", title)
	rest := body[i+len(title)+9:]
	if j := strings.Index(rest, "<h2>"); j >= 0 {
		rest = rest[:j]
	}
	return rest
}

// jobLink is a job id's link on the jobs and queue pages.
func jobLink(id int64) string { return fmt.Sprintf(`<a href="/ui/jobs/%d">%d</a>`, id, id) }

func TestJobsPage(t *testing.T) {
	onBackends(t, func(t *testing.T, backend string) {
		f := setup(t, backend, nil)
		a, b := f.table("a"), f.table("b")
		failedA := f.job(a.ID)
		f.fail(failedA, "disk full")
		runningA := f.job(a.ID)
		require.NoError(t, f.st.StartJob(context.Background(), runningA.ID, runningA.Fence, now.Add(-90*time.Second)))
		require.NoError(t, f.st.SetJobID(context.Background(), runningA.ID, runningA.Fence, "ext-9", "local"))
		pendingB := f.job(b.ID)
		ck := f.login(readToken)

		r := f.do(http.MethodGet, "/ui/jobs", ck, nil)
		require.Equal(t, http.StatusOK, r.code, r.body)
		running, recent := section(t, r.body, "Running"), section(t, r.body, "Recent jobs")
		for _, j := range []store.Job{runningA, pendingB} {
			require.Contains(t, running, jobLink(j.ID))
		}
		require.NotContains(t, running, jobLink(failedA.ID))
		for _, want := range []string{jobLink(failedA.ID), jobLink(runningA.ID), jobLink(pendingB.ID),
			`<a href="` + tablePage(a) + `">cat.db.a</a>`, `<a href="` + tablePage(b) + `">cat.db.b</a>`,
			"compaction, snapshot-expiry", ">commit<", `class="status-failed">failed<`, `class="status-running">running<`,
			">local<", ">ext-9<", "disk full", ">1m30s so far<"} {
			require.Contains(t, recent, want)
		}
		require.Less(t, strings.Index(recent, jobLink(pendingB.ID)), strings.Index(recent, jobLink(failedA.ID)), "newest first")
		require.NotContains(t, r.body, "Next page")

		// Status filter.
		r = f.do(http.MethodGet, "/ui/jobs?status=failed", ck, nil)
		require.Equal(t, http.StatusOK, r.code)
		recent = section(t, r.body, "Recent jobs")
		require.Contains(t, recent, jobLink(failedA.ID))
		require.NotContains(t, recent, jobLink(runningA.ID))
		require.NotContains(t, recent, jobLink(pendingB.ID))
		require.Contains(t, r.body, `<option value="failed" selected>`)
		r = f.do(http.MethodGet, "/ui/jobs?status=failed,pending", ck, nil)
		recent = section(t, r.body, "Recent jobs")
		require.Contains(t, recent, jobLink(failedA.ID))
		require.Contains(t, recent, jobLink(pendingB.ID))
		require.NotContains(t, recent, jobLink(runningA.ID))

		// Table filter, by name or row id; it also narrows the running rows.
		for _, q := range []string{"table=cat.db.b", fmt.Sprintf("table=%d", b.ID)} {
			r = f.do(http.MethodGet, "/ui/jobs?"+q, ck, nil)
			require.Equal(t, http.StatusOK, r.code, q)
			running, recent = section(t, r.body, "Running"), section(t, r.body, "Recent jobs")
			require.Contains(t, recent, jobLink(pendingB.ID), q)
			require.NotContains(t, recent, jobLink(failedA.ID), q)
			require.NotContains(t, running, jobLink(runningA.ID), q)
		}

		// In-flight and creation-time filters.
		r = f.do(http.MethodGet, "/ui/jobs?inflight=false", ck, nil)
		recent = section(t, r.body, "Recent jobs")
		require.Contains(t, recent, jobLink(failedA.ID))
		require.NotContains(t, recent, jobLink(pendingB.ID))
		r = f.do(http.MethodGet, "/ui/jobs?since=2000-01-01&until=2999-01-01T00:00:00Z", ck, nil)
		require.Contains(t, section(t, r.body, "Recent jobs"), jobLink(failedA.ID))
		r = f.do(http.MethodGet, "/ui/jobs?until=2000-01-01T10:00", ck, nil)
		require.Equal(t, http.StatusOK, r.code)
		require.Contains(t, section(t, r.body, "Recent jobs"), "No jobs.")

		// Pages through ?before=, keeping the filters.
		r = f.do(http.MethodGet, "/ui/jobs?limit=2&inflight=true", ck, nil)
		recent = section(t, r.body, "Recent jobs")
		require.Contains(t, recent, jobLink(pendingB.ID))
		require.Contains(t, recent, jobLink(runningA.ID))
		next := fmt.Sprintf(`/ui/jobs?before=%d&amp;inflight=true&amp;limit=2`, runningA.ID)
		require.Contains(t, r.body, `<a href="`+next+`">Next page</a>`)
		r = f.do(http.MethodGet, strings.ReplaceAll(next, "&amp;", "&"), ck, nil)
		require.Equal(t, http.StatusOK, r.code)
		require.NotContains(t, r.body, "<h2>Running</h2>", "running rows on the first page only")
		require.Contains(t, section(t, r.body, "Recent jobs"), "No jobs.")
		require.NotContains(t, r.body, "Next page")

		// A bad filter is a 400 naming the parameter.
		for _, tc := range []struct{ query, param string }{
			{"status=bogus", "status"}, {"status=failed,nope", "status"}, {"table=cat.db.missing", "table"},
			{"table=cat..x", "table"}, {"table=-3", "table"}, {"inflight=maybe", "inflight"}, {"since=yesterday", "since"},
			{"until=2030-13-01", "until"}, {"since=2030-01-02&until=2030-01-01", "until"}, {"limit=0", "limit"},
			{"limit=1001", "limit"}, {"before=x", "before"}, {"before=0", "before"},
		} {
			r := f.do(http.MethodGet, "/ui/jobs?"+tc.query, ck, nil)
			require.Equal(t, http.StatusBadRequest, r.code, tc.query)
			require.Contains(t, r.body, "Query parameter "+tc.param+":", tc.query)
		}
	})
}

func TestJobsPageEscapesAndCutsErrors(t *testing.T) {
	onBackends(t, func(t *testing.T, backend string) {
		f := setup(t, backend, nil)
		tbl := f.table("<script>x</script>")
		const evil = `<img src=x onerror=alert(1)>`
		f.fail(f.job(tbl.ID), evil)
		long := strings.Repeat("é", 199) + "<b>" + strings.Repeat("z", 100)
		f.fail(f.job(tbl.ID), long)
		ck := f.login(readToken)

		r := f.do(http.MethodGet, "/ui/jobs?status=bogus<script>", ck, nil)
		require.Equal(t, http.StatusBadRequest, r.code)
		require.NotContains(t, r.body, "<script>")

		r = f.do(http.MethodGet, "/ui/jobs?table="+url.QueryEscape(`"><script>`), ck, nil)
		require.Equal(t, http.StatusBadRequest, r.code)
		require.NotContains(t, r.body, "<script>")

		r = f.do(http.MethodGet, "/ui/jobs?table="+url.QueryEscape("cat.db.<script>x</script>"), ck, nil)
		require.Equal(t, http.StatusOK, r.code, r.body)
		require.NotContains(t, r.body, "<img")
		require.NotContains(t, r.body, "<script>")
		require.NotContains(t, r.body, "<b>")
		require.Contains(t, r.body, "&lt;img src=x onerror=alert(1)&gt;")
		require.Contains(t, r.body, `value="cat.db.&lt;script&gt;x&lt;/script&gt;"`, "the filter form is refilled, escaped")
		require.Contains(t, r.body, `href="`+tablePage(tbl)+`"`)
		// The long error is cut at 200 characters.
		require.Contains(t, r.body, strings.Repeat("é", 199)+"&lt;…<")
		require.NotContains(t, r.body, "zzz")
	})
}

func TestQueuePage(t *testing.T) {
	onBackends(t, func(t *testing.T, backend string) {
		f := setup(t, backend, nil)
		ctx := context.Background()
		sch, err := store.TasksOf(f.st)
		require.NoError(t, err)
		for _, task := range []store.NewTask{
			{TaskKey: store.TaskKey{Name: "cron-job", Instance: "table:1:1"}, ExecutionTime: now.Add(2 * time.Hour)},
			{TaskKey: store.TaskKey{Name: "cron-job", Instance: "table:2:1"}, ExecutionTime: now.Add(90 * time.Minute)},
			{TaskKey: store.TaskKey{Name: "commit-job", Instance: "7"}, ExecutionTime: now.Add(-time.Minute)},
		} {
			created, err := sch.UpsertTask(ctx, task, now)
			require.NoError(t, err)
			require.True(t, created)
		}
		require.NoError(t, sch.RegisterNode(ctx, "node-live", now.Add(-time.Hour)))
		require.NoError(t, sch.HeartbeatNode(ctx, "node-live", now.Add(-10*time.Second)))
		require.NoError(t, sch.SetNodeCatalogs(ctx, "node-live", []string{"cat", "other"}))
		require.NoError(t, sch.RegisterNode(ctx, "node-dead", now.Add(-2*time.Hour)))

		// One in-flight row per table.
		newJob := func(table, node string) store.Job {
			j, err := f.st.CreateJob(ctx, store.NewJob{TableID: f.table(table).ID, Types: []string{"compaction"}, Trigger: store.TriggerCron, Node: node})
			require.NoError(t, err)
			return j
		}
		finished := newJob("orders", "node-dead")
		f.fail(finished, "done")
		deadJob, goneJob, liveJob, manual := newJob("t1", "node-dead"), newJob("t2", "node-gone"), newJob("t3", "node-live"), newJob("t4", "")
		ck := f.login(readToken)

		r := f.do(http.MethodGet, "/ui/queue", ck, nil)
		require.Equal(t, http.StatusOK, r.code, r.body)
		tasks := section(t, r.body, "Scheduled tasks")
		require.Contains(t, tasks, `<td>cron-job</td><td class="n">2</td><td class="n">0</td><td class="n">0</td>`)
		require.Contains(t, tasks, "<td>2030-06-01 13:30:00Z (in 1h30m0s)</td>")
		require.Contains(t, tasks, `<td>commit-job</td><td class="n">1</td><td class="n">1</td><td class="n">0</td>`)
		require.Contains(t, tasks, "<td>2030-06-01 11:59:00Z (due now)</td>")

		nodes := section(t, r.body, "Coordinator nodes")
		require.Contains(t, nodes, "older than 6m0s.")
		require.Contains(t, nodes, `<td>node-live</td><td>alive</td>
<td>2030-06-01 11:59:50Z</td><td class="n">10s</td><td>2030-06-01 11:00:00Z</td><td>cat, other</td>`)
		require.Contains(t, nodes, `<td>node-dead</td><td class="status-failed">dead</td>
<td>2030-06-01 10:00:00Z</td><td class="n">2h0m0s</td><td>2030-06-01 10:00:00Z</td><td>not reported</td>`)

		orphans := section(t, r.body, "Rows owned by dead nodes")
		require.Contains(t, orphans, "4 in-flight rows read")
		require.Contains(t, orphans, jobLink(deadJob.ID))
		require.Contains(t, orphans, "<td>node-dead</td><td>dead: last heartbeat 2h0m0s ago</td>")
		require.Contains(t, orphans, jobLink(goneJob.ID))
		require.Contains(t, orphans, "<td>node-gone</td><td>no node row</td>")
		require.Contains(t, orphans, `<a href="/ui/tables/cat.db.t1">cat.db.t1</a>`)
		for _, j := range []store.Job{liveJob, manual, finished} {
			require.NotContains(t, orphans, jobLink(j.ID))
		}

		// With a longer dead-node limit node-dead is alive and its row not listed.
		c, err := console.New(console.Config{Store: f.st, ReadToken: readToken, Now: func() time.Time { return now },
			DeadNodeAfter: 3 * time.Hour})
		require.NoError(t, err)
		req := httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/ui/queue", nil)
		req.Header.Set("Authorization", "Bearer "+readToken)
		rec := httptest.NewRecorder()
		c.Handler().ServeHTTP(rec, req)
		require.Equal(t, http.StatusOK, rec.Code)
		require.Contains(t, rec.Body.String(), "<td>node-dead</td><td>alive</td>")
		orphans = section(t, rec.Body.String(), "Rows owned by dead nodes")
		require.NotContains(t, orphans, jobLink(deadJob.ID))
		require.Contains(t, orphans, jobLink(goneJob.ID))
	})
}

func TestQueuePageEmpty(t *testing.T) {
	t.Parallel()
	f := setup(t, store.BackendSQLite, nil)
	r := f.do(http.MethodGet, "/ui/queue", adminToken, nil)
	require.Equal(t, http.StatusOK, r.code)
	require.Contains(t, r.body, "No scheduled tasks.")
	require.Contains(t, r.body, "No coordinator nodes registered.")
	require.Contains(t, r.body, "0 in-flight rows read")
	_, err := console.New(console.Config{Store: f.st, DeadNodeAfter: -time.Second})
	require.ErrorIs(t, err, store.ErrInvalidArgument)
}
