package gravitinotest

import (
	"errors"
	"fmt"
	"io"
	mathrand "math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

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
