package bench

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// userHZ is the unit of the CPU times in /proc/PID/stat (USER_HZ, 100 on
// Linux whatever the kernel's HZ).
const userHZ = 100

// cpuTime is the user + system CPU time process pid has used so far, all
// its threads together (10 ms resolution).
func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// "pid (comm) state ppid ...": comm may contain spaces and parentheses.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: %q", pid, s)
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %q", pid, s)
	}
	utime, err1 := strconv.ParseUint(f[11], 10, 64)
	stime, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: utime %q stime %q", pid, f[11], f[12])
	}
	return time.Duration(utime+stime) * time.Second / userHZ, nil
}

// memory is a process's resident set size now (VmRSS) and at its peak
// (VmHWM), in bytes.
type memory struct{ rss, peak uint64 }

func memoryOf(pid int) (memory, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return memory{}, err
	}
	var m memory
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || (k != "VmRSS" && k != "VmHWM") {
			continue
		}
		f := strings.Fields(v) // "12345 kB"
		if len(f) != 2 || f[1] != "kB" {
			return memory{}, fmt.Errorf("/proc/%d/status: %q", pid, line)
		}
		kb, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			return memory{}, fmt.Errorf("/proc/%d/status: %q: %w", pid, line, err)
		}
		if k == "VmRSS" {
			m.rss = kb << 10
		} else {
			m.peak = kb << 10
		}
	}
	if m.rss == 0 {
		return memory{}, fmt.Errorf("/proc/%d/status: no VmRSS", pid)
	}
	return m, nil
}

// usage is the CPU time and memory of a set of processes, summed.
type usage struct {
	cpu time.Duration
	mem memory
}

func usageOf(pids map[string]int) (usage, error) {
	var u usage
	for name, pid := range pids {
		c, err := cpuTime(pid)
		if err != nil {
			return usage{}, fmt.Errorf("%s: %w", name, err)
		}
		m, err := memoryOf(pid)
		if err != nil {
			return usage{}, fmt.Errorf("%s: %w", name, err)
		}
		u.cpu += c
		u.mem.rss += m.rss
		u.mem.peak += m.peak
	}
	return u, nil
}

// mib is n bytes in MiB.
func mib(n uint64) float64 { return float64(n) / (1 << 20) }
