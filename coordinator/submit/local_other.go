//go:build !unix

package submit

import (
	"os"
	"syscall"
)

// sysProcAttr is nil: without Unix process groups the runner is signalled
// on its own.
func sysProcAttr() *syscall.SysProcAttr { return nil }

// signalGroup ends p. Without Unix signals there is no graceful stop, so
// both SIGTERM and SIGKILL kill the process at once.
func signalGroup(p *os.Process, _ syscall.Signal) error { return p.Kill() }
