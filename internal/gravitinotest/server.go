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
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"maps"
	mathrand "math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
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

// Audit is Gravitino's AuditDTO; empty fields are omitted, as Gravitino
// omits nulls.
type Audit struct {
	Creator          string `json:"creator,omitempty"`
	CreateTime       string `json:"createTime,omitempty"`
	LastModifier     string `json:"lastModifier,omitempty"`
	LastModifiedTime string `json:"lastModifiedTime,omitempty"`
}

// Job is Gravitino's JobDTO, exactly: it carries no jobConf.
type Job struct {
	JobID           string `json:"jobId"`
	JobTemplateName string `json:"jobTemplateName"`
	Status          Status `json:"status"`
	Audit           Audit  `json:"audit"`
}

// JobTemplate is a job template (ShellJobTemplateDTO or SparkJobTemplateDTO).
// It marshals as the DTO of its JobType: a shell template has "scripts", a
// spark one "className", "jars", "files", "archives" and "configs".
type JobTemplate struct {
	JobType      string            `json:"jobType"`
	Name         string            `json:"name"`
	Comment      *string           `json:"comment,omitempty"`
	Executable   string            `json:"executable"`
	Arguments    []string          `json:"arguments"`
	Environments map[string]string `json:"environments"`
	CustomFields map[string]string `json:"customFields"`
	Scripts      []string          `json:"scripts,omitempty"`
	ClassName    string            `json:"className,omitempty"`
	Jars         []string          `json:"jars,omitempty"`
	Files        []string          `json:"files,omitempty"`
	Archives     []string          `json:"archives,omitempty"`
	Configs      map[string]string `json:"configs,omitempty"`
	Audit        *Audit            `json:"audit,omitempty"`
}

// MarshalJSON writes the template as Gravitino's DTO of its type, with empty
// lists and maps as [] and {}.
func (t JobTemplate) MarshalJSON() ([]byte, error) {
	type common struct {
		JobType      string            `json:"jobType"`
		Name         string            `json:"name"`
		Comment      *string           `json:"comment,omitempty"`
		Executable   string            `json:"executable"`
		Arguments    []string          `json:"arguments"`
		Environments map[string]string `json:"environments"`
		CustomFields map[string]string `json:"customFields"`
		Audit        *Audit            `json:"audit,omitempty"`
	}
	c := common{
		JobType: t.JobType, Name: t.Name, Comment: t.Comment, Executable: t.Executable,
		Arguments: orEmpty(t.Arguments), Environments: orEmptyMap(t.Environments),
		CustomFields: orEmptyMap(t.CustomFields), Audit: t.Audit,
	}
	if t.JobType == "spark" {
		return json.Marshal(struct {
			common
			ClassName string            `json:"className"`
			Jars      []string          `json:"jars"`
			Files     []string          `json:"files"`
			Archives  []string          `json:"archives"`
			Configs   map[string]string `json:"configs"`
		}{c, t.ClassName, orEmpty(t.Jars), orEmpty(t.Files), orEmpty(t.Archives), orEmptyMap(t.Configs)})
	}
	return json.Marshal(struct {
		common
		Scripts []string `json:"scripts"`
	}{c, orEmpty(t.Scripts)})
}

// ErrorResponse is Gravitino's error body.
type ErrorResponse struct {
	Code    int      `json:"code"`
	Type    string   `json:"type"`
	Message string   `json:"message"`
	Stack   []string `json:"stack"`
}

// Run is the server's record of one job run, for tests to check.
type Run struct {
	JobID    string
	Metalake string
	Template string
	// JobConf is the jobConf of the run request (JSON nulls left out).
	JobConf map[string]string
	// Status is the status the API reports.
	Status Status
	// ExecutorStatus is the executor's own status (ahead of Status when
	// Config.StatusPullInterval is set).
	ExecutorStatus Status
	// Creator is the principal that ran the job.
	Creator string
	// Executable is the template's executable as registered.
	Executable string
	// Argv is the command line executed: the executable linked into Dir,
	// then the rendered arguments (prefixed by /bin/sh when the executable
	// is a script without "#!", as Java's ProcessBuilder falls back to).
	Argv []string
	// EnvAdded is the rendered template environments added to the base
	// environment.
	EnvAdded map[string]string
	// CustomFields is the rendered template customFields.
	CustomFields map[string]string
	// Dir is the job's staging folder and working directory.
	Dir string
	// StdoutPath and StderrPath are the files of the process's output
	// (output.log and error.log in Dir).
	StdoutPath, StderrPath string
	// PID is the process id (also its process group id), 0 if never started.
	PID int
	// Exited reports that the process has ended.
	Exited bool
	// ExitCode is the exit status as Java's Process.waitFor reports it:
	// the code, or 128+N after signal N.
	ExitCode int
	// Signal names the signal that ended the process, if any.
	Signal string
	// StartError is why the process could not start, if it could not.
	StartError string
	// CancelRequested reports that a cancel reached the executor.
	CancelRequested bool
	// Deleted reports that the run's template was deleted with its runs.
	Deleted bool
	// CreateTime, StartTime and EndTime are when the run was created,
	// started and ended (zero if not yet).
	CreateTime, StartTime, EndTime time.Time
}

// Request is one request the server received.
type Request struct {
	Time   time.Time
	Method string
	// Path is the URL path; Query the raw query.
	Path, Query string
	// Header is every request header, as received.
	Header http.Header
	// Accept and ContentType are those headers.
	Accept, ContentType string
	// HasAuthorization reports an Authorization header; AuthScheme is its
	// first word (e.g. "Bearer").
	HasAuthorization bool
	AuthScheme       string
	// Body is the request body.
	Body []byte
	// Fault is the fault injected into this request (0 if none).
	Fault FaultKind
	// Status is the HTTP status answered; 0 if the connection was reset or
	// the answer is not written yet.
	Status int
}

// Text is the request as one string (method, URL, headers, body), for
// grepping.
func (r Request) Text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", r.Method, r.Path)
	if r.Query != "" {
		b.WriteString("?" + r.Query)
	}
	b.WriteString("\n")
	for _, k := range slices.Sorted(maps.Keys(r.Header)) {
		for _, v := range r.Header[k] {
			fmt.Fprintf(&b, "%s: %s\n", k, v)
		}
	}
	b.WriteString("\n")
	b.Write(r.Body)
	return b.String()
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

// RegisterTemplate registers a template in metalake without an HTTP call,
// with creator "anonymous".
func (s *Server) RegisterTemplate(metalake string, t JobTemplate) error {
	if t.JobType == "" {
		t.JobType = "shell"
	}
	if _, err := normalize(&t); err != nil {
		return fmt.Errorf("gravitinotest: template %q: %w", t.Name, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ml, ok := s.metalakes[metalake]
	if !ok {
		return fmt.Errorf("gravitinotest: metalake %s does not exist", metalake)
	}
	if _, dup := ml.templates[t.Name]; dup {
		return fmt.Errorf("gravitinotest: template %s already exists in metalake %s", t.Name, metalake)
	}
	s.addTemplateLocked(ml, &t, anonymous)
	return nil
}

func (r *run) snapshot() Run {
	return Run{
		JobID: r.id, Metalake: r.metalake, Template: r.template,
		JobConf: cloneMap(r.conf), Status: r.status, ExecutorStatus: r.execStatus,
		Creator: r.creator, Executable: r.executable, Argv: slices.Clone(r.argv),
		EnvAdded: cloneMap(r.env), CustomFields: cloneMap(r.custom), Dir: r.dir,
		StdoutPath: filepath.Join(r.dir, "output.log"), StderrPath: filepath.Join(r.dir, "error.log"),
		PID: r.pid, Exited: r.exited, ExitCode: r.exitCode, Signal: r.signal, StartError: r.startErr,
		CancelRequested: r.cancelRequested, Deleted: r.deleted,
		CreateTime: r.createTime, StartTime: r.startTime, EndTime: r.endTime,
	}
}

func (r *run) dto() Job {
	a := Audit{Creator: r.creator, CreateTime: formatTime(r.createTime), LastModifier: r.lastModifier}
	if !r.lastModifiedTime.IsZero() {
		a.LastModifiedTime = formatTime(r.lastModifiedTime)
	}
	return Job{JobID: r.id, JobTemplateName: r.template, Status: r.status, Audit: a}
}

// ---- HTTP ----

// bufferedResponse holds an answer until the server decides how to deliver
// it (after a delay, or not at all).
type bufferedResponse struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (b *bufferedResponse) Header() http.Header { return b.header }

func (b *bufferedResponse) WriteHeader(code int) {
	if b.status == 0 {
		b.status = code
	}
}

func (b *bufferedResponse) Write(p []byte) (int, error) {
	b.WriteHeader(http.StatusOK)
	return b.body.Write(p)
}

// ServeHTTP records the request, applies any fault, and answers it.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, maxBody))
	idx, fault, latency, closed := s.begin(r, body)
	if closed {
		http.Error(w, "gravitinotest: server closed", http.StatusServiceUnavailable)
		s.finish(idx, http.StatusServiceUnavailable)
		return
	}
	bw := &bufferedResponse{header: http.Header{}}
	switch fault.Kind {
	case Status503:
		writeJSON(bw, http.StatusServiceUnavailable, ErrorResponse{
			Code: CodeInternalError, Type: "RuntimeException",
			Message: "Service unavailable (fault injected by gravitinotest)", Stack: []string{},
		})
	case Status401:
		s.writeUnauthorized(bw, r, "The provided credentials did not support", "")
	case NotJSON:
		bw.Header().Set("Content-Type", "text/html")
		bw.WriteHeader(http.StatusOK)
		bw.body.WriteString("<html><body><h1>gateway</h1></body></html>\n")
	default:
		s.route(bw, r, body)
	}
	d := latency
	if fault.Kind == Slow {
		d += fault.Delay
	}
	s.pause(r.Context(), d)
	if fault.Kind == ResetAfterApply {
		s.finish(idx, 0)
		resetConn(w)
		return
	}
	for k, v := range bw.header {
		w.Header()[k] = v
	}
	if bw.status == 0 {
		bw.status = http.StatusOK
	}
	w.Header().Set("Content-Length", strconv.Itoa(bw.body.Len()))
	w.WriteHeader(bw.status)
	_, _ = w.Write(bw.body.Bytes())
	s.finish(idx, bw.status)
}

// begin records the request and takes the first matching fault.
func (s *Server) begin(r *http.Request, body []byte) (idx int, f Fault, latency time.Duration, closed bool) {
	auth := r.Header.Get("Authorization")
	scheme, _, _ := strings.Cut(auth, " ")
	rec := Request{
		Time: time.Now(), Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery,
		Header: r.Header.Clone(), Accept: r.Header.Get("Accept"), ContentType: r.Header.Get("Content-Type"),
		HasAuthorization: auth != "", AuthScheme: scheme, Body: body,
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		for i, pf := range s.faults {
			if (pf.Method == "" || strings.EqualFold(pf.Method, r.Method)) && strings.HasSuffix(r.URL.Path, pf.Path) {
				f = *pf
				pf.Count--
				if pf.Count == 0 {
					s.faults = slices.Delete(s.faults, i, i+1)
				}
				break
			}
		}
	}
	rec.Fault = f.Kind
	s.requests = append(s.requests, rec)
	return len(s.requests) - 1, f, s.latency, s.closed
}

// finish records the answered status of request idx.
func (s *Server) finish(idx, status int) {
	s.mu.Lock()
	if idx < len(s.requests) {
		s.requests[idx].Status = status
	}
	s.mu.Unlock()
}

// pause waits d, or less if the client leaves or the server closes.
func (s *Server) pause(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	case <-s.closing:
	}
}

// resetConn closes the client's connection with a TCP reset, answering
// nothing.
func resetConn(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic(http.ErrAbortHandler)
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

// route authenticates and dispatches a request.
func (s *Server) route(w http.ResponseWriter, r *http.Request, body []byte) {
	p := r.URL.Path
	if s.cfg.Auth == AuthOAuth2 && p == s.cfg.OAuth2TokenPath {
		s.serveToken(w, r, body)
		return
	}
	if !strings.HasPrefix(p, "/api/") {
		http.NotFound(w, r)
		return
	}
	principal, msg, challenge := s.authenticate(r)
	if msg != "" {
		s.writeUnauthorized(w, r, msg, challenge)
		return
	}
	var segs []string
	for _, seg := range strings.Split(strings.TrimSuffix(strings.TrimPrefix(r.URL.EscapedPath(), "/api/"), "/"), "/") {
		u, err := url.PathUnescape(seg)
		if err != nil {
			http.NotFound(w, r)
			return
		}
		segs = append(segs, u)
	}
	if len(segs) < 4 || len(segs) > 5 || segs[0] != "metalakes" || segs[2] != "jobs" ||
		(segs[3] != "templates" && segs[3] != "runs") {
		http.NotFound(w, r)
		return
	}
	m, item := segs[1], ""
	if len(segs) == 5 {
		item = segs[4]
	}
	var allowed []string
	switch {
	case segs[3] == "templates" && item == "":
		allowed = []string{http.MethodGet, http.MethodPost}
	case segs[3] == "templates":
		allowed = []string{http.MethodGet, http.MethodDelete}
	default:
		allowed = []string{http.MethodGet, http.MethodPost}
	}
	if !slices.Contains(allowed, r.Method) {
		w.Header().Set("Allow", strings.Join(allowed, ", "))
		http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
		return
	}
	takesBody := r.Method == http.MethodPost && !(segs[3] == "runs" && item != "")
	if s.cfg.EnforceMediaTypes {
		if !acceptsGravitino(r.Header.Values("Accept")) {
			w.WriteHeader(http.StatusNotAcceptable)
			return
		}
		if takesBody && !isJSONType(r.Header.Get("Content-Type")) {
			w.WriteHeader(http.StatusUnsupportedMediaType)
			return
		}
	}
	var status int
	var out any
	switch {
	case segs[3] == "templates" && item == "" && r.Method == http.MethodGet:
		status, out = s.listTemplates(m, strings.EqualFold(r.URL.Query().Get("details"), "true"))
	case segs[3] == "templates" && item == "":
		status, out = s.registerTemplate(m, body, principal)
	case segs[3] == "templates" && r.Method == http.MethodGet:
		status, out = s.getTemplate(m, item)
	case segs[3] == "templates":
		status, out = s.deleteTemplate(m, item)
	case item == "" && r.Method == http.MethodGet:
		q := r.URL.Query()
		var tpl *string
		if q.Has("jobTemplateName") {
			v := q.Get("jobTemplateName")
			tpl = &v
		}
		status, out = s.listJobs(m, tpl)
	case item == "":
		status, out = s.runJob(m, body, principal)
	case r.Method == http.MethodGet:
		status, out = s.getJob(m, item)
	default:
		status, out = s.cancelJob(m, item, principal)
	}
	writeJSON(w, status, out)
}

// writeJSON writes v as an application/json answer, without HTML escaping
// (as Jackson).
func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		http.Error(w, "gravitinotest: encode answer: "+err.Error(), http.StatusInternalServerError)
		return
	}
	if w.Header().Get("Content-Type") == "" {
		w.Header().Set("Content-Type", "application/json")
	}
	w.WriteHeader(status)
	_, _ = w.Write(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
}

// acceptsGravitino reports whether an Accept header admits MediaType (no
// header admits anything).
func acceptsGravitino(values []string) bool {
	if len(values) == 0 {
		return true
	}
	for _, v := range values {
		for _, part := range strings.Split(v, ",") {
			mt, params, _ := strings.Cut(strings.TrimSpace(part), ";")
			mt = strings.ToLower(strings.TrimSpace(mt))
			if zeroQuality(params) {
				continue
			}
			if mt == "*/*" || mt == "application/*" || mt == MediaType {
				return true
			}
		}
	}
	return false
}

// zeroQuality reports a "q=0" among media-type parameters.
func zeroQuality(params string) bool {
	for _, p := range strings.Split(params, ";") {
		k, v, _ := strings.Cut(strings.TrimSpace(p), "=")
		if strings.EqualFold(strings.TrimSpace(k), "q") {
			q, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return err == nil && q == 0
		}
	}
	return false
}

// isJSONType reports whether a Content-Type is JSON (application/json or
// any +json type).
func isJSONType(ct string) bool {
	mt, _, _ := strings.Cut(ct, ";")
	mt = strings.ToLower(strings.TrimSpace(mt))
	return mt == "application/json" || strings.HasSuffix(mt, "+json")
}

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

// ---- errors, in ExceptionHandlers' form ----

// failure is an error answer.
type failure struct {
	status int
	body   ErrorResponse
}

// objectFailure is JobTemplateExceptionHandler's or JobExceptionHandler's
// answer: what is "job template" or "job".
func objectFailure(status, code int, typ, what, op, object, metalake, reason string) failure {
	obj := ""
	if strings.TrimSpace(object) != "" {
		obj = " [" + object + "]"
	}
	return failure{status, ErrorResponse{
		Code: code, Type: typ, Stack: []string{},
		Message: fmt.Sprintf("Failed to operate %s(s)%s operation [%s] under object [%s], reason [%s]", what, obj, op, metalake, reason),
	}}
}

// internalFailure is BaseExceptionHandler's answer to an unexpected error.
func internalFailure(op, object, metalake, reason string) failure {
	obj := ""
	if strings.TrimSpace(object) != "" {
		obj = " [" + object + "]"
	}
	return failure{http.StatusInternalServerError, ErrorResponse{
		Code: CodeInternalError, Type: "RuntimeException", Stack: []string{},
		Message: fmt.Sprintf("Failed to operate object%s operation [%s] under [%s], reason [%s]", obj, op, metalake, reason),
	}}
}

// malformed is the JsonParseException/JsonMappingException mappers' answer.
func malformed() failure {
	return failure{http.StatusBadRequest, ErrorResponse{
		Code: CodeIllegalArguments, Type: "IllegalArgumentException", Message: "Malformed json request", Stack: []string{},
	}}
}

func (f failure) answer() (int, any) { return f.status, f.body }

// noMetalake is NoSuchMetalakeException, as the handler for what reports it.
func noMetalake(what, op, object, m string) (int, any) {
	return objectFailure(http.StatusNotFound, CodeNotFound, "NoSuchMetalakeException", what, op, object, m,
		fmt.Sprintf("Metalake %s does not exist", m)).answer()
}

func noTemplate(what, op, object, m, name string) (int, any) {
	return objectFailure(http.StatusNotFound, CodeNotFound, "NoSuchJobTemplateException", what, op, object, m,
		fmt.Sprintf("Job template with name %s under metalake %s does not exist", name, m)).answer()
}

// ---- templates ----

func (s *Server) listTemplates(m string, details bool) (int, any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ml, ok := s.metalakes[m]
	if !ok {
		return noMetalake("job template", "LIST", "", m)
	}
	if !details {
		names := slices.Clone(ml.order)
		if names == nil {
			names = []string{}
		}
		return http.StatusOK, map[string]any{"code": 0, "names": names}
	}
	tpls := make([]JobTemplate, 0, len(ml.order))
	for _, n := range ml.order {
		tpls = append(tpls, *ml.templates[n])
	}
	return http.StatusOK, map[string]any{"code": 0, "jobTemplates": tpls}
}

func (s *Server) getTemplate(m, name string) (int, any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ml, ok := s.metalakes[m]
	if !ok {
		return noMetalake("job template", "GET", name, m)
	}
	t, ok := ml.templates[name]
	if !ok {
		return noTemplate("job template", "GET", name, m, name)
	}
	return http.StatusOK, map[string]any{"code": 0, "jobTemplate": *t}
}

func (s *Server) registerTemplate(m string, body []byte, principal string) (int, any) {
	t, f := decodeRegister(body)
	if f != nil {
		return f.answer()
	}
	if t == nil {
		return objectFailure(http.StatusBadRequest, CodeIllegalArguments, "IllegalArgumentException",
			"job template", "REGISTER", "", m, `"jobTemplate" must not be null`).answer()
	}
	if reason, err := normalize(t); err != nil {
		return objectFailure(http.StatusBadRequest, CodeIllegalArguments, "IllegalArgumentException",
			"job template", "REGISTER", t.Name, m, reason).answer()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ml, ok := s.metalakes[m]
	if !ok {
		return noMetalake("job template", "REGISTER", t.Name, m)
	}
	if _, dup := ml.templates[t.Name]; dup {
		return objectFailure(http.StatusConflict, CodeAlreadyExists, "JobTemplateAlreadyExistsException",
			"job template", "REGISTER", t.Name, m,
			fmt.Sprintf("Job template with name %s under metalake %s already exists", t.Name, m)).answer()
	}
	s.addTemplateLocked(ml, t, principal)
	return http.StatusOK, map[string]any{"code": 0}
}

func (s *Server) addTemplateLocked(ml *metalake, t *JobTemplate, principal string) {
	t.Audit = &Audit{Creator: principal, CreateTime: formatTime(time.Now())}
	ml.templates[t.Name] = t
	ml.order = append(ml.order, t.Name)
}

func (s *Server) deleteTemplate(m, name string) (int, any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ml, ok := s.metalakes[m]
	if !ok {
		return noMetalake("job template", "DELETE", name, m)
	}
	if _, ok := ml.templates[name]; !ok {
		return http.StatusOK, map[string]any{"code": 0, "dropped": false}
	}
	var mine []*run
	for _, r := range s.runOrder {
		if r.metalake == m && r.template == name && !r.deleted {
			if !r.status.Done() {
				return objectFailure(http.StatusConflict, CodeInUse, "InUseException", "job template", "DELETE", name, m,
					fmt.Sprintf("Job template %s under metalake %s has active jobs associated with it", name, m)).answer()
			}
			mine = append(mine, r)
		}
	}
	for _, r := range mine {
		r.deleted = true
	}
	_ = os.RemoveAll(filepath.Join(s.stagingDir, m, name))
	delete(ml.templates, name)
	ml.order = slices.DeleteFunc(ml.order, func(n string) bool { return n == name })
	return http.StatusOK, map[string]any{"code": 0, "dropped": true}
}

// normalize validates a template as JobTemplateDTO.validate and the
// JobTemplate builders do, and fills absent lists and maps. It returns the
// Gravitino message of a failure too.
func normalize(t *JobTemplate) (string, error) {
	fail := func(msg string) (string, error) { return msg, errors.New(msg) }
	switch t.JobType {
	case "shell", "spark":
	case "":
		return fail(`"jobType" is required and cannot be null`)
	default:
		return fail(fmt.Sprintf("unknown jobType %q", t.JobType))
	}
	if strings.TrimSpace(t.Name) == "" {
		return fail(`"name" is required and cannot be empty`)
	}
	if strings.TrimSpace(t.Executable) == "" {
		return fail(`"executable" is required and cannot be empty`)
	}
	if t.JobType == "spark" && strings.TrimSpace(t.ClassName) == "" {
		return fail(`"className" is required and cannot be empty`)
	}
	t.Arguments = orEmpty(t.Arguments)
	t.Environments = orEmptyMap(t.Environments)
	t.CustomFields = orEmptyMap(t.CustomFields)
	if t.JobType == "shell" {
		t.Scripts = orEmpty(t.Scripts)
		t.ClassName, t.Jars, t.Files, t.Archives, t.Configs = "", nil, nil, nil, nil
	} else {
		t.Scripts = nil
		t.Jars, t.Files, t.Archives = orEmpty(t.Jars), orEmpty(t.Files), orEmpty(t.Archives)
		t.Configs = orEmptyMap(t.Configs)
	}
	return "", nil
}

// ---- jobs ----

func (s *Server) listJobs(m string, tpl *string) (int, any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ml, ok := s.metalakes[m]
	if !ok {
		return noMetalake("job", "LIST", "", m)
	}
	if tpl != nil {
		if *tpl == "" {
			return objectFailure(http.StatusBadRequest, CodeIllegalArguments, "IllegalNameIdentifierException",
				"job", "LIST", "", m, "Cannot create a NameIdentifier with null or empty name").answer()
		}
		if _, ok := ml.templates[*tpl]; !ok {
			return noTemplate("job", "LIST", "", m, *tpl)
		}
	}
	jobs := []Job{}
	for _, r := range s.runOrder {
		if r.metalake == m && !r.deleted && (tpl == nil || r.template == *tpl) {
			jobs = append(jobs, r.dto())
		}
	}
	return http.StatusOK, map[string]any{"code": 0, "jobs": jobs}
}

func (s *Server) getJob(m, id string) (int, any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.metalakes[m]; !ok {
		return noMetalake("job", "GET", id, m)
	}
	r, ok := s.runs[id]
	if !ok || r.metalake != m || r.deleted {
		return noJob("GET", m, id)
	}
	return http.StatusOK, map[string]any{"code": 0, "job": r.dto()}
}

func noJob(op, m, id string) (int, any) {
	return objectFailure(http.StatusNotFound, CodeNotFound, "NoSuchJobException", "job", op, id, m,
		fmt.Sprintf("Job with ID %s under metalake %s does not exist", id, m)).answer()
}

// cancelJob is JobManager.cancelJob: a job not yet done gets the executor's
// cancel and the status cancelling.
func (s *Server) cancelJob(m, id, principal string) (int, any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.metalakes[m]; !ok {
		return noMetalake("job", "CANCEL", id, m)
	}
	r, ok := s.runs[id]
	if !ok || r.metalake != m || r.deleted {
		return noJob("CANCEL", m, id)
	}
	if r.status == StatusCancelling || r.status.Done() {
		return http.StatusOK, map[string]any{"code": 0, "job": r.dto()}
	}
	s.execCancelLocked(r)
	r.status = StatusCancelling
	r.lastModifier, r.lastModifiedTime = principal, time.Now()
	out := map[string]any{"code": 0, "job": r.dto()}
	if s.cfg.StatusPullInterval == 0 {
		s.pullLocked(r)
	}
	s.notifyLocked()
	return http.StatusOK, out
}

// runJob is JobManager.runJob: it stages and renders the template, queues
// the run with the executor and answers the new job, queued.
func (s *Server) runJob(m string, body []byte, principal string) (int, any) {
	name, conf, f := decodeRun(body)
	if f != nil {
		return f.answer()
	}
	if strings.TrimSpace(name) == "" {
		return objectFailure(http.StatusBadRequest, CodeIllegalArguments, "IllegalArgumentException", "job", "RUN", "", m,
			`"jobTemplateName" is required and cannot be empty`).answer()
	}
	s.mu.Lock()
	ml, ok := s.metalakes[m]
	if !ok {
		s.mu.Unlock()
		return noMetalake("job", "RUN", "", m)
	}
	tp, ok := ml.templates[name]
	if !ok {
		s.mu.Unlock()
		return noTemplate("job", "RUN", "", m, name)
	}
	t := *tp
	id := s.newIDLocked()
	s.mu.Unlock()

	if s.cfg.StrictPlaceholders {
		if missing := missingPlaceholders(&t, conf); len(missing) > 0 {
			return objectFailure(http.StatusBadRequest, CodeIllegalArguments, "IllegalArgumentException", "job", "RUN", "", m,
				fmt.Sprintf("jobConf has no value for placeholder(s) %s of job template %s", strings.Join(missing, ", "), name)).answer()
		}
	}
	dir := filepath.Join(s.stagingDir, m, name, id)
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil || os.Mkdir(dir, 0o755) != nil {
		return internalFailure("RUN", "", m, fmt.Sprintf("Failed to create staging directory %s for job %s", dir, strings.TrimPrefix(id, "job-"))).answer()
	}
	exe, err := fetchFile(t.Executable, dir)
	if err != nil {
		return internalFailure("RUN", "", m, err.Error()).answer()
	}
	args := make([]string, len(t.Arguments))
	for i, a := range t.Arguments {
		if args[i], err = replacePlaceholders(a, conf); err != nil {
			return javaFailure(m, err)
		}
	}
	env, err := renderMap(t.Environments, conf)
	if err != nil {
		return javaFailure(m, err)
	}
	custom, err := renderMap(t.CustomFields, conf)
	if err != nil {
		return javaFailure(m, err)
	}
	if t.JobType == "shell" {
		for _, sc := range t.Scripts {
			if _, err := fetchFile(sc, dir); err != nil {
				return internalFailure("RUN", "", m, err.Error()).answer()
			}
		}
	}

	now := time.Now()
	r := &run{
		id: id, metalake: m, template: name, jobType: t.JobType, conf: conf, executable: t.Executable,
		status: StatusQueued, creator: principal, createTime: now, execStatus: StatusQueued,
		argv: append([]string{exe}, args...), env: env, custom: custom, dir: dir,
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return internalFailure("RUN", "", m, "Failed to submit job template "+name+" for execution: the server is closing").answer()
	}
	s.runs[id] = r
	s.runOrder = append(s.runOrder, r)
	out := map[string]any{"code": 0, "job": r.dto()}
	s.queue = append(s.queue, r)
	s.dispatchLocked()
	s.notifyLocked()
	return http.StatusOK, out
}

// javaFailure answers an exception of the placeholder replacement as
// JobExceptionHandler does.
func javaFailure(m string, err error) (int, any) {
	var je *javaException
	if errors.As(err, &je) && je.class == "IllegalArgumentException" {
		return objectFailure(http.StatusBadRequest, CodeIllegalArguments, je.class, "job", "RUN", "", m, je.msg).answer()
	}
	return internalFailure("RUN", "", m, err.Error()).answer()
}

// newIDLocked is a fresh job id: "job-" and a random positive 63-bit
// number, as Gravitino's RandomIdGenerator.
func (s *Server) newIDLocked() string {
	for {
		n := mathrand.Int64()
		id := "job-" + strconv.FormatInt(n, 10)
		if _, dup := s.runs[id]; n != 0 && !dup {
			return id
		}
	}
}

// ---- executor ----

// dispatchLocked starts queued runs while fewer than MaxRunning run.
func (s *Server) dispatchLocked() {
	for !s.closed && s.running < s.cfg.MaxRunning && len(s.queue) > 0 {
		r := s.queue[0]
		s.queue = s.queue[1:]
		if r.execStatus != StatusQueued {
			continue
		}
		s.startLocked(r)
		if s.cfg.StatusPullInterval == 0 {
			s.pullLocked(r)
		}
	}
}

// startLocked starts r's process, or fails r.
func (s *Server) startLocked(r *run) {
	fail := func(msg string) {
		r.execStatus, r.startErr, r.endTime = StatusFailed, msg, time.Now()
	}
	if r.jobType != "shell" {
		fail("Unsupported job template type: " + strings.ToUpper(r.jobType))
		return
	}
	exe := r.argv[0]
	if fi, err := os.Stat(exe); err == nil && fi.Mode()&0o100 == 0 {
		_ = os.Chmod(exe, fi.Mode()|0o100) // File.setExecutable(true)
	}
	stdout, err := os.Create(filepath.Join(r.dir, "output.log"))
	if err != nil {
		fail(fmt.Sprintf("Failed to start shell process: %v", err))
		return
	}
	defer stdout.Close()
	stderr, err := os.Create(filepath.Join(r.dir, "error.log"))
	if err != nil {
		fail(fmt.Sprintf("Failed to start shell process: %v", err))
		return
	}
	defer stderr.Close()
	env := mergeEnv(s.baseEnv, r.env)
	start := func(argv []string) (*exec.Cmd, error) {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = r.dir, env, stdout, stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		return cmd, cmd.Start()
	}
	cmd, err := start(r.argv)
	if errors.Is(err, syscall.ENOEXEC) {
		// Java's process launcher runs a file execve refuses with /bin/sh.
		argv := append([]string{"/bin/sh"}, r.argv...)
		if cmd, err = start(argv); err == nil {
			r.argv = argv
		}
	}
	if err != nil {
		fail(fmt.Sprintf("Failed to start shell process: %v", err))
		return
	}
	r.pid, r.started, r.startTime, r.execStatus = cmd.Process.Pid, true, time.Now(), StatusStarted
	s.running++
	s.procs.Add(1)
	go s.wait(r, cmd)
}

// wait reaps r's process and settles its status as LocalJobExecutor.runJob.
func (s *Server) wait(r *run, cmd *exec.Cmd) {
	defer s.procs.Done()
	err := cmd.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.running--
	r.exited, r.endTime = true, time.Now()
	if r.killTimer != nil {
		r.killTimer.Stop()
	}
	code := 0
	if ps := cmd.ProcessState; ps != nil {
		code = ps.ExitCode()
		if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			code = 128 + int(ws.Signal())
			r.signal = ws.Signal().String()
		}
	} else if err != nil {
		code = 1
	}
	r.exitCode = code
	switch {
	case code == 0:
		r.execStatus = StatusSucceeded
	case r.execStatus == StatusCancelling:
		r.execStatus = StatusCancelled
	case r.execStatus == StatusStarted:
		r.execStatus = StatusFailed
	}
	if r.cancelRequested || s.closed {
		_ = syscall.Kill(-r.pid, syscall.SIGKILL) // leave no stray children
	}
	if s.cfg.StatusPullInterval == 0 {
		s.pullLocked(r)
	}
	s.dispatchLocked()
	s.notifyLocked()
}

// execCancelLocked is LocalJobExecutor.cancelJob: a queued run is dropped
// (cancelled), a started one gets SIGTERM on its process group, SIGKILL
// after the grace, and is cancelling until it exits.
func (s *Server) execCancelLocked(r *run) {
	switch r.execStatus {
	case StatusQueued:
		r.cancelRequested = true
		s.queue = slices.DeleteFunc(s.queue, func(q *run) bool { return q == r })
		r.execStatus, r.endTime = StatusCancelled, time.Now()
	case StatusStarted:
		r.cancelRequested = true
		r.execStatus = StatusCancelling
		_ = syscall.Kill(-r.pid, syscall.SIGTERM)
		r.killTimer = time.AfterFunc(s.cfg.CancelGrace, func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if !r.exited {
				_ = syscall.Kill(-r.pid, syscall.SIGKILL)
			}
		})
	}
}

// pullLocked copies the executor's status of an active job into the API's,
// as JobManager.pullAndUpdateJobStatus.
func (s *Server) pullLocked(r *run) {
	if !r.status.active() || r.status == r.execStatus {
		return
	}
	r.status = r.execStatus
	r.lastModifier, r.lastModifiedTime = anonymous, time.Now()
}

func (s *Server) pullLoop() {
	defer s.loops.Done()
	t := time.NewTicker(s.cfg.StatusPullInterval)
	defer t.Stop()
	for {
		select {
		case <-s.closing:
			return
		case <-t.C:
			s.PullStatuses()
		}
	}
}

// notifyLocked wakes WaitForStatus.
func (s *Server) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// mergeEnv is base with add set over it (add's keys sorted at the end).
func mergeEnv(base []string, add map[string]string) []string {
	out := make([]string, 0, len(base)+len(add))
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if _, over := add[k]; !over {
			out = append(out, kv)
		}
	}
	keys := make([]string, 0, len(add))
	for k := range add {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		out = append(out, k+"="+add[k])
	}
	return out
}

// fetchFile brings a template file into the job folder as
// JobManager.fetchFileFromUri: a local path or file: URI is symlinked,
// http(s) is downloaded. It returns the staged path.
func fetchFile(uri, dir string) (string, error) {
	fail := func() (string, error) { return "", fmt.Errorf("Failed to fetch file from URI %s", uri) }
	if !isJavaURI(uri) {
		return fail()
	}
	u, err := url.Parse(uri)
	if err != nil {
		return fail()
	}
	dest := filepath.Join(dir, path.Base(u.Path))
	switch u.Scheme {
	case "", "file":
		if err := os.Symlink(u.Path, dest); err != nil {
			return fail()
		}
	case "http", "https":
		c := &http.Client{Timeout: 30 * time.Second}
		resp, err := c.Get(uri)
		if err != nil {
			return fail()
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fail()
		}
		f, err := os.OpenFile(dest, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err != nil {
			return fail()
		}
		_, err = io.Copy(f, resp.Body)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fail()
		}
	default:
		return fail()
	}
	return dest, nil
}

// isJavaURI reports whether java.net.URI would parse s: no spaces, no
// characters it forbids, and "%" only before two hex digits.
func isJavaURI(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c <= ' ' || c == 0x7f || strings.IndexByte("\"<>\\^`{|}[]", c) >= 0:
			return false
		case c == '%':
			if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
				return false
			}
		}
	}
	return s != ""
}

func isHex(c byte) bool {
	return ('0' <= c && c <= '9') || ('a' <= c && c <= 'f') || ('A' <= c && c <= 'F')
}

// ---- placeholders ----

// placeholder is JobManager.PLACEHOLDER_PATTERN.
var placeholder = regexp.MustCompile(`\{\{([\w.-]+)\}\}`)

// javaException is an exception the Java code would throw.
type javaException struct{ class, msg string }

func (e *javaException) Error() string { return e.msg }

// replacePlaceholders is JobManager.replacePlaceholder: each {{key}} with a
// value in conf becomes the value, inserted by Matcher.appendReplacement;
// the others stay.
func replacePlaceholders(in string, conf map[string]string) (string, error) {
	if strings.TrimSpace(in) == "" {
		return in, nil
	}
	var b strings.Builder
	last := 0
	for _, m := range placeholder.FindAllStringSubmatchIndex(in, -1) {
		b.WriteString(in[last:m[0]])
		whole, key := in[m[0]:m[1]], in[m[2]:m[3]]
		if v, ok := conf[key]; ok {
			if err := appendReplacement(&b, v, whole, key); err != nil {
				return "", err
			}
		} else {
			b.WriteString(whole)
		}
		last = m[1]
	}
	b.WriteString(in[last:])
	return b.String(), nil
}

// appendReplacement expands repl as java.util.regex.Matcher does for a
// pattern with one group: \c is c, $0 the match, $1 the key.
func appendReplacement(b *strings.Builder, repl, group0, group1 string) error {
	illegal := func(msg string) error { return &javaException{"IllegalArgumentException", msg} }
	groups := []string{group0, group1}
	var out strings.Builder
	for i := 0; i < len(repl); {
		c := repl[i]
		switch c {
		case '\\':
			i++
			if i == len(repl) {
				return illegal("character to be escaped is missing")
			}
			out.WriteByte(repl[i])
			i++
		case '$':
			i++
			if i == len(repl) {
				return illegal("Illegal group reference: group index is missing")
			}
			if repl[i] == '{' {
				i++
				start := i
				for i < len(repl) && isASCIIAlnum(repl[i]) {
					i++
				}
				name := repl[start:i]
				switch {
				case name == "":
					return illegal("named capturing group has 0 length name")
				case i == len(repl) || repl[i] != '}':
					return illegal("named capturing group is missing trailing '}'")
				case '0' <= name[0] && name[0] <= '9':
					return illegal("capturing group name {" + name + "} starts with digit character")
				}
				return illegal("No group with name {" + name + "}")
			}
			ref := int(repl[i]) - '0'
			if ref < 0 || ref > 9 {
				return illegal("Illegal group reference")
			}
			i++
			for i < len(repl) {
				d := int(repl[i]) - '0'
				if d < 0 || d > 9 || ref*10+d > len(groups)-1 {
					break
				}
				ref = ref*10 + d
				i++
			}
			if ref >= len(groups) {
				return &javaException{"IndexOutOfBoundsException", "No group " + strconv.Itoa(ref)}
			}
			out.WriteString(groups[ref])
		default:
			out.WriteByte(c)
			i++
		}
	}
	b.WriteString(out.String())
	return nil
}

func isASCIIAlnum(c byte) bool {
	return ('0' <= c && c <= '9') || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z')
}

// renderMap replaces placeholders in a map's keys and values; two keys that
// render alike are Collectors.toMap's IllegalStateException.
func renderMap(in, conf map[string]string) (map[string]string, error) {
	out := make(map[string]string, len(in))
	for k, v := range in {
		rk, err := replacePlaceholders(k, conf)
		if err != nil {
			return nil, err
		}
		rv, err := replacePlaceholders(v, conf)
		if err != nil {
			return nil, err
		}
		if _, dup := out[rk]; dup {
			return nil, &javaException{"IllegalStateException", "Duplicate key " + rk}
		}
		out[rk] = rv
	}
	return out, nil
}

// missingPlaceholders lists the {{key}}s of the rendered fields with no
// value in conf, sorted.
func missingPlaceholders(t *JobTemplate, conf map[string]string) []string {
	seen := map[string]bool{}
	scan := func(s string) {
		for _, m := range placeholder.FindAllStringSubmatch(s, -1) {
			if _, ok := conf[m[1]]; !ok {
				seen["{{"+m[1]+"}}"] = true
			}
		}
	}
	for _, a := range t.Arguments {
		scan(a)
	}
	for _, mp := range []map[string]string{t.Environments, t.CustomFields} {
		for k, v := range mp {
			scan(k)
			scan(v)
		}
	}
	out := make([]string, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// ---- request decoding, as Jackson with Gravitino's mapper ----

// decodeObject reads the first JSON value of body as an object (trailing
// data ignored, as Jackson); a null or absent value is a nil map.
func decodeObject(body []byte, known ...string) (map[string]json.RawMessage, bool) {
	dec := json.NewDecoder(bytes.NewReader(body))
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return nil, false
	}
	return objectFields(raw, known...)
}

// objectFields splits a JSON object, refusing keys outside known.
func objectFields(raw json.RawMessage, known ...string) (map[string]json.RawMessage, bool) {
	if isNull(raw) {
		return nil, true
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return nil, false
	}
	for k := range fields {
		if !slices.Contains(known, k) {
			return nil, false
		}
	}
	return fields, true
}

func isNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

// jsonString reads a string as Jackson's StringDeserializer: numbers and
// booleans give their text; null is ok=true, null=true.
func jsonString(raw json.RawMessage) (s string, null, ok bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || isNull(raw) {
		return "", true, true
	}
	switch raw[0] {
	case '"':
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", false, false
		}
		return s, false, true
	case '{', '[':
		return "", false, false
	}
	return string(raw), false, true
}

func jsonStrings(raw json.RawMessage) ([]string, bool) {
	if raw == nil || isNull(raw) {
		return nil, true
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, false
	}
	out := make([]string, 0, len(items))
	for _, it := range items {
		s, null, ok := jsonString(it)
		if !ok || null {
			return nil, false
		}
		out = append(out, s)
	}
	return out, true
}

// jsonStringMap reads a string map; dropNull leaves null values out
// instead of refusing them.
func jsonStringMap(raw json.RawMessage, dropNull bool) (map[string]string, bool) {
	if raw == nil || isNull(raw) {
		return nil, true
	}
	var items map[string]json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, false
	}
	out := make(map[string]string, len(items))
	for k, it := range items {
		s, null, ok := jsonString(it)
		if !ok || (null && !dropNull) {
			return nil, false
		}
		if !null {
			out[k] = s
		}
	}
	return out, true
}

// decodeRun reads a JobRunRequest.
func decodeRun(body []byte) (string, map[string]string, *failure) {
	mal := malformed()
	fields, ok := decodeObject(body, "jobTemplateName", "jobConf")
	if !ok || fields == nil {
		return "", nil, &mal
	}
	name, _, ok := jsonString(fields["jobTemplateName"])
	if !ok {
		return "", nil, &mal
	}
	conf, ok := jsonStringMap(fields["jobConf"], true)
	if !ok {
		return "", nil, &mal
	}
	if conf == nil {
		conf = map[string]string{}
	}
	return name, conf, nil
}

// decodeRegister reads a JobTemplateRegisterRequest; a null or absent
// jobTemplate is a nil template.
func decodeRegister(body []byte) (*JobTemplate, *failure) {
	mal := malformed()
	fields, ok := decodeObject(body, "jobTemplate")
	if !ok || fields == nil {
		return nil, &mal
	}
	raw := fields["jobTemplate"]
	if raw == nil || isNull(raw) {
		return nil, nil
	}
	var head map[string]json.RawMessage
	if json.Unmarshal(raw, &head) != nil {
		return nil, &mal
	}
	jobType, null, ok := jsonString(head["jobType"])
	if !ok || null || (jobType != "shell" && jobType != "spark") {
		return nil, &mal // Jackson: missing or unknown type id
	}
	known := []string{"jobType", "name", "comment", "executable", "arguments", "environments", "customFields", "audit"}
	if jobType == "shell" {
		known = append(known, "scripts")
	} else {
		known = append(known, "className", "jars", "files", "archives", "configs")
	}
	f, ok := objectFields(raw, known...)
	if !ok {
		return nil, &mal
	}
	t := &JobTemplate{JobType: jobType}
	good := true
	str := func(k string) string {
		s, _, ok := jsonString(f[k])
		good = good && ok
		return s
	}
	list := func(k string) []string {
		l, ok := jsonStrings(f[k])
		good = good && ok
		return l
	}
	dict := func(k string) map[string]string {
		m, ok := jsonStringMap(f[k], false)
		good = good && ok
		return m
	}
	t.Name, t.Executable = str("name"), str("executable")
	if c, null, ok := jsonString(f["comment"]); !ok {
		good = false
	} else if !null {
		t.Comment = &c
	}
	t.Arguments, t.Environments, t.CustomFields = list("arguments"), dict("environments"), dict("customFields")
	if jobType == "shell" {
		t.Scripts = list("scripts")
	} else {
		t.ClassName, t.Jars, t.Files, t.Archives, t.Configs = str("className"), list("jars"), list("files"), list("archives"), dict("configs")
	}
	if a, ok := f["audit"]; ok {
		if _, ok := objectFields(a, "creator", "createTime", "lastModifier", "lastModifiedTime"); !ok {
			good = false
		}
	}
	if !good {
		return nil, &mal
	}
	return t, nil
}

// ---- small helpers ----

// formatTime is an RFC 3339 UTC time with milliseconds.
func formatTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func orEmptyMap(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

func cloneMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
