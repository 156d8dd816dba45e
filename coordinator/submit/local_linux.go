package submit

import (
	"os"
	"syscall"
)

// sysProcAttr puts the runner in a process group of its own, so a signal to
// the group reaches anything it starts, and has the kernel send it SIGTERM
// if the coordinator dies (see LocalSubmitter).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}

// signalGroup sends sig to p's process group (p leads it, see sysProcAttr).
func signalGroup(p *os.Process, sig syscall.Signal) error {
	return syscall.Kill(-p.Pid, sig)
}
