package console

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tms-dev/tms/internal/bearer"
)

// This file is who a request is: the token it carries (bearer header or
// the login cookie), the login and logout forms, and the guards of a
// mutation (the CSRF field and the same-origin check).

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
	addr := clientAddr(r)
	if wait := c.logins.blocked(addr, c.cfg.Now()); wait > 0 {
		secs := int(wait.Round(time.Second) / time.Second)
		w.Header().Set("Retry-After", strconv.Itoa(max(secs, 1)))
		c.render(w, session{}, http.StatusTooManyRequests, "login", "Log in", loginData{Error: fmt.Sprintf(
			"Too many failed logins from %s: try again in %d s.", addr, max(secs, 1))})
		return
	}
	tok := r.PostForm.Get("token")
	isAdmin, isRead := c.admin.Matches(tok), c.read.Matches(tok)
	if tok == "" || (!isAdmin && !isRead) {
		c.logins.failed(addr, c.cfg.Now())
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

// Failed logins allowed per client address within loginWindow; the next
// attempt from that address, right token or not, answers 429 until the
// window that began with its first failure ends.
const (
	loginFailures = 10
	loginWindow   = time.Minute
	// loginAddrs bounds the addresses remembered; past it, windows that
	// ended are dropped, and if none has, all are (an attack from that many
	// addresses is not one a per-address limit stops).
	loginAddrs = 10_000
)

// loginLimiter counts failed logins per client address in fixed windows.
// Behind a reverse proxy every client is the proxy's address: the limit is
// then the proxy's, which still bounds guessing.
type loginLimiter struct {
	mu sync.Mutex
	by map[string]loginWindowState
}

type loginWindowState struct {
	start time.Time
	n     int
}

// blocked returns how long addr must wait, 0 if it may try.
func (l *loginLimiter) blocked(addr string, now time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	st, ok := l.by[addr]
	if !ok || st.n < loginFailures {
		return 0
	}
	if end := st.start.Add(loginWindow); now.Before(end) {
		return end.Sub(now)
	}
	delete(l.by, addr)
	return 0
}

// failed counts a failed login of addr at now.
func (l *loginLimiter) failed(addr string, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.by == nil {
		l.by = map[string]loginWindowState{}
	}
	st, ok := l.by[addr]
	if !ok || !now.Before(st.start.Add(loginWindow)) {
		if !ok && len(l.by) >= loginAddrs {
			for a, s := range l.by {
				if !now.Before(s.start.Add(loginWindow)) {
					delete(l.by, a)
				}
			}
			if len(l.by) >= loginAddrs {
				clear(l.by)
			}
		}
		st = loginWindowState{start: now}
	}
	st.n++
	l.by[addr] = st
}

// clientAddr is the host part of r's remote address.
func clientAddr(r *http.Request) string {
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return host
	}
	return r.RemoteAddr
}
