// Package gravitinotest is a test double of Apache Gravitino's Job REST API.
//
// It implements the job system that Gravitino 1.0.0 documents in
// docs/manage-jobs-in-gravitino.md and docs/open-api/jobs.yaml, with the wire
// shapes of its DTOs (common/.../dto/job/JobDTO.java, JobTemplateDTO.java,
// ShellJobTemplateDTO.java, SparkJobTemplateDTO.java, dto/AuditDTO.java,
// dto/responses/ErrorResponse.java and ErrorConstants.java) and the behaviour
// of the code behind them (server/.../rest/JobOperations.java and
// ExceptionHandlers.java, core/.../job/JobManager.java and
// job/local/LocalJobExecutor.java, ShellProcessBuilder.java). It exists
// because a real Gravitino is a JVM server with an entity store that cannot
// run in this repository's tests. It is for tests only; production code must
// not import it.
//
// It serves, under /api, with the state kept in memory:
//
//   - GET and POST /metalakes/{m}/jobs/templates (list names, or the templates
//     with ?details=true; register), GET and DELETE
//     /metalakes/{m}/jobs/templates/{name};
//   - GET and POST /metalakes/{m}/jobs/runs (list, optionally
//     ?jobTemplateName=; run), GET /metalakes/{m}/jobs/runs/{jobId} and
//     POST /metalakes/{m}/jobs/runs/{jobId} (cancel).
//
// A run of a shell template really executes: like Gravitino's local job
// executor, the server links the executable and the scripts into a staging
// folder <StagingDir>/<metalake>/<template>/job-<id>, replaces every
// {{key}} placeholder of the arguments, environments and customFields with
// jobConf[key], and starts the executable directly (no shell) in that folder
// with the server's environment plus the template's environments, stdout to
// output.log and stderr to error.log. Exit 0 is succeeded, anything else
// failed. At most Config.MaxRunning run at once; the others stay queued.
//
// Behaviours the docs leave open, taken from Gravitino's source (each is
// what a client meets against a real Gravitino 1.0):
//
//   - Job ids are "job-" and a random positive 63-bit number
//     (RandomIdGenerator), not a sequence.
//   - Registering a template answers {"code":0} (a BaseResponse), not the
//     template.
//   - A placeholder with no value in jobConf is left as it is ("{{x}}" reaches
//     the process); Config.StrictPlaceholders rejects such a run with 400
//     instead.
//   - A jobConf value is inserted with java.util.regex.Matcher's
//     appendReplacement, so "\" escapes the next character, "$0" and "$1"
//     are the placeholder and its key, "$2" is a 500, and any other "$" is a
//     400 "Illegal group reference".
//   - A run answers with status queued; cancelling answers cancelling (also for
//     a queued run, which the executor drops at once, so the next read says
//     cancelled); a run whose process still exits 0 after a cancel is
//     succeeded, as LocalJobExecutor reports it.
//   - Unknown fields in a request body are a 400 "Malformed json request"
//     (Jackson's FAIL_ON_UNKNOWN_PROPERTIES), strings may be given as JSON
//     numbers or booleans, and trailing data after the JSON value is ignored.
//   - Error messages have ExceptionHandlers' form, e.g. "Failed to operate
//     job(s) [job-1] operation [GET] under object [m], reason [Job with ID
//     job-1 under metalake m does not exist]"; responses are
//     Content-Type application/json.
//   - 401 answers are Gravitino 1.3's JSON ErrorResponse (code 1011,
//     UnauthorizedException) by default; UnauthorizedJetty gives the Jetty
//     error page that 1.0 to 1.2 send.
//
// What it does not implement: every API other than the job API (metalakes,
// catalogs, ... : only the configured metalakes exist, all in use);
// altering templates (Gravitino 1.1); running spark templates (registered
// and listed, but a run fails at once, as in 1.0); the waiting-queue limit,
// staging-folder cleanup and job-status expiry; ftp:// executables;
// authorization (privileges) and Kerberos; Gravitino's OAuth validation
// against a configured key or JWKS (this server is its own token endpoint
// and signs HS256 tokens); Java stack traces ("stack" is always []); times
// finer than milliseconds. Where Gravitino 1.0 fails with an unhandled
// exception (a missing request body, "jobTemplate": null) this server
// answers 400. Routes outside the job API answer a plain 404 or 405. The
// Accept and Content-Type of requests are recorded but not enforced unless
// Config.EnforceMediaTypes is set (then 406/415, as Jersey). Auth "basic"
// (a checked user and password) is not a Gravitino authenticator: it stands
// for a Basic-auth proxy in front of one.
//
// Statuses reach the API at once; Gravitino copies the executor's status
// into its store only every gravitino.job.statusPullIntervalInMs, which
// Config.StatusPullInterval reproduces.
package gravitinotest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// MediaType is the media type Gravitino clients send in Accept.
const MediaType = "application/vnd.gravitino.v1+json"

// DefaultMetalake is the metalake that exists when Config.Metalakes is empty.
const DefaultMetalake = "test"

// Gravitino's error codes (ErrorConstants).
const (
	CodeIllegalArguments = 1001 // HTTP 400
	CodeInternalError    = 1002 // HTTP 500
	CodeNotFound         = 1003 // HTTP 404
	CodeAlreadyExists    = 1004 // HTTP 409
	CodeInUse            = 1010 // HTTP 409
	CodeUnauthorized     = 1011 // HTTP 401 (Gravitino 1.3)
)

// anonymous is the principal of unauthenticated calls and of the status
// updates the server makes by itself (AuthConstants.ANONYMOUS_USER).
const anonymous = "anonymous"

// maxBody bounds the request bodies the server reads.
const maxBody = 16 << 20

// Status is a job status as the API spells it.
type Status string

// The job statuses (JobHandle.Status).
const (
	StatusQueued     Status = "queued"
	StatusStarted    Status = "started"
	StatusSucceeded  Status = "succeeded"
	StatusFailed     Status = "failed"
	StatusCancelling Status = "cancelling"
	StatusCancelled  Status = "cancelled"
)

// Done reports whether s is final: succeeded, failed or cancelled.
func (s Status) Done() bool {
	return s == StatusSucceeded || s == StatusFailed || s == StatusCancelled
}

// active reports whether Gravitino still pulls the status of a job in s.
func (s Status) active() bool {
	return s == StatusQueued || s == StatusStarted || s == StatusCancelling
}

// AuthMode is how the server authenticates API calls.
type AuthMode string

// The authentication modes.
const (
	// AuthNone ignores Authorization; every caller is "anonymous".
	AuthNone AuthMode = "none"
	// AuthSimple is Gravitino's simple authenticator: the user of
	// "Authorization: Basic base64(user:anything)" is the principal, no
	// header (or an undecodable one) is "anonymous", and any other scheme
	// is a 401.
	AuthSimple AuthMode = "simple"
	// AuthBasic checks Config.Username and Config.Password (401 otherwise).
	AuthBasic AuthMode = "basic"
	// AuthOAuth2 needs "Authorization: Bearer <token>" with a token from the
	// server's own token endpoint (Config.OAuth2TokenPath).
	AuthOAuth2 AuthMode = "oauth2"
)

// UnauthorizedStyle is the form of a 401 answer.
type UnauthorizedStyle int

// The 401 styles.
const (
	// UnauthorizedJSON is Gravitino 1.3's ErrorResponse:
	// {"code":1011,"type":"UnauthorizedException","message":...,"stack":[]}.
	UnauthorizedJSON UnauthorizedStyle = iota
	// UnauthorizedJetty is Jetty's error page, as Gravitino 1.0 to 1.2
	// answer: HTML, Jetty JSON or text by the Accept header, and an empty
	// body for Accept: application/vnd.gravitino.v1+json.
	UnauthorizedJetty
)

// Config configures a Server. The zero value is usable: metalake "test", no
// authentication, 4 running jobs, a temporary staging folder.
type Config struct {
	// Metalakes are the metalakes that exist (default [DefaultMetalake]).
	Metalakes []string
	// Auth is the authentication mode (default AuthNone).
	Auth AuthMode
	// Username and Password are the credentials AuthBasic accepts.
	Username, Password string
	// OAuth2ClientID and OAuth2ClientSecret are the client credentials the
	// token endpoint accepts (AuthOAuth2).
	OAuth2ClientID, OAuth2ClientSecret string
	// OAuth2Scope, when set, must be among the requested scopes.
	OAuth2Scope string
	// OAuth2Audience is the tokens' audience (default "test", as
	// gravitino.authenticator.oauth.serviceAudience in Gravitino's docs).
	OAuth2Audience string
	// OAuth2TokenPath is the token endpoint (default "/oauth2/token").
	OAuth2TokenPath string
	// OAuth2TokenTTL is the tokens' lifetime (default 1h, whole seconds).
	OAuth2TokenTTL time.Duration
	// UnauthorizedStyle is the form of 401 answers (default UnauthorizedJSON).
	UnauthorizedStyle UnauthorizedStyle
	// MaxRunning is how many jobs run at once (default 4).
	MaxRunning int
	// StagingDir holds the job folders (default: a temporary folder, removed
	// by Close).
	StagingDir string
	// BaseEnv is the environment jobs start from (default os.Environ()); the
	// template's environments are added to it.
	BaseEnv []string
	// CancelGrace is how long a cancelled job has between SIGTERM and
	// SIGKILL to its process group (default 5s).
	CancelGrace time.Duration
	// StatusPullInterval, when positive, delays status changes reaching the
	// API to a pull every interval, as gravitino.job.statusPullIntervalInMs
	// does; 0 publishes them at once. Server.PullStatuses pulls on demand.
	StatusPullInterval time.Duration
	// StrictPlaceholders rejects a run whose jobConf lacks a placeholder's
	// key with 400 IllegalArgumentException naming it (Gravitino keeps the
	// placeholder as it is).
	StrictPlaceholders bool
	// EnforceMediaTypes answers 406 to an Accept that excludes MediaType and
	// 415 to a request body that is not JSON, as Jersey does.
	EnforceMediaTypes bool
	// Latency is added to every answer (Server.SetLatency changes it).
	Latency time.Duration
}

// FaultKind is a fault Server.Inject can program.
type FaultKind int

// The fault kinds.
const (
	// Status503 answers 503 with a Gravitino error body; the request is not
	// applied.
	Status503 FaultKind = iota + 1
	// ResetAfterApply applies the request, then resets the TCP connection
	// without answering. Go's http.Transport resends an idempotent request
	// (GET) that fails so on a reused connection by itself, so a client may
	// see only the second answer.
	ResetAfterApply
	// Slow applies the request and answers after Fault.Delay.
	Slow
	// Status401 answers 401 as an authentication failure would; the request
	// is not applied.
	Status401
	// NotJSON answers 200 with an HTML body; the request is not applied.
	NotJSON
)

// String names the fault kind.
func (k FaultKind) String() string {
	switch k {
	case 0:
		return "none"
	case Status503:
		return "Status503"
	case ResetAfterApply:
		return "ResetAfterApply"
	case Slow:
		return "Slow"
	case Status401:
		return "Status401"
	case NotJSON:
		return "NotJSON"
	}
	return "FaultKind(" + strconv.Itoa(int(k)) + ")"
}

// Fault programs a fault for the next matching requests.
type Fault struct {
	// Method matches the request method; empty matches any.
	Method string
	// Path matches a suffix of the URL path (e.g. "/jobs/runs" matches runs
	// but not /jobs/runs/job-1); empty matches any.
	Path string
	// Kind is the fault.
	Kind FaultKind
	// Count is how many matching requests get the fault (at least 1).
	Count int
	// Delay is how long Slow waits before answering (default 1s).
	Delay time.Duration
}

// Server is a running Gravitino job API double. Its methods are safe for
// concurrent use.
type Server struct {
	cfg        Config
	stagingDir string
	ownStaging bool
	baseEnv    []string
	metalakes  map[string]*metalake // fixed keys; the templates are guarded by mu
	hs         *httptest.Server

	mu       sync.Mutex
	runs     map[string]*run
	runOrder []*run
	queue    []*run
	running  int
	faults   []*Fault
	requests []Request
	latency  time.Duration
	signKey  []byte
	changed  chan struct{}
	closed   bool

	closing   chan struct{}
	closeOnce sync.Once
	procs     sync.WaitGroup // process waiters
	loops     sync.WaitGroup // the status pull loop
}

// metalake holds one metalake's templates, in registration order.
type metalake struct {
	templates map[string]*JobTemplate
	order     []string
}

// run is a job run (Gravitino's JobEntity plus the executor's state).
type run struct {
	id, metalake, template string
	jobType                string
	conf                   map[string]string
	executable             string

	status                   Status // the entity's status, as the API reports it
	creator                  string
	createTime               time.Time
	lastModifier             string
	lastModifiedTime         time.Time
	execStatus               Status
	argv                     []string
	env                      map[string]string
	custom                   map[string]string
	dir                      string
	pid                      int
	started, exited          bool
	exitCode                 int
	signal                   string
	startErr                 string
	cancelRequested, deleted bool
	startTime, endTime       time.Time
	killTimer                *time.Timer
}

// New makes a Server from cfg; serve its Handler, or use Start. Close it.
func New(cfg Config) (*Server, error) {
	if len(cfg.Metalakes) == 0 {
		cfg.Metalakes = []string{DefaultMetalake}
	}
	if cfg.Auth == "" {
		cfg.Auth = AuthNone
	}
	switch cfg.Auth {
	case AuthNone, AuthSimple:
	case AuthBasic:
		if cfg.Username == "" {
			return nil, errors.New("gravitinotest: Config.Auth basic needs Config.Username")
		}
	case AuthOAuth2:
		if cfg.OAuth2ClientID == "" || cfg.OAuth2ClientSecret == "" {
			return nil, errors.New("gravitinotest: Config.Auth oauth2 needs Config.OAuth2ClientID and Config.OAuth2ClientSecret")
		}
	default:
		return nil, fmt.Errorf("gravitinotest: unknown Config.Auth %q", cfg.Auth)
	}
	if cfg.OAuth2Audience == "" {
		cfg.OAuth2Audience = "test"
	}
	if cfg.OAuth2TokenPath == "" {
		cfg.OAuth2TokenPath = "/oauth2/token"
	}
	if !strings.HasPrefix(cfg.OAuth2TokenPath, "/") || strings.HasPrefix(cfg.OAuth2TokenPath, "/api/") {
		return nil, fmt.Errorf("gravitinotest: Config.OAuth2TokenPath %q must start with / and be outside /api/", cfg.OAuth2TokenPath)
	}
	if cfg.OAuth2TokenTTL == 0 {
		cfg.OAuth2TokenTTL = time.Hour
	}
	if cfg.OAuth2TokenTTL < time.Second {
		return nil, fmt.Errorf("gravitinotest: Config.OAuth2TokenTTL %v is under a second", cfg.OAuth2TokenTTL)
	}
	if cfg.MaxRunning < 0 {
		return nil, fmt.Errorf("gravitinotest: Config.MaxRunning %d is negative", cfg.MaxRunning)
	}
	if cfg.MaxRunning == 0 {
		cfg.MaxRunning = 4
	}
	if cfg.CancelGrace < 0 || cfg.StatusPullInterval < 0 || cfg.Latency < 0 {
		return nil, errors.New("gravitinotest: Config.CancelGrace, StatusPullInterval and Latency must not be negative")
	}
	if cfg.CancelGrace == 0 {
		cfg.CancelGrace = 5 * time.Second
	}
	s := &Server{
		cfg:       cfg,
		metalakes: map[string]*metalake{},
		runs:      map[string]*run{},
		latency:   cfg.Latency,
		signKey:   newKey(),
		changed:   make(chan struct{}),
		closing:   make(chan struct{}),
	}
	for _, m := range cfg.Metalakes {
		if strings.TrimSpace(m) == "" || strings.Contains(m, "/") {
			return nil, fmt.Errorf("gravitinotest: metalake name %q is not valid", m)
		}
		s.metalakes[m] = &metalake{templates: map[string]*JobTemplate{}}
	}
	s.baseEnv = cfg.BaseEnv
	if s.baseEnv == nil {
		s.baseEnv = os.Environ()
	}
	s.stagingDir = cfg.StagingDir
	if s.stagingDir == "" {
		dir, err := os.MkdirTemp("", "gravitinotest-staging-")
		if err != nil {
			return nil, fmt.Errorf("gravitinotest: create staging folder: %w", err)
		}
		s.stagingDir, s.ownStaging = dir, true
	} else if err := os.MkdirAll(s.stagingDir, 0o755); err != nil {
		return nil, fmt.Errorf("gravitinotest: create staging folder %s: %w", s.stagingDir, err)
	}
	abs, err := filepath.Abs(s.stagingDir)
	if err != nil {
		return nil, fmt.Errorf("gravitinotest: staging folder %s: %w", s.stagingDir, err)
	}
	s.stagingDir = abs
	if cfg.StatusPullInterval > 0 {
		s.loops.Add(1)
		go s.pullLoop()
	}
	return s, nil
}

// Start starts a Server on an httptest server; the test's cleanup closes it.
// The staging folder defaults to a t.TempDir.
func Start(t testing.TB, cfg Config) *Server {
	t.Helper()
	if cfg.StagingDir == "" {
		cfg.StagingDir = t.TempDir()
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatalf("gravitinotest.Start: %v", err)
	}
	s.hs = httptest.NewServer(s)
	t.Cleanup(s.Close)
	return s
}

// URL is the server's base URL (http://127.0.0.1:PORT, without /api), or ""
// when the Server was made with New.
func (s *Server) URL() string {
	if s.hs == nil {
		return ""
	}
	return s.hs.URL
}

// Client is an HTTP client for the server.
func (s *Server) Client() *http.Client {
	if s.hs == nil {
		return http.DefaultClient
	}
	return s.hs.Client()
}

// Handler is the server's HTTP handler (the Server itself).
func (s *Server) Handler() http.Handler { return s }

// StagingDir is the folder that holds the job folders.
func (s *Server) StagingDir() string { return s.stagingDir }

// Close stops the HTTP server, cancels the running jobs (SIGTERM to their
// process groups, SIGKILL after Config.CancelGrace), leaves queued jobs
// unstarted, and waits for every process. It is idempotent.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		close(s.closing)
		s.queue = nil
		for _, r := range s.runOrder {
			if r.started && !r.exited {
				if r.execStatus == StatusStarted {
					r.execStatus = StatusCancelling
				}
				_ = syscall.Kill(-r.pid, syscall.SIGTERM)
			}
		}
		s.mu.Unlock()
		if s.hs != nil {
			s.hs.Close()
		}
		done := make(chan struct{})
		go func() { s.procs.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(s.cfg.CancelGrace):
			s.mu.Lock()
			for _, r := range s.runOrder {
				if r.started && !r.exited {
					_ = syscall.Kill(-r.pid, syscall.SIGKILL)
				}
			}
			s.mu.Unlock()
			<-done
		}
		s.loops.Wait()
		s.mu.Lock()
		for _, r := range s.runOrder {
			if r.killTimer != nil {
				r.killTimer.Stop()
			}
		}
		s.mu.Unlock()
		if s.ownStaging {
			_ = os.RemoveAll(s.stagingDir)
		}
	})
}

// SetLatency sets the delay added to every answer.
func (s *Server) SetLatency(d time.Duration) {
	s.mu.Lock()
	s.latency = d
	s.mu.Unlock()
}

// Inject programs a fault; faults are matched in the order injected.
func (s *Server) Inject(f Fault) {
	if f.Count <= 0 {
		f.Count = 1
	}
	if f.Kind == Slow && f.Delay <= 0 {
		f.Delay = time.Second
	}
	s.mu.Lock()
	s.faults = append(s.faults, &f)
	s.mu.Unlock()
}

// ClearFaults drops the faults not yet spent.
func (s *Server) ClearFaults() {
	s.mu.Lock()
	s.faults = nil
	s.mu.Unlock()
}

// PendingFaults is how many injected faults are still to be served.
func (s *Server) PendingFaults() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, f := range s.faults {
		n += f.Count
	}
	return n
}

// ExpireTokens makes every OAuth2 token issued so far invalid (401), as if
// it had expired; new tokens work.
func (s *Server) ExpireTokens() {
	s.mu.Lock()
	s.signKey = newKey()
	s.mu.Unlock()
}

// Requests is a copy of the requests received so far, oldest first.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Request, len(s.requests))
	for i, r := range s.requests {
		r.Header = r.Header.Clone()
		r.Body = slices.Clone(r.Body)
		out[i] = r
	}
	return out
}

// ClearRequests forgets the requests received so far.
func (s *Server) ClearRequests() {
	s.mu.Lock()
	s.requests = nil
	s.mu.Unlock()
}

// Runs is a snapshot of every run, oldest first.
func (s *Server) Runs() []Run {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Run, len(s.runOrder))
	for i, r := range s.runOrder {
		out[i] = r.snapshot()
	}
	return out
}

// Run is a snapshot of the run jobID.
func (s *Server) Run(jobID string) (Run, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.runs[jobID]
	if !ok {
		return Run{}, false
	}
	return r.snapshot(), true
}

// WaitForStatus waits until the API status of jobID is one of want, and
// returns the run then.
func (s *Server) WaitForStatus(ctx context.Context, jobID string, want ...Status) (Run, error) {
	for {
		s.mu.Lock()
		r, ok := s.runs[jobID]
		if !ok {
			s.mu.Unlock()
			return Run{}, fmt.Errorf("gravitinotest: no job %s", jobID)
		}
		snap, ch := r.snapshot(), s.changed
		s.mu.Unlock()
		if slices.Contains(want, snap.Status) {
			return snap, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return snap, fmt.Errorf("gravitinotest: job %s is %s, not %v: %w", jobID, snap.Status, want, ctx.Err())
		}
	}
}

// PullStatuses copies the executor's statuses into the API's now, as
// Gravitino's periodic status pull does.
func (s *Server) PullStatuses() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.runOrder {
		s.pullLocked(r)
	}
	s.notifyLocked()
}
