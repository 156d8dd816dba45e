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
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-retryablehttp"
	"go.uber.org/zap"

	"github.com/tms-dev/tms/policy"
)

// This file is the gravitino submitter: jobs run through Apache Gravitino's
// job system (a registered job template, usually the shell template in
// docs/gravitino/ that runs tms-runner), over its REST API
// (/api/metalakes/{metalake}/jobs/runs).

// The jobConf keys TMS sets besides the policy's jobOptions, the same words
// as the command submitter's placeholders. A job template uses them as
// {{job_id}}, {{fence}} and so on.
const (
	// ConfCatalogSecretRefs is the jobConf key of the catalog credentials'
	// references (URL query form: property=env:NAME&property=file:PATH,
	// escaped), for the runner to resolve where it runs; never the secrets
	// themselves.
	ConfCatalogSecretRefs = "catalog_secret_refs"
)

// gravitinoMediaType is the Accept header of Gravitino's REST API, version 1.
const gravitinoMediaType = "application/vnd.gravitino.v1+json"

// GravitinoAuth is how the submitter authenticates to Gravitino: Type is
// none, simple (the user name only, as Gravitino's simple authenticator
// takes it), basic (user and password) or oauth2 (client credentials from
// OAuth2ServerURI).
type GravitinoAuth struct {
	Type string
	// User is the user name of simple and basic auth.
	User string
	// Password is basic auth's password.
	Password string
	// OAuth2ServerURI is the OAuth 2 server's base URI; the token endpoint is
	// OAuth2ServerURI/OAuth2TokenPath.
	OAuth2ServerURI string
	// OAuth2TokenPath defaults to "oauth2/token", Gravitino's default.
	OAuth2TokenPath string
	// OAuthCredential is "client_id:client_secret".
	OAuthCredential string
	// OAuthScope is the scope asked for, if any.
	OAuthScope string
}

// GravitinoConfig configures a GravitinoSubmitter.
type GravitinoConfig struct {
	// URI is Gravitino's base URI (http://host:8090). Required.
	URI string
	// Metalake holds the job template. Required.
	Metalake string
	// JobTemplateName is the registered template each job runs. Required.
	JobTemplateName string
	// Auth authenticates every request.
	Auth GravitinoAuth
	// CatalogSecretRefs are the catalog credentials' references
	// (property → env:NAME or file:PATH), passed in jobConf as
	// catalog_secret_refs for the runner to resolve where it runs. The
	// resolved values (JobRequest.CatalogProps) are never sent.
	CatalogSecretRefs map[string]string
	// Timeout bounds one HTTP request. Defaults to 30 s.
	Timeout time.Duration
	// RetryMax is how many times a failed request is tried again (5xx,
	// timeouts, connection errors; never a 4xx). Defaults to 4.
	RetryMax int
	// RetryWaitMin and RetryWaitMax bound the backoff between tries.
	// Default 200 ms and 5 s.
	RetryWaitMin, RetryWaitMax time.Duration
	// RecoverWindow is how far before a lost submit's send time a run may
	// have been created and still count as the lost one (clock skew between
	// TMS and Gravitino). Defaults to 5 s.
	RecoverWindow time.Duration
	// Claimed reports whether an external job id is already some ledger
	// row's (another node's submit): such a run is never taken for a lost
	// one. nil: only this process's own answers are known.
	Claimed func(ctx context.Context, externalID string) (bool, error)
	// Transport replaces the HTTP transport (tests). nil: a pooled default.
	Transport http.RoundTripper
	// Log receives the submitter's logs. Defaults to a no-op logger.
	Log *zap.Logger
}

// GravitinoSubmitter submits jobs as runs of a Gravitino job template. It
// keeps no state a restart would lose: the run id is the row's external id,
// and any node can ask about or cancel any row's run.
//
// A submit is never sent twice for one answer: a POST whose answer was lost
// (connection reset, timeout, 5xx) is followed by a search of the
// template's runs for one created since it was sent that no ledger row and
// no other submit of this process owns. One such run is this job's; none
// means the POST was not applied and it is sent again; several, or one
// while another submit of this process has also lost its answer (either
// could own it), mean TMS cannot tell which is its own, so the submit fails
// without sending again (the row is closed failed, and a run of it that
// does start finds its row closed and exits fenced out without touching the
// table).
type GravitinoSubmitter struct {
	cfg    GravitinoConfig
	base   string                // URI/api/metalakes/{metalake}/jobs
	client *retryablehttp.Client // GET and cancel: retried
	once   *http.Client          // submit: one try per call

	tokMu   sync.Mutex
	token   string
	expires time.Time

	mu      sync.Mutex
	known   map[string]time.Time // run ids answered to this process → when
	pending map[int64]time.Time  // submits in flight → when sent
	// lost holds the submits whose answer was lost and whose run, if any,
	// is unknown: until their search decides (then they leave), or until
	// the time given when they gave up without one.
	lost map[int64]time.Time
	// disputed holds the runs a failed search could not tell apart, with
	// the submits that may own each: no search takes one for its own, and
	// one of an owner fails.
	disputed map[string]dispute
	pruned   time.Time // when known, lost and disputed were last pruned
	seq      int64
	settled  *sync.Cond // signalled when a pending submit settles
}

// dispute is a run a failed search could not place: when, and the submits
// (seq) whose run it may be.
type dispute struct {
	at     time.Time
	owners []int64
}

// NewGravitinoSubmitter checks cfg and returns the submitter. It does not
// contact Gravitino.
func NewGravitinoSubmitter(cfg GravitinoConfig) (*GravitinoSubmitter, error) {
	u, err := url.Parse(cfg.URI)
	switch {
	case cfg.URI == "":
		return nil, fmt.Errorf("%w: jobSubmitter.gravitino.uri is required", ErrInvalidJobRequest)
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return nil, fmt.Errorf("%w: jobSubmitter.gravitino.uri %q: want http(s)://host:port", ErrInvalidJobRequest, cfg.URI)
	case cfg.Metalake == "":
		return nil, fmt.Errorf("%w: jobSubmitter.gravitino.metalake is required", ErrInvalidJobRequest)
	case cfg.JobTemplateName == "":
		return nil, fmt.Errorf("%w: jobSubmitter.gravitino.jobTemplateName is required", ErrInvalidJobRequest)
	}
	switch cfg.Auth.Type {
	case "", "none":
		cfg.Auth.Type = "none"
	case "simple":
	case "basic":
		if cfg.Auth.User == "" {
			return nil, fmt.Errorf("%w: gravitinoAuth.user is required with authType basic", ErrInvalidJobRequest)
		}
	case "oauth2":
		if cfg.Auth.OAuth2ServerURI == "" {
			return nil, fmt.Errorf("%w: gravitinoAuth.oauth2ServerUri is required with authType oauth2", ErrInvalidJobRequest)
		}
		if id, _, ok := strings.Cut(cfg.Auth.OAuthCredential, ":"); !ok || id == "" {
			return nil, fmt.Errorf("%w: gravitinoAuth.oauthCredential must be client_id:client_secret", ErrInvalidJobRequest)
		}
	default:
		return nil, fmt.Errorf("%w: gravitinoAuth.authType %q: want none, simple, basic or oauth2", ErrInvalidJobRequest, cfg.Auth.Type)
	}
	for k, ref := range cfg.CatalogSecretRefs {
		if !strings.HasPrefix(ref, "env:") && !strings.HasPrefix(ref, "file:") {
			return nil, fmt.Errorf("%w: catalog credential %s: the gravitino submitter passes references only (env:NAME or file:PATH)", ErrInvalidJobRequest, k)
		}
	}
	cfg.Timeout = cmp.Or(cfg.Timeout, 30*time.Second)
	cfg.RetryMax = cmp.Or(cfg.RetryMax, 4)
	cfg.RetryWaitMin = cmp.Or(cfg.RetryWaitMin, 200*time.Millisecond)
	cfg.RetryWaitMax = cmp.Or(cfg.RetryWaitMax, 5*time.Second)
	cfg.RecoverWindow = cmp.Or(cfg.RecoverWindow, 5*time.Second)
	if cfg.Log == nil {
		cfg.Log = zap.NewNop()
	}
	tr := cfg.Transport
	if tr == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = 64
		tr = t
	}
	s := &GravitinoSubmitter{cfg: cfg, known: map[string]time.Time{}, pending: map[int64]time.Time{},
		lost: map[int64]time.Time{}, disputed: map[string]dispute{},
		base: strings.TrimSuffix(cfg.URI, "/") + "/api/metalakes/" + url.PathEscape(cfg.Metalake) + "/jobs"}
	s.settled = sync.NewCond(&s.mu)
	s.once = &http.Client{Transport: tr, Timeout: cfg.Timeout}
	s.client = retryablehttp.NewClient()
	s.client.HTTPClient = &http.Client{Transport: tr, Timeout: cfg.Timeout}
	s.client.RetryMax = cfg.RetryMax
	s.client.RetryWaitMin, s.client.RetryWaitMax = cfg.RetryWaitMin, cfg.RetryWaitMax
	s.client.Logger = nil
	s.client.ErrorHandler = retryablehttp.PassthroughErrorHandler
	return s, nil
}

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

// jobConf is the run's jobConf: the policy's non-sensitive jobOptions, then
// TMS's own keys (which win), all strings; never a credential.
func (s *GravitinoSubmitter) jobConf(req JobRequest) (map[string]string, error) {
	conf := map[string]string{}
	for k, v := range req.JobOptions {
		if policy.IsCredentialKey(k) {
			return nil, fmt.Errorf("%w: jobOptions key %q is credential-shaped; credentials never go into jobConf", ErrInvalidJobRequest, k)
		}
		conf[k] = v
	}
	maps.Copy(conf, jobValues(req))
	// Always set, empty when there are none: a template that uses the
	// placeholder must get a value (Gravitino leaves an unfilled one as it
	// is). URL query form, which holds no '\' and no '$'.
	refs := url.Values{}
	for k, ref := range s.cfg.CatalogSecretRefs {
		refs.Set(k, ref)
	}
	conf[ConfCatalogSecretRefs] = refs.Encode()
	// Gravitino fills placeholders with Java's Matcher.appendReplacement:
	// a '\' swallows the next character and a '$' is a group reference, so
	// a value holding either would reach the job changed, or fail the run.
	for _, k := range slices.Sorted(maps.Keys(conf)) {
		if strings.ContainsAny(conf[k], `\$`) {
			return nil, fmt.Errorf("%w: jobConf %s holds '\\' or '$', which Gravitino's placeholder substitution would change; write it without them",
				ErrInvalidJobRequest, k)
		}
	}
	return conf, nil
}

// Submit creates a run of the template for req and returns its id.
func (s *GravitinoSubmitter) Submit(ctx context.Context, req JobRequest) (string, error) {
	if err := req.validate(); err != nil {
		return "", err
	}
	conf, err := s.jobConf(req)
	if err != nil {
		return "", err
	}
	body, err := json.Marshal(map[string]any{"jobTemplateName": s.cfg.JobTemplateName, "jobConf": conf})
	if err != nil {
		return "", err
	}
	wait := s.cfg.RetryWaitMin
	for attempt := 0; ; attempt++ {
		sent := time.Now()
		seq := s.begin(sent)
		job, err := s.post(ctx, s.base+"/runs", body)
		if err == nil {
			s.settle(seq, job.JobID)
			s.cfg.Log.Info("job submitted", zap.String("submitter", "gravitino"), zap.Int64("job", req.JobID),
				zap.Int64("fence", req.Fence), zap.String("table", req.Table), zap.String("external_id", job.JobID))
			return job.JobID, nil
		}
		if !ambiguous(err) {
			s.settle(seq, "")
			return "", err
		}
		s.settleLost(seq)
		if attempt >= s.cfg.RetryMax {
			s.giveUp(seq, sent)
			return "", fmt.Errorf("submit to gravitino: %d tries: %w", attempt+1, err)
		}
		s.cfg.Log.Warn("gravitino submit: answer lost; looking for the run before sending again", zap.Int64("job", req.JobID),
			zap.Int("attempt", attempt+1), zap.Error(err))
		if err := sleepCtx(ctx, wait); err != nil {
			s.giveUp(seq, sent)
			return "", err
		}
		wait = min(2*wait, s.cfg.RetryWaitMax)
		id, err := s.recoverRun(ctx, seq, sent)
		if err != nil {
			return "", err
		}
		if id != "" {
			s.cfg.Log.Info("job submitted (answer lost; run found)", zap.String("submitter", "gravitino"), zap.Int64("job", req.JobID),
				zap.Int64("fence", req.Fence), zap.String("table", req.Table), zap.String("external_id", id))
			return id, nil
		}
	}
}

// begin records a submit in flight; settle records its end and, when it
// got an id, the id as known.
func (s *GravitinoSubmitter) begin(at time.Time) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	s.pending[s.seq] = at
	return s.seq
}

func (s *GravitinoSubmitter) settle(seq int64, id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.pending, seq)
	now := time.Now()
	if id != "" {
		s.known[id] = now
	}
	// Ids older than any recovery window are not needed. Pruned once a
	// minute, not on every settle: a scan of an hour of ids under s.mu
	// (720,000 at 200 submits/s, about 14 ms) would cap the submit rate.
	if now.Sub(s.pruned) > time.Minute {
		s.pruned = now
		maps.DeleteFunc(s.known, func(_ string, at time.Time) bool { return now.Sub(at) > time.Hour })
		maps.DeleteFunc(s.disputed, func(_ string, d dispute) bool { return now.Sub(d.at) > time.Hour })
		maps.DeleteFunc(s.lost, func(_ int64, until time.Time) bool { return !until.IsZero() && now.Sub(until) > time.Hour })
	}
	s.settled.Broadcast()
}

// settleLost records the end of a submit whose answer was lost: it is lost
// until its search decides or it gives up.
func (s *GravitinoSubmitter) settleLost(seq int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.pending, seq)
	s.lost[seq] = time.Time{}
	s.settled.Broadcast()
}

// giveUp ends a lost submit without a search's answer: its run, if any,
// stays unknown (made within Timeout of sent), so it still counts as lost
// for the searches of submits sent until RecoverWindow after that, whose
// lists may hold the run.
func (s *GravitinoSubmitter) giveUp(seq int64, sent time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lost[seq] = sent.Add(s.cfg.Timeout + s.cfg.RecoverWindow)
}

// recoverRun looks for the run a lost submit (sent at sent) may have
// created: a run of the template created since sent-RecoverWindow that no
// answer of this process and no ledger row owns. After listing the runs it
// waits for the other submits of this process that began before the list
// was answered (any of them may have made a listed run), so their runs are
// known; later submits cannot be in the list, so a steady stream of them
// does not hold the recovery up. It returns "" when there is none (the POST
// was not applied), and an error when there are several, or one that
// another lost submit of this process could own, or a disputed run this
// submit may own.
func (s *GravitinoSubmitter) recoverRun(ctx context.Context, seq int64, sent time.Time) (string, error) {
	var ans gravitinoAnswer
	if err := s.do(ctx, http.MethodGet, s.base+"/runs?jobTemplateName="+url.QueryEscape(s.cfg.JobTemplateName), &ans); err != nil {
		s.giveUp(seq, sent)
		return "", fmt.Errorf("gravitino submit: answer lost, and listing the runs to find it failed: %w", err)
	}
	s.mu.Lock()
	upto := s.seq // the last submit begun before the list was answered
	deadline := time.Now().Add(2 * s.cfg.Timeout)
	for s.inFlight(seq, upto) && time.Now().Before(deadline) {
		waitCond(s.settled, 100*time.Millisecond)
	}
	s.mu.Unlock()
	from := sent.Add(-s.cfg.RecoverWindow)
	var candidates []string
	for _, j := range ans.Jobs {
		if j.JobTemplateName != s.cfg.JobTemplateName || (!j.Audit.CreateTime.IsZero() && j.Audit.CreateTime.Before(from)) {
			continue
		}
		s.mu.Lock()
		_, mine := s.known[j.JobID]
		s.mu.Unlock()
		if mine {
			continue
		}
		if s.cfg.Claimed != nil {
			claimed, err := s.cfg.Claimed(ctx, j.JobID)
			if err != nil {
				s.giveUp(seq, sent)
				return "", fmt.Errorf("gravitino submit: answer lost; checking run %s against the ledger: %w", j.JobID, err)
			}
			if claimed {
				continue
			}
		}
		candidates = append(candidates, j.JobID)
	}
	// The verdict is taken under s.mu, so two searches never both take one
	// run, and a run another search took meanwhile is not a candidate.
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.lost, seq)
	var fresh, mayBeMine []string
	for _, id := range candidates {
		if _, taken := s.known[id]; taken {
			continue
		}
		if d, ok := s.disputed[id]; ok {
			// An earlier failed search's run: this submit's only if it was
			// among that search's lost submits (a submit begun after that
			// list was answered has no run in it).
			if slices.Contains(d.owners, seq) {
				mayBeMine = append(mayBeMine, id)
			}
			continue
		}
		fresh = append(fresh, id)
	}
	// Other lost submits whose run may be in the list: those begun before
	// it was answered, still searching or given up.
	owners := []int64{seq}
	for k, until := range s.lost {
		if k <= upto && (until.IsZero() || sent.Before(until)) {
			owners = append(owners, k)
		}
	}
	switch {
	case len(mayBeMine) == 0 && len(fresh) == 0:
		return "", nil
	case len(mayBeMine) == 0 && len(fresh) == 1 && len(owners) == 1:
		s.known[fresh[0]] = time.Now()
		return fresh[0], nil
	}
	for _, id := range fresh {
		s.disputed[id] = dispute{at: time.Now(), owners: owners}
	}
	runs := slices.Sorted(slices.Values(append(fresh, mayBeMine...)))
	if len(runs) == 1 {
		return "", fmt.Errorf("gravitino submit: the answer was lost and run %s, created since, could be this job's or that of another submit whose answer was lost; not sent again",
			runs[0])
	}
	return "", fmt.Errorf("gravitino submit: the answer was lost and %d runs created since could be this job's (%s); not sent again",
		len(runs), strings.Join(runs, ", "))
}

// inFlight reports whether a submit other than seq, begun no later than
// submit upto, is still in flight. Called with s.mu held.
func (s *GravitinoSubmitter) inFlight(seq, upto int64) bool {
	for k := range s.pending {
		if k != seq && k <= upto {
			return true
		}
	}
	return false
}

// waitCond waits on c (its lock held) for a signal or d, whichever first.
func waitCond(c *sync.Cond, d time.Duration) {
	t := time.AfterFunc(d, c.Broadcast)
	c.Wait()
	t.Stop()
}

// Status asks Gravitino for the run's status.
func (s *GravitinoSubmitter) Status(ctx context.Context, id string) (JobStatus, error) {
	var ans gravitinoAnswer
	err := s.do(ctx, http.MethodGet, s.base+"/runs/"+url.PathEscape(id), &ans)
	var ge *GravitinoError
	if errors.As(err, &ge) && ge.HTTPStatus == http.StatusNotFound && ge.Type == "NoSuchJobException" {
		return JobStatus{State: JobUnknown, ExitCode: -1, Message: "gravitino has no run " + id}, nil
	}
	if err != nil {
		return JobStatus{}, err
	}
	if ans.Job == nil {
		return JobStatus{}, fmt.Errorf("gravitino: the answer for run %s holds no job", id)
	}
	st := JobStatus{ExitCode: -1, SubmittedAt: ans.Job.Audit.CreateTime}
	switch strings.ToLower(ans.Job.Status) {
	case "queued":
		st.State = JobQueued
	case "started":
		st.State = JobRunning
	case "cancelling":
		st.State, st.Message = JobRunning, "cancelling"
	case "succeeded":
		st.State = JobSucceeded
	case "failed":
		st.State, st.Message = JobFailed, "gravitino run "+id+" failed"
	case "cancelled":
		st.State, st.Message = JobCancelled, "gravitino run "+id+" cancelled"
	default:
		return JobStatus{}, fmt.Errorf("gravitino: run %s has status %q; want queued, started, succeeded, failed, cancelling or cancelled", id, ans.Job.Status)
	}
	return st, nil
}

// Cancel asks Gravitino to cancel the run (ignored by Gravitino for a run
// that already ended).
func (s *GravitinoSubmitter) Cancel(ctx context.Context, id string) error {
	var ans gravitinoAnswer
	err := s.do(ctx, http.MethodPost, s.base+"/runs/"+url.PathEscape(id), &ans)
	var ge *GravitinoError
	if errors.As(err, &ge) && ge.HTTPStatus == http.StatusNotFound && ge.Type == "NoSuchJobException" {
		return fmt.Errorf("%w: gravitino has no run %s", ErrUnknownJob, id)
	}
	return err
}

// SetClaimed sets GravitinoConfig.Claimed (the ledger check, known once
// the ledger is open). Call it before the first Submit.
func (s *GravitinoSubmitter) SetClaimed(f func(ctx context.Context, externalID string) (bool, error)) {
	s.cfg.Claimed = f
}

// Authoritative reports that Status knows every run this submitter (on any
// node) created: an unknown id is one Gravitino does not have, not one
// another process holds.
func (s *GravitinoSubmitter) Authoritative() bool { return true }

// Close releases idle connections.
func (s *GravitinoSubmitter) Close(context.Context) error {
	s.once.CloseIdleConnections()
	s.client.HTTPClient.CloseIdleConnections()
	return nil
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

var _ Submitter = (*GravitinoSubmitter)(nil)
