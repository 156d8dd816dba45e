package submit

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/tms-dev/tms/jobspec"
	"github.com/tms-dev/tms/policy"
)

// LocalSubmitter is the embedded default Submitter: it runs
// `tms-runner run --db URL --job-id N --fence F` as a child process of the
// coordinator, at most LocalConfig.MaxRunning at once, each in a process
// group of its own, with its output in a per-job log file.
//
// Decisions worth knowing:
//
//   - Credentials travel only in the child's environment, as
//     TMS_CATALOG_PROP_<KEY>=VALUE; argv (visible to every local user in ps
//     and /proc) never holds one. A ledger URL that carries a password goes
//     through TMS_DB instead of --db for the same reason.
//   - External ids are local-<ledger job id>-<n>-<instance>: n counts this
//     submitter's submissions and instance is random per submitter, so an id
//     issued before a coordinator restart never names a job launched after
//     it. Status of an id this submitter did not issue is JobUnknown.
//   - Submitting the same (job id, fence) again while the first submission
//     is queued or running returns the first id instead of a second runner
//     (which tms-runner would refuse anyway: a job starts once per fence).
//   - The exit code decides the state: 0 succeeded, 4 failed with Fenced,
//     anything else failed, except that a runner which exits non-zero after
//     Cancel or Close is cancelled. The message carries the runner's last
//     output line (its one-line error).
//   - On Linux the child gets SIGTERM if the coordinator dies (Pdeathsig),
//     so a crashed or watchdog-stopped coordinator leaves no runner running
//     outside the concurrency limit; the runner closes its row cancelled.
//     (Pdeathsig follows the OS thread that forked; Go ends threads only
//     when a goroutine exits while locked to one, which the coordinator
//     never does.)
type LocalSubmitter struct {
	cfg      LocalConfig
	log      *zap.Logger
	instance string

	mu       sync.Mutex
	seq      int64
	jobs     map[string]*localJob // every job Status still reports
	active   map[jobKey]*localJob // queued and running jobs by (job id, fence)
	queue    []*localJob          // FIFO of queued jobs
	running  int
	finished []string // ended job ids, oldest first, for KeepFinished
	closed   bool
	wg       sync.WaitGroup // one per started process, done when reaped
}

type jobKey struct{ jobID, fence int64 }

// localJob is one submission. Fields are guarded by LocalSubmitter.mu.
type localJob struct {
	id   string
	key  jobKey
	argv []string
	env  []string // holds the credentials; dropped once the child has them

	state     JobState
	exitCode  int
	fenced    bool
	msg       string
	pid       int
	proc      *os.Process
	submitted time.Time
	started   time.Time
	ended     time.Time

	stopReason string      // set by Cancel or Close: the job is being stopped
	killed     bool        // SIGKILL was sent after KillGrace
	killTimer  *time.Timer // SIGKILL after KillGrace
	done       chan struct{}
}

// NewLocalSubmitter validates cfg once, resolves the runner binary and
// creates the log folder.
func NewLocalSubmitter(cfg LocalConfig) (*LocalSubmitter, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &LocalSubmitter{
		cfg: cfg, log: cfg.Log.With(zap.String("submitter", "local")),
		instance: strings.ToLower(rand.Text()[:8]),
		jobs:     map[string]*localJob{}, active: map[jobKey]*localJob{},
	}, nil
}

// RunnerPath returns the runner binary the submitter starts.
func (s *LocalSubmitter) RunnerPath() string { return s.cfg.RunnerPath }

// LogPath returns the log file of ledger job jobID.
func (s *LocalSubmitter) LogPath(jobID int64) string {
	return filepath.Join(s.cfg.LogDir, fmt.Sprintf("job-%d.log", jobID))
}

// Submit queues the runner for req and starts it at once if a slot is free.
// It never waits for the job. Catalog property keys must be non-empty and
// free of '=' and NUL (they become environment variable names).
func (s *LocalSubmitter) Submit(ctx context.Context, req JobRequest) (string, error) {
	if err := req.validate(); err != nil {
		return "", err
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	argv, env, err := s.command(req)
	if err != nil {
		return "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return "", ErrSubmitterClosed
	}
	key := jobKey{req.JobID, req.Fence}
	if j := s.active[key]; j != nil {
		s.log.Info("job already submitted; returning its id", zap.Int64("job", req.JobID), zap.String("external_id", j.id))
		return j.id, nil
	}
	s.seq++
	j := &localJob{
		id: fmt.Sprintf("local-%d-%d-%s", req.JobID, s.seq, s.instance), key: key, argv: argv, env: env,
		state: JobQueued, exitCode: -1, submitted: time.Now(), done: make(chan struct{}),
	}
	s.jobs[j.id] = j
	s.active[key] = j
	s.queue = append(s.queue, j)
	s.log.Info("job submitted", zap.Int64("job", req.JobID), zap.Int64("fence", req.Fence),
		zap.String("table", req.Table), zap.String("external_id", j.id), zap.Int("queued", len(s.queue)))
	s.dispatchLocked()
	return j.id, nil
}

// command returns the runner's argv and environment for req.
func (s *LocalSubmitter) command(req JobRequest) (argv, env []string, err error) {
	argv = []string{s.cfg.RunnerPath, "run"}
	dbInEnv := urlHasSecret(req.DBURL)
	if !dbInEnv {
		argv = append(argv, "--db", req.DBURL)
	}
	argv = append(argv, "--job-id", fmt.Sprint(req.JobID), "--fence", fmt.Sprint(req.Fence))

	base := s.cfg.Env
	if base == nil {
		base = os.Environ()
	}
	env = make([]string, 0, len(base)+len(req.CatalogProps)+2)
	hasLevel := false
	for _, kv := range base {
		name, _, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(name, jobspec.EnvPropPrefix), name == "TMS_DB":
			continue
		case name == "TMS_LOG_LEVEL":
			hasLevel = true
		}
		env = append(env, kv)
	}
	if !hasLevel {
		env = append(env, "TMS_LOG_LEVEL=info")
	}
	if dbInEnv {
		env = append(env, "TMS_DB="+req.DBURL)
	}
	keys := make([]string, 0, len(req.CatalogProps))
	for k := range req.CatalogProps {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		v := req.CatalogProps[k]
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(v, 0) {
			return nil, nil, fmt.Errorf("%w: CatalogProps key %q cannot be passed as an environment variable", ErrInvalidJobRequest, k)
		}
		env = append(env, jobspec.EnvPropPrefix+k+"="+v)
	}
	return argv, env, nil
}

// urlHasSecret reports whether a ledger URL carries a password in its user
// info or a credential-shaped query parameter (password, sslpassword …; see
// policy.IsCredentialKey). A URL or query that cannot be parsed counts as
// secret.
func urlHasSecret(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil {
		return true
	}
	if _, ok := u.User.Password(); ok {
		return true
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return true
	}
	for k := range q {
		if policy.IsCredentialKey(k) {
			return true
		}
	}
	return false
}

// dispatchLocked starts queued jobs while slots are free.
func (s *LocalSubmitter) dispatchLocked() {
	for !s.closed && s.running < s.cfg.MaxRunning && len(s.queue) > 0 {
		j := s.queue[0]
		s.queue[0] = nil
		s.queue = s.queue[1:]
		s.startLocked(j)
	}
}

// startLocked starts j's runner, or ends j failed if it cannot start. The
// fork happens under the lock; it takes milliseconds, not the job's time.
func (s *LocalSubmitter) startLocked(j *localJob) {
	logPath := s.LogPath(j.key.jobID)
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		s.endLocked(j, JobFailed, -1, false, fmt.Sprintf("could not start the runner: open job log: %v", err))
		return
	}
	now := time.Now()
	fmt.Fprintf(logf, "--- %s %s: starting %s\n", now.UTC().Format(time.RFC3339Nano), j.id, strings.Join(j.argv, " "))
	// Where this launch's output begins, so its status quotes this launch
	// and not an earlier one of the same job.
	outputStart, err := logf.Seek(0, io.SeekEnd)
	if err != nil {
		outputStart = 0
	}
	cmd := &exec.Cmd{
		Path: j.argv[0], Args: j.argv, Env: j.env,
		Stdout: logf, Stderr: logf, SysProcAttr: sysProcAttr(),
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(logf, "--- %s %s: could not start: %v\n", time.Now().UTC().Format(time.RFC3339Nano), j.id, err)
		_ = logf.Close()
		s.endLocked(j, JobFailed, -1, false, fmt.Sprintf("could not start the runner: %v", err))
		return
	}
	j.env = nil
	j.state, j.started, j.proc, j.pid = JobRunning, now, cmd.Process, cmd.Process.Pid
	s.running++
	s.log.Info("runner started", zap.String("external_id", j.id), zap.Int("pid", j.pid), zap.String("log", logPath))
	s.wg.Add(1)
	go s.reap(j, cmd, logf, logPath, outputStart)
}

// reap waits for j's runner to exit and records how it ended.
func (s *LocalSubmitter) reap(j *localJob, cmd *exec.Cmd, logf *os.File, logPath string, outputStart int64) {
	defer s.wg.Done()
	waitErr := cmd.Wait()
	last := lastLine(logPath, outputStart)
	ps := cmd.ProcessState

	s.mu.Lock()
	defer s.mu.Unlock()
	state, code, fenced, msg := classifyExit(ps, waitErr, j.stopReason, j.killed, s.cfg.KillGrace, last)
	fmt.Fprintf(logf, "--- %s %s: %s (%s)\n", time.Now().UTC().Format(time.RFC3339Nano), j.id, state, exitText(ps, waitErr))
	_ = logf.Close()
	s.running--
	s.endLocked(j, state, code, fenced, msg)
	s.dispatchLocked()
}

// classifyExit maps how the runner ended to a state, exit code, fenced flag
// and message.
func classifyExit(ps *os.ProcessState, waitErr error, stopReason string, killed bool, grace time.Duration, last string) (JobState, int, bool, string) {
	if ps == nil {
		return JobFailed, -1, false, withLast(fmt.Sprintf("waiting for the runner failed: %v", waitErr), last)
	}
	code := ps.ExitCode()
	switch {
	case code == 0:
		return JobSucceeded, 0, false, ""
	case code == 4:
		return JobFailed, code, true, withLast("runner was fenced out (exit 4): the row's fence moved on or the row was already finished; the row says what was decided", last)
	case stopReason != "" && killed:
		return JobCancelled, code, false, fmt.Sprintf("%s: the runner did not stop within %s of SIGTERM and was killed", stopReason, grace)
	case stopReason != "":
		return JobCancelled, code, false, withLast(fmt.Sprintf("%s: the runner stopped on SIGTERM (%s)", stopReason, ps), last)
	case code == 2:
		return JobFailed, code, false, withLast("runner refused its arguments or job (exit 2)", last)
	case code < 0:
		return JobFailed, code, false, withLast(fmt.Sprintf("runner died: %s", ps), last)
	}
	return JobFailed, code, false, withLast(fmt.Sprintf("runner failed (exit %d)", code), last)
}

func exitText(ps *os.ProcessState, waitErr error) string {
	if ps == nil {
		return waitErr.Error()
	}
	return ps.String()
}

func withLast(msg, last string) string {
	if last == "" {
		return msg
	}
	return msg + ": " + last
}

// lastLineMax bounds the runner output quoted in a status message.
const lastLineMax = 512

// lastLine returns the last non-empty line the runner wrote to the log at
// or after offset from, shortened to lastLineMax bytes.
func lastLine(path string, from int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	const tail = 8 << 10
	fi, err := f.Stat()
	if err != nil {
		return ""
	}
	if _, err := f.Seek(max(from, fi.Size()-tail), io.SeekStart); err != nil {
		return ""
	}
	buf, err := io.ReadAll(io.LimitReader(f, tail))
	if err != nil {
		return ""
	}
	lines := bytes.Split(buf, []byte("\n"))
	for i := len(lines) - 1; i >= 0; i-- {
		l := strings.TrimSpace(string(lines[i]))
		if l == "" {
			continue
		}
		if len(l) > lastLineMax {
			l = strings.ToValidUTF8(l[:lastLineMax], "") + "…"
		}
		return l
	}
	return ""
}

// endLocked records that j ended and forgets the oldest ended jobs beyond
// KeepFinished.
func (s *LocalSubmitter) endLocked(j *localJob, state JobState, code int, fenced bool, msg string) {
	j.state, j.exitCode, j.fenced, j.msg = state, code, fenced, msg
	j.ended, j.env, j.proc, j.pid = time.Now(), nil, nil, 0
	if j.killTimer != nil {
		j.killTimer.Stop()
	}
	delete(s.active, j.key)
	close(j.done)
	s.finished = append(s.finished, j.id)
	for len(s.finished) > s.cfg.KeepFinished {
		delete(s.jobs, s.finished[0])
		s.finished[0] = ""
		s.finished = s.finished[1:]
	}
	fields := []zap.Field{zap.String("external_id", j.id), zap.String("state", string(state)), zap.Int("exit_code", code)}
	if msg != "" {
		fields = append(fields, zap.String("message", msg))
	}
	if state == JobSucceeded {
		s.log.Info("job ended", fields...)
	} else {
		s.log.Warn("job ended", fields...)
	}
}

// Status reports the job's state from this submitter's record of it.
func (s *LocalSubmitter) Status(ctx context.Context, externalJobID string) (JobStatus, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	j, ok := s.jobs[externalJobID]
	if !ok {
		return JobStatus{State: JobUnknown, ExitCode: -1,
			Message: "not started by this coordinator process (started by another node or before a restart, or forgotten)"}, nil
	}
	return JobStatus{
		State: j.state, ExitCode: j.exitCode, Fenced: j.fenced, Message: j.msg, PID: j.pid,
		SubmittedAt: j.submitted, StartedAt: j.started, FinishedAt: j.ended,
	}, nil
}

// Cancel stops the job: a queued job is dropped, a running runner gets
// SIGTERM on its process group (SIGKILL after KillGrace). It waits until the
// job has ended or ctx is done; the stop goes on either way.
func (s *LocalSubmitter) Cancel(ctx context.Context, externalJobID string) error {
	s.mu.Lock()
	j, ok := s.jobs[externalJobID]
	if !ok {
		s.mu.Unlock()
		return fmt.Errorf("%w: %s", ErrUnknownJob, externalJobID)
	}
	switch j.state {
	case JobQueued:
		s.dropQueuedLocked(j, "cancelled before it started")
	case JobRunning:
		s.stopLocked(j, "cancelled")
	}
	done := j.done
	s.mu.Unlock()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// dropQueuedLocked removes a queued job from the queue and ends it cancelled.
func (s *LocalSubmitter) dropQueuedLocked(j *localJob, msg string) {
	if i := slices.Index(s.queue, j); i >= 0 {
		s.queue = slices.Delete(s.queue, i, i+1)
	}
	s.endLocked(j, JobCancelled, -1, false, msg)
}

// stopLocked sends SIGTERM to a running job's process group and arms the
// SIGKILL. A job already being stopped keeps its first reason and timer.
func (s *LocalSubmitter) stopLocked(j *localJob, reason string) {
	if j.stopReason != "" || j.proc == nil {
		return
	}
	j.stopReason = reason
	s.log.Info("stopping runner", zap.String("external_id", j.id), zap.Int("pid", j.pid), zap.String("reason", reason))
	if err := signalGroup(j.proc, syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		s.log.Warn("SIGTERM to the runner failed", zap.String("external_id", j.id), zap.Error(err))
	}
	proc := j.proc
	j.killTimer = time.AfterFunc(s.cfg.KillGrace, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if j.state != JobRunning {
			return
		}
		j.killed = true
		s.log.Warn("runner ignored SIGTERM; killing it", zap.String("external_id", j.id), zap.Duration("grace", s.cfg.KillGrace))
		if err := signalGroup(proc, syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
			s.log.Warn("SIGKILL to the runner failed", zap.String("external_id", j.id), zap.Error(err))
		}
	})
}

// Close stops accepting jobs and drops the queued ones (they end
// cancelled), then waits for the running runners until ctx is done. Runners
// still running then are stopped like Cancel does (SIGTERM, SIGKILL after
// KillGrace) and waited for; Close then returns an error wrapping ctx's.
// It is safe to call more than once.
func (s *LocalSubmitter) Close(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	for len(s.queue) > 0 {
		s.dropQueuedLocked(s.queue[0], "the coordinator shut down before the job started")
	}
	s.mu.Unlock()

	reaped := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(reaped)
	}()
	select {
	case <-reaped:
		return nil
	case <-ctx.Done():
	}
	s.mu.Lock()
	stopped := 0
	for _, j := range s.jobs {
		if j.state == JobRunning {
			s.stopLocked(j, "the coordinator shut down")
			stopped++
		}
	}
	s.mu.Unlock()
	<-reaped
	return fmt.Errorf("local submitter: stopped %d running job(s) at shutdown: %w", stopped, ctx.Err())
}
