package gravitinotest

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ---- authentication ----

// authenticate returns the caller's principal, or a 401 message and an
// optional WWW-Authenticate challenge.
func (s *Server) authenticate(r *http.Request) (principal, msg, challenge string) {
	const unsupported = "The provided credentials did not support"
	auth, has := r.Header["Authorization"]
	data := ""
	if has && len(auth) > 0 {
		data = auth[0]
	}
	switch s.cfg.Auth {
	case AuthSimple:
		if !has {
			return anonymous, "", ""
		}
		if !strings.HasPrefix(data, "Basic ") {
			return "", unsupported, ""
		}
		cred := strings.TrimSpace(data[len("Basic "):])
		raw, err := base64.StdEncoding.DecodeString(cred)
		if err != nil {
			raw, err = base64.RawStdEncoding.DecodeString(cred)
		}
		if err != nil {
			return anonymous, "", ""
		}
		user, _, _ := strings.Cut(string(raw), ":")
		if user == "" {
			return anonymous, "", ""
		}
		return user, "", ""
	case AuthBasic:
		const realm = `Basic realm="Gravitino"`
		user, pass, ok := r.BasicAuth()
		if !ok {
			return "", "Missing or malformed Basic credentials", realm
		}
		if subtle.ConstantTimeCompare([]byte(user), []byte(s.cfg.Username)) != 1 ||
			subtle.ConstantTimeCompare([]byte(pass), []byte(s.cfg.Password)) != 1 {
			return "", "Wrong user name or password", realm
		}
		return user, "", ""
	case AuthOAuth2:
		if !has || !strings.HasPrefix(data, "Bearer ") {
			return "", unsupported, ""
		}
		tok := data[len("Bearer "):]
		if strings.TrimSpace(tok) == "" {
			return "", "Blank token found", ""
		}
		sub, err := s.validateToken(tok)
		if err != nil {
			return "", err.Error(), ""
		}
		return sub, "", ""
	}
	return anonymous, "", ""
}

// writeUnauthorized answers 401 in the configured style.
func (s *Server) writeUnauthorized(w http.ResponseWriter, r *http.Request, msg, challenge string) {
	if challenge != "" {
		w.Header().Set("WWW-Authenticate", challenge)
	}
	if s.cfg.UnauthorizedStyle == UnauthorizedJetty {
		writeJettyError(w, r, http.StatusUnauthorized, msg)
		return
	}
	w.Header().Set("Content-Type", "application/json;charset=utf-8")
	writeJSON(w, http.StatusUnauthorized, ErrorResponse{
		Code: CodeUnauthorized, Type: "UnauthorizedException", Message: msg, Stack: []string{},
	})
}

// writeJettyError answers as Jetty 9.4's ErrorHandler does: by the first
// Accept type it can produce (HTML for none), else an empty body.
func writeJettyError(w http.ResponseWriter, r *http.Request, status int, msg string) {
	w.Header().Set("Cache-Control", "must-revalidate,no-cache,no-store")
	kind := ""
	if len(r.Header.Values("Accept")) == 0 {
		kind = "html"
	}
	for _, v := range r.Header.Values("Accept") {
		for _, part := range strings.Split(v, ",") {
			if kind != "" {
				break
			}
			mt, _, _ := strings.Cut(strings.TrimSpace(part), ";")
			switch strings.ToLower(strings.TrimSpace(mt)) {
			case "text/html", "text/*", "*/*":
				kind = "html"
			case "text/json", "application/json":
				kind = "json"
			case "text/plain":
				kind = "text"
			}
		}
	}
	reason := strconv.Itoa(status) + " " + msg
	switch kind {
	case "html":
		w.Header().Set("Content-Type", "text/html;charset=iso-8859-1")
		w.WriteHeader(status)
		fmt.Fprintf(w, "<html>\n<head>\n<meta http-equiv=\"Content-Type\" content=\"text/html;charset=ISO-8859-1\"/>\n"+
			"<title>Error %s</title>\n</head>\n<body><h2>HTTP ERROR %s</h2>\n<table>\n"+
			"<tr><th>URI:</th><td>%s</td></tr>\n<tr><th>STATUS:</th><td>%d</td></tr>\n"+
			"<tr><th>MESSAGE:</th><td>%s</td></tr>\n<tr><th>SERVLET:</th><td>-</td></tr>\n</table>\n"+
			"<hr><a href=\"https://eclipse.org/jetty\">Powered by Jetty:// 9.4.51.v20230217</a><hr/>\n\n</body>\n</html>\n",
			html.EscapeString(reason), html.EscapeString(reason), html.EscapeString(r.URL.Path), status, html.EscapeString(msg))
	case "json":
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		b, _ := json.Marshal(map[string]string{"url": r.URL.Path, "status": strconv.Itoa(status), "message": msg})
		_, _ = w.Write(b)
	case "text":
		w.Header().Set("Content-Type", "text/plain;charset=iso-8859-1")
		w.WriteHeader(status)
		fmt.Fprintf(w, "HTTP ERROR %d %s\nURI: %s\nSTATUS: %d\nMESSAGE: %s\n", status, msg, r.URL.Path, status, msg)
	default:
		w.WriteHeader(status)
	}
}

// serveToken is the OAuth2 token endpoint (client_credentials grant).
func (s *Server) serveToken(w http.ResponseWriter, r *http.Request, body []byte) {
	oauthErr := func(status int, code, desc string) {
		writeJSON(w, status, map[string]string{"error": code, "error_description": desc})
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
		return
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		oauthErr(http.StatusBadRequest, "invalid_request", "the body is not a form: "+err.Error())
		return
	}
	if gt := form.Get("grant_type"); gt != "client_credentials" {
		oauthErr(http.StatusBadRequest, "unsupported_grant_type", fmt.Sprintf("grant_type %q is not client_credentials", gt))
		return
	}
	id, secret := form.Get("client_id"), form.Get("client_secret")
	viaBasic := false
	if u, p, ok := r.BasicAuth(); ok {
		viaBasic = true
		id, secret = u, p
		if v, err := url.QueryUnescape(u); err == nil {
			id = v
		}
		if v, err := url.QueryUnescape(p); err == nil {
			secret = v
		}
	}
	if subtle.ConstantTimeCompare([]byte(id), []byte(s.cfg.OAuth2ClientID)) != 1 ||
		subtle.ConstantTimeCompare([]byte(secret), []byte(s.cfg.OAuth2ClientSecret)) != 1 {
		if viaBasic {
			w.Header().Set("WWW-Authenticate", `Basic realm="gravitinotest"`)
		}
		oauthErr(http.StatusUnauthorized, "invalid_client", "unknown client or wrong client secret")
		return
	}
	scope := form.Get("scope")
	if s.cfg.OAuth2Scope != "" && !slices.Contains(strings.Fields(scope), s.cfg.OAuth2Scope) {
		oauthErr(http.StatusBadRequest, "invalid_scope", fmt.Sprintf("scope %q does not include %q", scope, s.cfg.OAuth2Scope))
		return
	}
	tok := s.issueToken(id, scope, time.Now())
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, map[string]any{
		"access_token":      tok,
		"issued_token_type": "urn:ietf:params:oauth:token-type:access_token",
		"token_type":        "bearer",
		"expires_in":        int(s.cfg.OAuth2TokenTTL / time.Second),
		"scope":             scope,
	})
}

// issueToken signs an HS256 JWT for subject sub.
func (s *Server) issueToken(sub, scope string, now time.Time) string {
	s.mu.Lock()
	key := s.signKey
	s.mu.Unlock()
	enc := base64.RawURLEncoding
	header := enc.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`))
	claims, _ := json.Marshal(map[string]any{
		"iss": "gravitinotest", "sub": sub, "aud": s.cfg.OAuth2Audience, "scope": scope,
		"iat": now.Unix(), "exp": now.Add(s.cfg.OAuth2TokenTTL).Unix(),
	})
	signing := header + "." + enc.EncodeToString(claims)
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(signing))
	return signing + "." + enc.EncodeToString(mac.Sum(nil))
}

// validateToken checks a token's signature, expiry and audience and returns
// its subject.
func (s *Server) validateToken(tok string) (string, error) {
	parseErr := errors.New("JWT parse error")
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return "", parseErr
	}
	s.mu.Lock()
	key := s.signKey
	s.mu.Unlock()
	enc := base64.RawURLEncoding
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(parts[0] + "." + parts[1]))
	sig, err := enc.DecodeString(parts[2])
	if err != nil || !hmac.Equal(sig, mac.Sum(nil)) {
		return "", parseErr
	}
	raw, err := enc.DecodeString(parts[1])
	if err != nil {
		return "", parseErr
	}
	var c struct {
		Sub string `json:"sub"`
		Aud string `json:"aud"`
		Exp int64  `json:"exp"`
	}
	if err := json.Unmarshal(raw, &c); err != nil || time.Now().Unix() >= c.Exp {
		return "", parseErr
	}
	if c.Aud != s.cfg.OAuth2Audience {
		return "", fmt.Errorf("Audience in the token [%s] doesn't contain %s", c.Aud, s.cfg.OAuth2Audience)
	}
	if c.Sub == "" {
		return "", errors.New("No subject found in the token")
	}
	return c.Sub, nil
}

func newKey() []byte {
	k := make([]byte, 32)
	_, _ = rand.Read(k)
	return k
}
