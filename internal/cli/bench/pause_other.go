//go:build !unix

package bench

import (
	"errors"
	"os"
)

var errNoPause = errors.New("bench cluster --pauses: stopping a process needs SIGSTOP (Unix)")

func pauseProcess(*os.Process) error { return errNoPause }

func resumeProcess(*os.Process) error { return errNoPause }
