//go:build unix

package bench

import (
	"os"
	"syscall"
)

// pauseProcess stops p (SIGSTOP) until resumeProcess.
func pauseProcess(p *os.Process) error { return p.Signal(syscall.SIGSTOP) }

// resumeProcess lets a process pauseProcess stopped go on (SIGCONT).
func resumeProcess(p *os.Process) error { return p.Signal(syscall.SIGCONT) }
