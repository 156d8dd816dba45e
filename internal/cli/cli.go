// Package cli holds the small pieces both TMS binaries share: subcommand
// dispatch, the logger, and how an error becomes one line on stderr and an exit
// code. It owns no behaviour of its own; the commands live in cmd/.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"

	"github.com/spf13/pflag"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Exit codes shared by tms-runner and tms-coordinator.
const (
	ExitOK      = 0 // success
	ExitFailure = 1 // the command ran and failed (database, catalog, I/O …)
	ExitUsage   = 2 // bad flags or bad input, nothing was done
	ExitBehind  = 3 // `migrate --check`: the database needs migrating
	// ExitFenced means tms-runner was fenced out: the job row's fence moved
	// on (the reconciler declared the runner dead and closed or re-owned the
	// row) or the row was already finished. The runner stopped before its
	// next Iceberg commit and wrote nothing more to the ledger; the row says
	// what was decided instead.
	ExitFenced = 4
)

// UsageError marks an error caused by the caller's input; it exits with
// ExitUsage.
type UsageError struct{ Err error }

func (e UsageError) Error() string { return e.Err.Error() }
func (e UsageError) Unwrap() error { return e.Err }

// Usagef returns a UsageError with a formatted message.
func Usagef(format string, args ...any) error {
	return UsageError{Err: fmt.Errorf(format, args...)}
}

// ExitError carries a specific exit code with its message.
type ExitError struct {
	Code int
	Err  error
}

func (e ExitError) Error() string { return e.Err.Error() }
func (e ExitError) Unwrap() error { return e.Err }

// Env is what a command gets: its arguments, streams and a logger.
type Env struct {
	Args   []string
	Stdout io.Writer
	Stderr io.Writer
	Log    *zap.Logger
}

// Command is one subcommand.
type Command struct {
	Name    string
	Summary string
	Run     func(ctx context.Context, env Env) error
}

// NewFlags returns a flag set for a subcommand that reports errors instead of
// exiting, so the caller decides the exit code.
func NewFlags(prog, name string, stderr io.Writer) *pflag.FlagSet {
	fs := pflag.NewFlagSet(prog+" "+name, pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.SortFlags = false
	return fs
}

// Parse parses args into fs and maps a parse error to a UsageError; help
// requests return pflag.ErrHelp unchanged.
func Parse(fs *pflag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return err
		}
		return UsageError{Err: err}
	}
	if fs.NArg() > 0 {
		return Usagef("unexpected argument %q", fs.Arg(0))
	}
	return nil
}

// NewLogger returns a console logger on stderr at the level named by
// TMS_LOG_LEVEL (debug, info, warn, error; default warn, so command output stays
// readable).
func NewLogger(stderr io.Writer) *zap.Logger {
	level := zapcore.WarnLevel
	if v := os.Getenv("TMS_LOG_LEVEL"); v != "" {
		if l, err := zapcore.ParseLevel(v); err == nil {
			level = l
		}
	}
	enc := zap.NewDevelopmentEncoderConfig()
	core := zapcore.NewCore(zapcore.NewConsoleEncoder(enc), zapcore.AddSync(stderr), level)
	return zap.New(core)
}

// Main dispatches os.Args to commands and exits with the command's code.
func Main(prog string, commands []Command) {
	os.Exit(Run(prog, commands, os.Args[1:], os.Stdout, os.Stderr))
}

// Run dispatches args to commands and returns the exit code. It is Main
// without the process exit, for tests.
func Run(prog string, commands []Command, args []string, stdout, stderr io.Writer) int {
	sort.SliceStable(commands, func(i, j int) bool { return commands[i].Name < commands[j].Name })
	usage := func() {
		fmt.Fprintf(stderr, "usage: %s COMMAND [flags]\n\ncommands:\n", prog)
		for _, c := range commands {
			fmt.Fprintf(stderr, "  %-10s %s\n", c.Name, c.Summary)
		}
		fmt.Fprintf(stderr, "\n`%s COMMAND --help` shows a command's flags.\n", prog)
	}
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage()
		if len(args) == 0 {
			return ExitUsage
		}
		return ExitOK
	}
	var cmd *Command
	for i := range commands {
		if commands[i].Name == args[0] {
			cmd = &commands[i]
		}
	}
	if cmd == nil {
		fmt.Fprintf(stderr, "%s: unknown command %q\n", prog, args[0])
		usage()
		return ExitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := NewLogger(stderr)
	defer func() { _ = log.Sync() }()
	err := cmd.Run(ctx, Env{Args: args[1:], Stdout: stdout, Stderr: stderr, Log: log})
	return report(prog+" "+cmd.Name, err, stderr)
}

func report(name string, err error, stderr io.Writer) int {
	if err == nil || errors.Is(err, pflag.ErrHelp) {
		return ExitOK
	}
	fmt.Fprintf(stderr, "%s: %s\n", name, oneLine(err.Error()))
	var ee ExitError
	if errors.As(err, &ee) {
		return ee.Code
	}
	var ue UsageError
	if errors.As(err, &ue) {
		return ExitUsage
	}
	return ExitFailure
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// HumanBytes renders a byte count with an IEC unit: 512 B, 1.5 KiB,
// 12.3 MiB.
func HumanBytes(b float64) string {
	const unit = 1024
	if b < unit {
		return fmt.Sprintf("%.0f B", b)
	}
	div, exp := float64(unit), 0
	for n := b / unit; n >= unit; n /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", b/div, "KMGTPE"[exp])
}
