package submit

import (
	"cmp"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"go.uber.org/zap"
)

// Defaults of LocalConfig.
const (
	DefaultLocalMaxRunning   = 4
	DefaultLocalLogDir       = "tms-logs"
	DefaultLocalKillGrace    = 45 * time.Second
	DefaultLocalKeepFinished = 10_000
	// RunnerBinaryName is the file name of the runner LocalSubmitter looks
	// for when LocalConfig.RunnerPath is empty.
	RunnerBinaryName = "tms-runner"
)

// LocalConfig configures a LocalSubmitter. Zero values take the defaults in
// each field's comment.
type LocalConfig struct {
	// RunnerPath is the tms-runner binary. Defaults to tms-runner in the
	// folder of the current executable (where `make build` puts both
	// binaries), else tms-runner on PATH. NewLocalSubmitter fails when it is
	// not an executable file, so a bad install is reported at startup rather
	// than by the first job.
	RunnerPath string
	// MaxRunning is how many runners may run at once; further jobs wait in
	// a FIFO queue and start as slots free. Defaults to 4.
	MaxRunning int
	// LogDir is the folder of the job logs: the runner's stdout and stderr
	// go to LogDir/job-<ledger job id>.log, appended to by every launch of
	// that job, each framed by a start and an exit line. Created if missing.
	// Defaults to ./tms-logs.
	LogDir string
	// KillGrace is how long Cancel and Close wait after SIGTERM (on which
	// tms-runner stops before its next Iceberg commit and closes its row
	// cancelled) before they SIGKILL the runner's process group. Defaults to
	// 45s: the runner itself allows 30s for its final ledger write.
	KillGrace time.Duration
	// KeepFinished is how many ended jobs Status still reports; older ones
	// are forgotten (Status then says unknown). Defaults to 10,000.
	KeepFinished int
	// Env is the environment runners start from. Defaults to the
	// coordinator's own (os.Environ() at each Submit). TMS_CATALOG_PROP_* and
	// TMS_DB variables in it are dropped, so a runner sees exactly the
	// credentials and ledger of its request. TMS_LOG_LEVEL defaults to info
	// for the runner, so its job log says what each step did.
	Env []string
	// Log receives submit, start, exit and cancel events. Defaults to
	// zap.NewNop().
	Log *zap.Logger
}

// withDefaults fills in the defaults and validates cfg.
func (c LocalConfig) withDefaults() (LocalConfig, error) {
	if c.MaxRunning < 0 || c.KillGrace < 0 || c.KeepFinished < 0 {
		return c, fmt.Errorf("local submitter: MaxRunning, KillGrace and KeepFinished must not be negative")
	}
	c.MaxRunning = cmp.Or(c.MaxRunning, DefaultLocalMaxRunning)
	c.LogDir = cmp.Or(c.LogDir, DefaultLocalLogDir)
	c.KillGrace = cmp.Or(c.KillGrace, DefaultLocalKillGrace)
	c.KeepFinished = cmp.Or(c.KeepFinished, DefaultLocalKeepFinished)
	if c.Log == nil {
		c.Log = zap.NewNop()
	}
	path, err := resolveRunner(c.RunnerPath, os.Executable, exec.LookPath)
	if err != nil {
		return c, err
	}
	c.RunnerPath = path
	abs, err := filepath.Abs(c.LogDir)
	if err != nil {
		return c, fmt.Errorf("local submitter: log dir %q: %w", c.LogDir, err)
	}
	if err := os.MkdirAll(abs, 0o750); err != nil {
		return c, fmt.Errorf("local submitter: create log dir: %w", err)
	}
	c.LogDir = abs
	return c, nil
}

// resolveRunner returns the runner binary: path if given, else
// RunnerBinaryName beside the executable, else on PATH. The result must be
// an executable regular file.
func resolveRunner(path string, executable func() (string, error), lookPath func(string) (string, error)) (string, error) {
	if path == "" {
		if exe, err := executable(); err == nil {
			if p := filepath.Join(filepath.Dir(exe), RunnerBinaryName); isExecutable(p) {
				return p, nil
			}
		}
		p, err := lookPath(RunnerBinaryName)
		if err != nil {
			return "", fmt.Errorf("local submitter: %s is neither next to this executable nor on PATH; set the runner path", RunnerBinaryName)
		}
		path = p
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("local submitter: runner %q: %w", path, err)
	}
	if !isExecutable(abs) {
		return "", fmt.Errorf("local submitter: runner %s is not an executable file", abs)
	}
	return abs, nil
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}
