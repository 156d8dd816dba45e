// Package invalid is the root of TMS's invalid-argument errors. A package
// that refuses a caller's value has its own sentinel, made with New
// (store.ErrInvalidArgument, policy.ErrInvalid, jobspec.ErrInvalidSpec,
// catalogs.ErrInvalidArgument, …), or wraps ErrArgument itself for its own
// configuration errors. errors.Is matches a package's sentinel and
// ErrArgument, so a front end answers every refused input the same way (a
// usage exit, an HTTP 400) without knowing which package refused it, while
// a caller that cares still tells one package's refusal from another's.
package invalid

import "errors"

// ErrArgument is every invalid-argument error.
var ErrArgument = errors.New("invalid argument")

// New returns a package's invalid-argument sentinel: its message is msg,
// and errors.Is matches it and ErrArgument.
func New(msg string) error { return &sentinel{msg: msg} }

type sentinel struct{ msg string }

func (s *sentinel) Error() string { return s.msg }

func (s *sentinel) Is(target error) bool { return target == ErrArgument }
