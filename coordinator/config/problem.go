package config

import (
	"fmt"
	"strings"

	"github.com/tms-dev/tms/internal/invalid"
)

// Problem is one thing wrong with the configuration. Its text is
// `FILE:LINE: key KEY: MSG` for a key of the file, `FILE: MSG` for the
// file as a whole, and MSG alone for a flag or a TMS_* variable (MSG then
// names it). It matches invalid.ErrArgument.
type Problem struct {
	// File is the configuration file, "" when a flag or a variable is at
	// fault.
	File string
	// Line is the file's line, 0 for the whole file. A problem of several
	// keys (a catalog missing a property) gives the line of the first.
	Line int
	// Key is the file key (with Prefix) at fault, "" for a line that is no
	// key = value.
	Key string
	// Msg says what is wrong.
	Msg string
}

func (p Problem) Error() string {
	var b strings.Builder
	if p.File != "" {
		b.WriteString(p.File)
		if p.Line > 0 {
			fmt.Fprintf(&b, ":%d", p.Line)
		}
		b.WriteString(": ")
	}
	if p.Key != "" {
		b.WriteString("key " + p.Key + ": ")
	}
	b.WriteString(p.Msg)
	return b.String()
}

// Is makes every Problem an invalid argument.
func (p Problem) Is(target error) bool { return target == invalid.ErrArgument }

// Problems are every problem found, in the order found. As an error it
// reads as the first, with a count of the others.
type Problems []Problem

func (ps Problems) Error() string {
	switch len(ps) {
	case 0:
		return "no problem"
	case 1:
		return ps[0].Error()
	}
	more := "problems"
	if len(ps) == 2 {
		more = "problem"
	}
	return fmt.Sprintf("%s (and %d more %s)", ps[0].Error(), len(ps)-1, more)
}

// Unwrap returns each problem, for errors.Is and errors.As.
func (ps Problems) Unwrap() []error {
	out := make([]error, len(ps))
	for i, p := range ps {
		out[i] = p
	}
	return out
}

// Err is ps as an error, nil when there is none.
func (ps Problems) Err() error {
	if len(ps) == 0 {
		return nil
	}
	return ps
}

// flagProblem is a Problem of a flag or variable: msg names it.
func flagProblem(format string, args ...any) Problem {
	return Problem{Msg: fmt.Sprintf(format, args...)}
}
