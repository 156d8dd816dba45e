package submit

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
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

var _ Submitter = (*GravitinoSubmitter)(nil)
