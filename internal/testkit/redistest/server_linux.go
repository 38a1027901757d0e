package redistest

import (
	"os/exec"
	"syscall"
)

// dieWithTestBinary has the kernel kill the server when the test binary
// dies without reaching Main's stop (a panic, a test timeout, a kill).
func dieWithTestBinary(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
