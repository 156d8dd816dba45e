package console_test

import (
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/coordinator/console"
	"github.com/tms-dev/tms/store"
)

// TestLoginRateLimit: ten failed logins from one address within a minute,
// and the eleventh attempt is refused with 429 and Retry-After, the right
// token included, until the minute that began with the first failure ends.
func TestLoginRateLimit(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	clock := now
	f := setup(t, store.BackendSQLite, func(cfg *console.Config) {
		cfg.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	})
	advance := func(d time.Duration) { mu.Lock(); clock = clock.Add(d); mu.Unlock() }
	for i := range 10 {
		r := f.do(http.MethodPost, "/ui/login", nil, url.Values{"token": {"guess"}})
		require.Equal(t, http.StatusUnauthorized, r.code, "failure %d", i+1)
		advance(time.Second)
	}
	r := f.do(http.MethodPost, "/ui/login", nil, url.Values{"token": {adminToken}})
	require.Equal(t, http.StatusTooManyRequests, r.code)
	require.Equal(t, "50", r.header.Get("Retry-After"), "the window began 10 s ago")
	require.Contains(t, r.body, "Too many failed logins from 127.0.0.1: try again in 50 s.")
	require.Empty(t, r.resp.Cookies())
	// The API-style bearer header is the /v1 check, not this form's.
	require.Equal(t, http.StatusOK, f.do(http.MethodGet, "/ui", readToken, nil).code)

	advance(50 * time.Second)
	require.NotEmpty(t, f.login(adminToken), "the window ended")
	r = f.do(http.MethodPost, "/ui/login", nil, url.Values{"token": {"guess"}})
	require.Equal(t, http.StatusUnauthorized, r.code, "a new window")
}
