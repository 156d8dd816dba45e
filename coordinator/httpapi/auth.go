package httpapi

import (
	"net/http"

	"github.com/tms-dev/tms/internal/bearer"
)

// authorize reports whether r carries one of accepted. It answers the
// request itself when not: 403 when no token that could be accepted is
// configured (the route is disabled; never open by default), 401 when the
// token is missing or wrong.
func authorize(w http.ResponseWriter, r *http.Request, disabled string, accepted ...bearer.Token) bool {
	anySet := false
	for _, t := range accepted {
		anySet = anySet || t.Set()
	}
	if !anySet {
		writeError(w, http.StatusForbidden, disabled)
		return false
	}
	tok, ok := bearer.FromRequest(r)
	if !ok {
		w.Header().Set("WWW-Authenticate", `Bearer realm="tms"`)
		writeError(w, http.StatusUnauthorized, "missing bearer token: send 'Authorization: Bearer <token>'")
		return false
	}
	match := false
	for _, t := range accepted {
		// No early exit: every configured token is compared.
		if t.Matches(tok) {
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
		if !s.admin.Set() {
			writeError(w, http.StatusForbidden, disabled)
			return
		}
		accepted := []bearer.Token{s.admin}
		if readOnly(r.Method) {
			accepted = append(accepted, s.read)
		} else if tok, ok := bearer.FromRequest(r); ok && s.read.Matches(tok) && !s.admin.Matches(tok) {
			writeError(w, http.StatusForbidden, "the read-only token cannot "+r.Method+": this needs the admin token")
			return
		}
		if !authorize(w, r, disabled, accepted...) {
			return
		}
		next.ServeHTTP(w, r)
	})
}
