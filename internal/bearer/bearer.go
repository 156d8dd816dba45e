// Package bearer holds the one way TMS's HTTP doors (the /v1 API, the
// commit webhook, the console) keep and compare a configured token.
package bearer

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"
)

// FromRequest returns r's bearer token (Authorization: Bearer TOKEN) and
// whether it has one.
func FromRequest(r *http.Request) (string, bool) {
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	return tok, tok != ""
}

// Token is a configured token, kept as its SHA-256 digest so that
// comparisons take the same time whatever the length of the candidate. The
// zero Token is "not configured" and matches nothing.
type Token struct {
	set    bool
	digest [sha256.Size]byte
}

// New returns the token v; "" is not configured.
func New(v string) Token {
	if v == "" {
		return Token{}
	}
	return Token{set: true, digest: sha256.Sum256([]byte(v))}
}

// Set reports whether the token is configured.
func (t Token) Set() bool { return t.set }

// Matches compares candidate with the token in constant time; a token not
// configured matches nothing.
func (t Token) Matches(candidate string) bool {
	d := sha256.Sum256([]byte(candidate))
	return t.set && subtle.ConstantTimeCompare(t.digest[:], d[:]) == 1
}
