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

// procTicks maps a pid to its process group and CPU ticks.
type procTicks map[int]struct {
	group string
	ticks int64
}

// readProcs reads every process's CPU ticks, grouped as "postgres
// (<database>)" for backends of database, "postgres (other)", "redis",
// "this process" and "other". Processes that end between two readings
// lose their ticks (Run counts "other" as the rest of the machine's busy
// time instead); new ones count from zero.
func readProcs(database string) procTicks {
	out := procTicks{}
	self := os.Getpid()
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		return out
	}
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + d.Name() + "/stat")
		if err != nil {
			continue
		}
		open, end := bytes.IndexByte(stat, '('), bytes.LastIndexByte(stat, ')')
		if open < 0 || end < open {
			continue
		}
		comm := string(stat[open+1 : end])
		g := strings.Fields(string(stat[end+1:]))
		if len(g) < 13 {
			continue
		}
		ut, _ := strconv.ParseInt(g[11], 10, 64)
		st, _ := strconv.ParseInt(g[12], 10, 64)
		group := "other"
		switch {
		case pid == self:
			group = "this process"
		case comm == "postgres":
			group = "postgres (other)"
			if database != "" {
				cmdline, _ := os.ReadFile("/proc/" + d.Name() + "/cmdline")
				if bytes.Contains(cmdline, []byte(" "+database+" ")) {
					group = "postgres (" + database + ")"
				}
			}
		case strings.HasPrefix(comm, "redis-server"):
			group = "redis"
		}
		out[pid] = struct {
			group string
			ticks int64
		}{group, ut + st}
	}
	return out
}

// cpuByGroup returns each group's CPU ticks between two readings.
func cpuByGroup(before, after procTicks) map[string]int64 {
	out := map[string]int64{}
	for pid, a := range after {
		b := before[pid] // zero for a process that started since
		if b.group != "" && b.group != a.group {
			b.ticks = 0 // pid reused
		}
		out[a.group] += a.ticks - b.ticks
	}
	return out
}
