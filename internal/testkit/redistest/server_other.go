//go:build !linux

package redistest

import "os/exec"

// dieWithTestBinary does nothing: only Linux ties a child's life to its
// parent's, so elsewhere a test binary that dies before Main's stop (a
// panic, a test timeout) leaves its redis-server running.
func dieWithTestBinary(*exec.Cmd) {}
