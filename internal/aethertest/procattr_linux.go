package aethertest

import "syscall"

// ProcAttr makes a child process die with the test binary, so that a test
// that crashes leaves no server or relay behind.
func ProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
