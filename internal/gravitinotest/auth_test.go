package gravitinotest_test

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/internal/gravitinotest"
)

// Each authentication mode admits the right callers and answers 401
// otherwise.
func TestAuth(t *testing.T) {
	basicHeader := func(user, pass string) string {
		return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
	}
	list := func(f *fixture, auth string) (int, http.Header, []byte) {
		return f.raw(http.MethodGet, "/api/metalakes/test/jobs/runs", nil, map[string]string{"Authorization": auth})
	}

	t.Run("simple", func(t *testing.T) {
		f := newFixture(t, gravitinotest.Config{Auth: gravitinotest.AuthSimple})
		f.auth = basicHeader("dave", "dummy")
		f.register("echo")
		assert.Equal(t, "dave", f.run("echo", f.conf("o.txt", "0", "0")).Audit.Creator)
		f.auth = ""
		assert.Equal(t, "anonymous", f.run("echo", f.conf("o.txt", "0", "0")).Audit.Creator)
		status, _, body := list(f, "Bearer x")
		assert.Equal(t, http.StatusUnauthorized, status)
		e := decodeError(t, body)
		assert.Equal(t, 1011, e.Code)
		assert.Equal(t, "UnauthorizedException", e.Type)
	})
	t.Run("basic", func(t *testing.T) {
		f := newFixture(t, gravitinotest.Config{Auth: gravitinotest.AuthBasic, Username: "erin", Password: "pw"})
		status, _, _ := list(f, basicHeader("erin", "pw"))
		assert.Equal(t, http.StatusOK, status)
		for _, auth := range []string{"", basicHeader("erin", "wrong"), "Bearer x"} {
			status, hdr, body := list(f, auth)
			assert.Equal(t, http.StatusUnauthorized, status, "%q", auth)
			assert.NotEmpty(t, hdr.Get("WWW-Authenticate"))
			assert.Equal(t, 1011, decodeError(t, body).Code)
		}
	})
	t.Run("oauth2", func(t *testing.T) {
		f := newFixture(t, gravitinotest.Config{
			Auth: gravitinotest.AuthOAuth2, OAuth2ClientID: "tms", OAuth2ClientSecret: "s3cret", OAuth2Scope: "gravitino",
		})
		token := func(form url.Values, basic string) (int, map[string]any) {
			hdr := map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Authorization": basic}
			status, _, body := f.raw(http.MethodPost, "/oauth2/token", form.Encode(), hdr)
			var out map[string]any
			require.NoError(t, json.Unmarshal(body, &out), "%s", body)
			return status, out
		}
		status, tok := token(url.Values{"grant_type": {"client_credentials"}, "client_id": {"tms"},
			"client_secret": {"s3cret"}, "scope": {"gravitino"}}, "")
		require.Equal(t, http.StatusOK, status, "%v", tok)
		assert.Equal(t, "bearer", tok["token_type"])
		assert.InDelta(t, 3600, tok["expires_in"], 0)
		access := tok["access_token"].(string)

		status, viaBasic := token(url.Values{"grant_type": {"client_credentials"}, "scope": {"gravitino"}}, basicHeader("tms", "s3cret"))
		assert.Equal(t, http.StatusOK, status, "%v", viaBasic)

		status, out := token(url.Values{"grant_type": {"client_credentials"}, "client_id": {"tms"}, "client_secret": {"bad"}, "scope": {"gravitino"}}, "")
		assert.Equal(t, http.StatusUnauthorized, status)
		assert.Equal(t, "invalid_client", out["error"])
		status, out = token(url.Values{"grant_type": {"client_credentials"}, "client_id": {"tms"}, "client_secret": {"s3cret"}, "scope": {"other"}}, "")
		assert.Equal(t, http.StatusBadRequest, status)
		assert.Equal(t, "invalid_scope", out["error"])
		status, out = token(url.Values{"grant_type": {"password"}}, "")
		assert.Equal(t, http.StatusBadRequest, status)
		assert.Equal(t, "unsupported_grant_type", out["error"])

		f.auth = "Bearer " + access
		f.register("echo")
		assert.Equal(t, "tms", f.run("echo", f.conf("o.txt", "0", "0")).Audit.Creator)
		for auth, msg := range map[string]string{
			"":                       "The provided credentials did not support",
			basicHeader("tms", "x"):  "The provided credentials did not support",
			"Bearer not.a.jwt":       "JWT parse error",
			"Bearer " + access + "x": "JWT parse error",
		} {
			status, _, body := list(f, auth)
			assert.Equal(t, http.StatusUnauthorized, status, "%q", auth)
			assert.Equal(t, msg, decodeError(t, body).Message, "%q", auth)
		}
		f.s.ExpireTokens()
		status, _, _ = list(f, "Bearer "+access)
		assert.Equal(t, http.StatusUnauthorized, status, "an expired token is refused")
		reqs := f.s.Requests()
		for _, r := range reqs {
			if r.Path == "/oauth2/token" {
				assert.NotContains(t, r.Path+r.Query, "s3cret", "the secret travels in the body or header only")
			}
		}
	})
	t.Run("jetty style", func(t *testing.T) {
		f := newFixture(t, gravitinotest.Config{Auth: gravitinotest.AuthBasic, Username: "u", Password: "p",
			UnauthorizedStyle: gravitinotest.UnauthorizedJetty})
		status, _, body := list(f, "")
		assert.Equal(t, http.StatusUnauthorized, status)
		assert.Empty(t, body, "Jetty writes no body for Accept: %s", gravitinotest.MediaType)
		status, hdr, body := f.raw(http.MethodGet, "/api/metalakes/test/jobs/runs", nil, map[string]string{"Accept": ""})
		assert.Equal(t, http.StatusUnauthorized, status)
		assert.Contains(t, hdr.Get("Content-Type"), "text/html")
		assert.Contains(t, string(body), "HTTP ERROR 401")
	})
}
