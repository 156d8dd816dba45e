package httpapi

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"
)

// token is a configured bearer token, kept as its SHA-256 digest so that
// comparisons take the same time whatever the length of the candidate.
type token struct {
	set    bool
	digest [sha256.Size]byte
}

func newToken(v string) token {
	if v == "" {
		return token{}
	}
	return token{set: true, digest: sha256.Sum256([]byte(v))}
}

// matches compares candidate with the token in constant time.
func (t token) matches(candidate string) bool {
	d := sha256.Sum256([]byte(candidate))
	return t.set && subtle.ConstantTimeCompare(t.digest[:], d[:]) == 1
}

// bearer returns the request's bearer token and whether it has one.
func bearer(r *http.Request) (string, bool) {
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	return tok, tok != ""
}

// authorize reports whether r carries one of accepted. It answers the
// request itself when not: 403 when no token that could be accepted is
// configured (the route is disabled; never open by default), 401 when the
// token is missing or wrong.
func authorize(w http.ResponseWriter, r *http.Request, disabled string, accepted ...token) bool {
	anySet := false
	for _, t := range accepted {
		anySet = anySet || t.set
	}
	if !anySet {
		writeError(w, http.StatusForbidden, disabled)
		return false
	}
	tok, ok := bearer(r)
	if !ok {
		w.Header().Set("WWW-Authenticate", `Bearer realm="tms"`)
		writeError(w, http.StatusUnauthorized, "missing bearer token: send 'Authorization: Bearer <token>'")
		return false
	}
	match := false
	for _, t := range accepted {
		// No early exit: every configured token is compared.
		if t.matches(tok) {
			match = true
		}
	}
	if !match {
		w.Header().Set("WWW-Authenticate", `Bearer realm="tms", error="invalid_token"`)
		writeError(w, http.StatusUnauthorized, "invalid bearer token")
		return false
	}
	return true
}

// readOnly reports whether method only reads.
func readOnly(method string) bool {
	return method == http.MethodGet || method == http.MethodHead
}

// resourceAuth guards the /v1 resources: reads need the read-only token (if
// one is configured) or the admin token; everything else needs the admin
// token. Without an admin token the resources are disabled.
func (s *Server) resourceAuth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		const disabled = "the /v1 API is disabled: no admin token is configured on this coordinator (serve --admin-token env:NAME or file:PATH)"
		if !s.admin.set {
			writeError(w, http.StatusForbidden, disabled)
			return
		}
		accepted := []token{s.admin}
		if readOnly(r.Method) {
			accepted = append(accepted, s.read)
		} else if tok, ok := bearer(r); ok && s.read.matches(tok) && !s.admin.matches(tok) {
			writeError(w, http.StatusForbidden, "the read-only token cannot "+r.Method+": this needs the admin token")
			return
		}
		if !authorize(w, r, disabled, accepted...) {
			return
		}
		next.ServeHTTP(w, r)
	})
}
