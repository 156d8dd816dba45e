package submit

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/hashicorp/go-retryablehttp"
)

// This file is the gravitino submitter's HTTP: Gravitino's answers and
// errors, the two kinds of request (one try for a submit, retried for the
// rest), authentication, and which failures leave a submit in doubt.

// gravitinoJob is Gravitino's JobDTO.
type gravitinoJob struct {
	JobID           string `json:"jobId"`
	JobTemplateName string `json:"jobTemplateName"`
	Status          string `json:"status"`
	Audit           struct {
		Creator    string    `json:"creator"`
		CreateTime time.Time `json:"createTime"`
	} `json:"audit"`
}

// gravitinoAnswer is the envelope of every answer: code 0 and the payload,
// or an error.
type gravitinoAnswer struct {
	Code    *int           `json:"code"`
	Type    string         `json:"type"`
	Message string         `json:"message"`
	Job     *gravitinoJob  `json:"job"`
	Jobs    []gravitinoJob `json:"jobs"`
}

// GravitinoError is an error answer of Gravitino's: its HTTP status, code,
// exception type and message.
type GravitinoError struct {
	HTTPStatus int
	Code       int
	Type       string
	Message    string
}

func (e *GravitinoError) Error() string {
	if e.Type == "" {
		return fmt.Sprintf("gravitino: HTTP %d: %s", e.HTTPStatus, e.Message)
	}
	return fmt.Sprintf("gravitino: HTTP %d: %s (code %d): %s", e.HTTPStatus, e.Type, e.Code, e.Message)
}

// post sends one POST of a run (no retry: a retry is Submit's decision)
// and returns the job of the answer.
func (s *GravitinoSubmitter) post(ctx context.Context, u string, body []byte) (*gravitinoJob, error) {
	r, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	r.Header.Set("Content-Type", "application/json")
	if err := s.authorize(ctx, r.Header); err != nil {
		return nil, err
	}
	r.Header.Set("Accept", gravitinoMediaType)
	resp, err := s.once.Do(r)
	if err != nil {
		return nil, &transportError{err}
	}
	var ans gravitinoAnswer
	if err := decodeAnswer(resp, &ans); err != nil {
		return nil, err
	}
	if ans.Job == nil || ans.Job.JobID == "" {
		return nil, fmt.Errorf("gravitino: the submit answer holds no job id")
	}
	return ans.Job, nil
}

// do sends a request through the retrying client and decodes the answer
// into ans.
func (s *GravitinoSubmitter) do(ctx context.Context, method, u string, ans *gravitinoAnswer) error {
	r, err := retryablehttp.NewRequestWithContext(ctx, method, u, nil)
	if err != nil {
		return err
	}
	if err := s.authorize(ctx, r.Header); err != nil {
		return err
	}
	r.Header.Set("Accept", gravitinoMediaType)
	resp, err := s.client.Do(r)
	if err != nil {
		return &transportError{err}
	}
	return decodeAnswer(resp, ans)
}

// decodeAnswer reads a Gravitino answer: a 2xx with code 0, or an error
// answer turned into *GravitinoError. A body that is not JSON is an error
// quoting its start.
func decodeAnswer(resp *http.Response, ans *gravitinoAnswer) error {
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return &transportError{fmt.Errorf("read the answer: %w", err)}
	}
	if err := json.Unmarshal(b, ans); err != nil {
		msg := fmt.Sprintf("the answer is not JSON (%s): %q", cmp.Or(resp.Header.Get("Content-Type"), "no content type"), snippet(b))
		if resp.StatusCode/100 != 2 {
			msg = http.StatusText(resp.StatusCode) + "; " + msg
		}
		return &GravitinoError{HTTPStatus: resp.StatusCode, Message: msg}
	}
	if resp.StatusCode/100 != 2 || ans.Code == nil || *ans.Code != 0 {
		ge := &GravitinoError{HTTPStatus: resp.StatusCode, Type: ans.Type, Message: ans.Message}
		if ans.Code != nil {
			ge.Code = *ans.Code
		}
		if ge.Message == "" {
			ge.Message = snippet(b)
		}
		return ge
	}
	return nil
}

// authorize sets the Authorization header of the configured auth.
func (s *GravitinoSubmitter) authorize(ctx context.Context, h http.Header) error {
	a := s.cfg.Auth
	switch a.Type {
	case "simple":
		user := cmp.Or(a.User, "anonymous")
		h.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(user+":dummy")))
	case "basic":
		h.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(a.User+":"+a.Password)))
	case "oauth2":
		tok, err := s.oauthToken(ctx)
		if err != nil {
			return err
		}
		h.Set("Authorization", "Bearer "+tok)
	}
	return nil
}

// oauthToken returns a client-credentials access token, fetching a new one
// when the cached one is within a minute of expiry.
func (s *GravitinoSubmitter) oauthToken(ctx context.Context) (string, error) {
	s.tokMu.Lock()
	defer s.tokMu.Unlock()
	if s.token != "" && time.Until(s.expires) > time.Minute {
		return s.token, nil
	}
	a := s.cfg.Auth
	id, secret, _ := strings.Cut(a.OAuthCredential, ":")
	form := url.Values{"grant_type": {"client_credentials"}}
	if a.OAuthScope != "" {
		form.Set("scope", a.OAuthScope)
	}
	tokenURL := strings.TrimSuffix(a.OAuth2ServerURI, "/") + "/" + strings.TrimPrefix(cmp.Or(a.OAuth2TokenPath, "oauth2/token"), "/")
	r, err := retryablehttp.NewRequestWithContext(ctx, http.MethodPost, tokenURL, strings.NewReader(form.Encode()))
	if err != nil {
		return "", err
	}
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.SetBasicAuth(url.QueryEscape(id), url.QueryEscape(secret))
	resp, err := s.client.Do(r)
	if err != nil {
		return "", fmt.Errorf("gravitino oauth2 token from %s: %w", tokenURL, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var tok struct {
		AccessToken string `json:"access_token"`
		ExpiresIn   int64  `json:"expires_in"`
		Error       string `json:"error"`
	}
	if err := json.Unmarshal(b, &tok); err != nil || resp.StatusCode != http.StatusOK || tok.AccessToken == "" {
		return "", fmt.Errorf("gravitino oauth2 token from %s: HTTP %d %s", tokenURL, resp.StatusCode, cmp.Or(tok.Error, "no access_token in the answer"))
	}
	s.token = tok.AccessToken
	s.expires = time.Now().Add(time.Duration(cmp.Or(tok.ExpiresIn, 3600)) * time.Second)
	return s.token, nil
}

// transportError is a request that got no answer: the connection failed,
// was reset or timed out.
type transportError struct{ err error }

func (e *transportError) Error() string { return "gravitino: no answer: " + e.err.Error() }
func (e *transportError) Unwrap() error { return e.err }

// ambiguous reports whether a submit that failed with err may have been
// applied: no answer (reset, timeout), or a 5xx (a proxy or server that
// failed after the request reached it). A 4xx or a non-JSON 2xx is an
// answer that the request was refused, or that cannot be read; neither is
// sent again.
func ambiguous(err error) bool {
	var te *transportError
	if errors.As(err, &te) {
		return !errors.Is(err, context.Canceled)
	}
	var ge *GravitinoError
	return errors.As(err, &ge) && ge.HTTPStatus >= 500
}

// snippet is the start of b for messages.
func snippet(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 120 {
		s = s[:120] + "…"
	}
	if s == "" {
		return "(empty)"
	}
	return s
}

// sleepCtx sleeps d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
