package lab

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Alive reports whether pid is a live process. A zombie is not alive: the
// PID 1 of a container is often no real init and reaps orphans late, so
// kill(pid, 0) succeeds for a while after a daemon exited.
func Alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// "pid (comm) S ...": comm may contain spaces and parentheses.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return false
	}
	switch s[i+2] {
	case 'Z', 'X', 'x':
		return false
	}
	return true
}

// StopPID sends SIGTERM to pid and waits up to grace for it to end, then
// sends SIGKILL. It returns an error only if the process outlives SIGKILL.
func StopPID(pid int, grace time.Duration) error {
	if pid <= 1 || !Alive(pid) {
		return nil
	}
	_ = syscall.Kill(pid, syscall.SIGTERM)
	if waitDead(pid, grace) {
		return nil
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	if waitDead(pid, 5*time.Second) {
		return nil
	}
	return fmt.Errorf("pid %d still alive after SIGKILL", pid)
}

func waitDead(pid int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for Alive(pid) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}

// Eventually polls cond every interval until it returns nil and returns the
// time it took. After timeout it fails the test with cond's last error.
func Eventually(t testing.TB, timeout, interval time.Duration, what string, cond func() error) time.Duration {
	t.Helper()
	d, err := Poll(timeout, interval, cond)
	if err != nil {
		t.Fatalf("%s: not true after %v: %v", what, timeout, err)
	}
	return d
}

// Poll is Eventually without the test: it returns the elapsed time, or the
// last error of cond when timeout passed.
func Poll(timeout, interval time.Duration, cond func() error) (time.Duration, error) {
	start := time.Now()
	for {
		err := cond()
		if err == nil {
			return time.Since(start), nil
		}
		if time.Since(start) > timeout {
			return time.Since(start), err
		}
		time.Sleep(interval)
	}
}

// Consistently checks cond every interval for the whole of d and fails the
// test the first time it returns an error.
func Consistently(t testing.TB, d, interval time.Duration, what string, cond func() error) {
	t.Helper()
	start := time.Now()
	for time.Since(start) < d {
		if err := cond(); err != nil {
			t.Fatalf("%s: broken after %v: %v", what, time.Since(start).Round(time.Millisecond), err)
		}
		time.Sleep(interval)
	}
}

// Tail is the last n lines of the file at path, or why it cannot be read.
func Tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
