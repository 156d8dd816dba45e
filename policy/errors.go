package policy

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/tms-dev/tms/internal/invalid"
)

// ErrInvalid is wrapped by every policy validation error (each an *Error)
// and by ParseTypes errors, so callers can tell bad input from a failed run
// with one errors.Is.
var ErrInvalid = invalid.New("invalid policy")

// Error is a policy validation error: the field, as a path, and what is
// wrong with it. Fields of a content are relative to it
// ("rewriteOptions.target-file-size-bytes") when the content was checked on
// its own (ParseCompaction, ValidateOptions), and under "content." when
// checked as part of a document (ParseContent, Decode).
type Error struct {
	// Field is the path of the offending field, e.g. "content.schedule.crontab".
	Field string
	// Msg says what is wrong, without repeating the field.
	Msg string
}

// Error returns "field: msg".
func (e *Error) Error() string { return e.Field + ": " + e.Msg }

// Unwrap returns ErrInvalid.
func (e *Error) Unwrap() error { return ErrInvalid }

func errf(field, format string, args ...any) error {
	return &Error{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// under returns err with its field moved under prefix ("content"), when it
// is an *Error.
func under(prefix string, err error) error {
	var e *Error
	if !errors.As(err, &e) {
		return err
	}
	return &Error{Field: prefix + "." + e.Field, Msg: e.Msg}
}

// jsonFieldError names the field of a JSON decoding error under prefix.
func jsonFieldError(prefix string, err error) error {
	join := func(f string) string {
		switch {
		case prefix == "" && f == "":
			return "policy"
		case prefix == "":
			return f
		case f == "":
			return prefix
		}
		return prefix + "." + f
	}
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) && typeErr.Field == "" {
		return errf(join(""), "want a JSON object, got a JSON %s", typeErr.Value)
	}
	if errors.As(err, &typeErr) {
		return errf(join(typeErr.Field), "want %s, got a JSON %s", typeErr.Type, typeErr.Value)
	}
	if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		name, _ := strconv.Unquote(f)
		return errf(join(name), "unknown field")
	}
	return errf(join(""), "not valid JSON: %v", err)
}
