package submit

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/tms-dev/tms/jobspec"
)

// CommandConfig configures a CommandSubmitter: the argv templates that
// submit a job, ask its state and cancel it on whatever runs jobs
// (spark-submit --deploy-mode cluster, kubectl, systemd-run, a site's own
// script). Each template is a program and its arguments with
// {{placeholder}}s (see the Placeholder constants); it is executed directly,
// never through a shell.
type CommandConfig struct {
	// Submit starts the job and prints its external id on stdout. Required.
	// Placeholders: job_id, fence, ledger_url (without its password),
	// catalog_name, table_identifier, types.
	Submit []string
	// Status prints one word, queued, running, succeeded, failed or
	// cancelled, for {{external_id}}; a non-zero exit means the backend does
	// not know the job (unknown). Required.
	Status []string
	// Cancel stops {{external_id}}; a non-zero exit is an error. Required.
	Cancel []string
	// IDRegex finds the external id in Submit's stdout: its first capture
	// group. Defaults to the whole stdout, trimmed, when it is one token.
	IDRegex string
	// Env is the commands' base environment; nil means the coordinator's.
	// The job's credentials are added to Submit's environment
	// (TMS_CATALOG_PROP_<KEY>=VALUE, and TMS_DB, the ledger URL with its
	// password) for the command to hand on the way its platform keeps
	// secrets; they are never put into an argument.
	Env []string
	// Timeout bounds each command. Defaults to DefaultCommandTimeout.
	Timeout time.Duration
	// Log receives the submitter's logs. Defaults to a no-op logger.
	Log *zap.Logger
}

// DefaultCommandTimeout bounds one submit, status or cancel command.
const DefaultCommandTimeout = time.Minute

// defaultIDRegex takes the whole trimmed stdout when it is one token.
const defaultIDRegex = `^\s*(\S+)\s*$`

// CommandSubmitter submits jobs by running commands. It keeps no state of
// its own: the external id is everything Status and Cancel need, so any
// coordinator node can ask about or cancel any row's job.
type CommandSubmitter struct {
	submit, status, cancel argvTemplate
	id                     *regexp.Regexp
	cfg                    CommandConfig
}

// NewCommandSubmitter checks cfg: every template present, only known
// placeholders, a regex with a capture group.
func NewCommandSubmitter(cfg CommandConfig) (*CommandSubmitter, error) {
	s := &CommandSubmitter{cfg: cfg}
	var err error
	if s.submit, err = parseTemplate("submit", cfg.Submit, submitPlaceholders); err != nil {
		return nil, err
	}
	withID := append(slices.Clone(submitPlaceholders), PlaceholderExternalID)
	if s.status, err = parseTemplate("status", cfg.Status, withID); err != nil {
		return nil, err
	}
	if s.cancel, err = parseTemplate("cancel", cfg.Cancel, withID); err != nil {
		return nil, err
	}
	if s.id, err = regexp.Compile(cmp.Or(cfg.IDRegex, defaultIDRegex)); err != nil {
		return nil, fmt.Errorf("%w: command idRegex: %v", ErrInvalidJobRequest, err)
	}
	if s.id.NumSubexp() < 1 {
		return nil, fmt.Errorf("%w: command idRegex %q has no capture group; the first group is the external id", ErrInvalidJobRequest, cfg.IDRegex)
	}
	s.cfg.Timeout = cmp.Or(cfg.Timeout, DefaultCommandTimeout)
	if s.cfg.Log == nil {
		s.cfg.Log = zap.NewNop()
	}
	return s, nil
}

// Submit runs the submit command for req and returns the id it printed.
func (s *CommandSubmitter) Submit(ctx context.Context, req JobRequest) (string, error) {
	if err := req.validate(); err != nil {
		return "", err
	}
	env, err := s.jobEnv(req)
	if err != nil {
		return "", err
	}
	// What the command printed goes into errors, and so into the row's
	// error and the logs: a credential it echoed is masked there.
	out, err := s.run(ctx, s.submit, jobValues(req), env)
	if err != nil {
		return "", errors.New(maskSecrets(err.Error(), req))
	}
	m := s.id.FindSubmatch(out)
	if m == nil || len(bytes.TrimSpace(m[1])) == 0 {
		return "", fmt.Errorf("submit command printed no external id (idRegex %q): %s", s.id, maskSecrets(tailLine(out), req))
	}
	id := string(bytes.TrimSpace(m[1]))
	s.cfg.Log.Info("job submitted", zap.String("submitter", "command"), zap.Int64("job", req.JobID),
		zap.Int64("fence", req.Fence), zap.String("table", req.Table), zap.String("external_id", id))
	return id, nil
}

// Status runs the status command for id.
func (s *CommandSubmitter) Status(ctx context.Context, id string) (JobStatus, error) {
	out, err := s.run(ctx, s.status, map[string]string{PlaceholderExternalID: id}, s.baseEnv())
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		return JobStatus{State: JobUnknown, ExitCode: -1, Message: err.Error()}, nil
	case err != nil:
		return JobStatus{}, err
	}
	word, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	switch st := JobState(strings.ToLower(strings.TrimSpace(word))); st {
	case JobQueued, JobRunning, JobSucceeded, JobCancelled:
		return JobStatus{State: st, ExitCode: -1}, nil
	case JobFailed:
		return JobStatus{State: st, ExitCode: -1, Message: "status command: failed"}, nil
	}
	return JobStatus{}, fmt.Errorf("status command for %s printed %q; want one of queued, running, succeeded, failed, cancelled", id, word)
}

// Cancel runs the cancel command for id.
func (s *CommandSubmitter) Cancel(ctx context.Context, id string) error {
	_, err := s.run(ctx, s.cancel, map[string]string{PlaceholderExternalID: id}, s.baseEnv())
	return err
}

// run executes t with values and env, and returns its stdout. A non-zero
// exit is an *exec.ExitError wrapped with the command's last stderr line.
func (s *CommandSubmitter) run(ctx context.Context, t argvTemplate, values map[string]string, env []string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	argv := t.render(values)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%s command %s: %w", t.name, argv[0], ctx.Err())
		}
		return nil, fmt.Errorf("%s command %s: %w: %s", t.name, argv[0], err, tailLine(stderr.Bytes()))
	}
	return stdout.Bytes(), nil
}

// baseEnv is the commands' environment without any job's credentials.
func (s *CommandSubmitter) baseEnv() []string {
	base := s.cfg.Env
	if base == nil {
		base = os.Environ()
	}
	env := make([]string, 0, len(base))
	for _, kv := range base {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, jobspec.EnvPropPrefix) || name == "TMS_DB" {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// jobEnv is the submit command's environment: the base one, the ledger URL
// with its password as TMS_DB, and the catalog credentials.
func (s *CommandSubmitter) jobEnv(req JobRequest) ([]string, error) {
	env := append(s.baseEnv(), "TMS_DB="+req.DBURL)
	keys := make([]string, 0, len(req.CatalogProps))
	for k := range req.CatalogProps {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		v := req.CatalogProps[k]
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(v, 0) {
			return nil, fmt.Errorf("%w: CatalogProps key %q cannot be passed as an environment variable", ErrInvalidJobRequest, k)
		}
		env = append(env, jobspec.EnvPropPrefix+k+"="+v)
	}
	return env, nil
}

// maskSecrets replaces every credential of req (catalog property values,
// the ledger URL's password) in msg by ***.
func maskSecrets(msg string, req JobRequest) string {
	secrets := make([]string, 0, len(req.CatalogProps)+1)
	for _, v := range req.CatalogProps {
		secrets = append(secrets, v)
	}
	if u, err := url.Parse(req.DBURL); err == nil {
		if pw, ok := u.User.Password(); ok {
			secrets = append(secrets, pw)
		}
	}
	for _, v := range secrets {
		if len(v) >= 4 {
			msg = strings.ReplaceAll(msg, v, "***")
		}
	}
	return msg
}

// tailLine is the last non-empty line of b, at most 200 bytes, for errors.
func tailLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	l := strings.TrimSpace(lines[len(lines)-1])
	if len(l) > 200 {
		l = l[:200] + "…"
	}
	if l == "" {
		return "(no output)"
	}
	return l
}

// Close releases nothing: the jobs run on their platform and outlive the
// coordinator, and a command in progress ends with its context.
func (s *CommandSubmitter) Close(context.Context) error { return nil }
