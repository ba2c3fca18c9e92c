//go:build !linux

package aethertest

import "syscall"

// ProcAttr is nil where the parent's death cannot end a child: the tests'
// cleanups end their processes.
func ProcAttr() *syscall.SysProcAttr { return nil }
