package loadgen

import (
	"bytes"
	"os"
	"strconv"
	"strings"
)

// clockTicks is USER_HZ, the unit of /proc/stat and /proc/self/stat
// times; 100 on every Linux architecture Go supports.
const clockTicks = 100

// cpuSample is a reading of machine and process CPU time, in ticks.
type cpuSample struct {
	machineBusy, machineTotal int64
	process                   int64
	ok                        bool
}

// readCPU reads /proc/stat (whole machine: busy = all but idle and
// iowait) and /proc/self/stat (utime + stime). ok is false off Linux.
func readCPU() cpuSample {
	var s cpuSample
	stat, err := os.ReadFile("/proc/stat")
	if err != nil {
		return s
	}
	line, _, _ := bytes.Cut(stat, []byte("\n"))
	f := strings.Fields(string(line))
	if len(f) < 8 || f[0] != "cpu" {
		return s
	}
	// user nice system idle iowait irq softirq steal [guest guest_nice,
	// already counted in user and nice]
	for i, v := range f[1:min(len(f), 9)] {
		n, _ := strconv.ParseInt(v, 10, 64)
		s.machineTotal += n
		if i != 3 && i != 4 {
			s.machineBusy += n
		}
	}
	self, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return s
	}
	// Fields after the ")" that ends the command name: state is field 3,
	// utime field 14, stime field 15.
	rest := self[bytes.LastIndexByte(self, ')')+1:]
	g := strings.Fields(string(rest))
	if len(g) < 13 {
		return s
	}
	ut, _ := strconv.ParseInt(g[11], 10, 64)
	st, _ := strconv.ParseInt(g[12], 10, 64)
	s.process = ut + st
	s.ok = true
	return s
}

// resetPeakRSS resets VmHWM to the current RSS (Linux 4.0+), so the peak
// read later covers the measured phase only. Best effort.
func resetPeakRSS() {
	_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
}

// peakRSS returns VmHWM from /proc/self/status in bytes, or 0.
func peakRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			f := strings.Fields(v)
			if len(f) > 0 {
				kb, _ := strconv.ParseInt(f[0], 10, 64)
				return kb * 1024
			}
		}
	}
	return 0
}

// loadAverage returns the first three fields of /proc/loadavg, or "".
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}
