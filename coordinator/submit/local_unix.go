//go:build unix && !linux

package submit

import (
	"os"
	"syscall"
)

// sysProcAttr puts the runner in a process group of its own, so a signal to
// the group reaches anything it starts.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// signalGroup sends sig to p's process group (p leads it, see sysProcAttr).
func signalGroup(p *os.Process, sig syscall.Signal) error {
	return syscall.Kill(-p.Pid, sig)
}
