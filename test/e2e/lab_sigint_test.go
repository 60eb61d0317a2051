package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ovnbgp/ovnbgp/test/e2e/lab"
)

// TestLabCtrlC: `ovnbgp lab` (the built binary) stops at once on Ctrl-C
// (SIGINT), whether it is still starting or already showing the demo: exit
// code 0, nothing on stderr (no "context canceled", no stack trace), its
// temporary directory removed (issue 5 item 18). It needs no root.
func TestLabCtrlC(t *testing.T) {
	t.Parallel()
	bin := lab.Binary(t)
	for _, tt := range []struct {
		name string
		// ready waits for the moment to send SIGINT.
		ready func(t *testing.T, tmp string, lines <-chan string) string
	}{
		{"while starting", func(t *testing.T, tmp string, _ <-chan string) string {
			// The lab's directory exists once the signal handler is in
			// place (Execute installs it before running any verb).
			_, err := lab.Poll(generous, 2*time.Millisecond, func() error {
				if m, _ := filepath.Glob(filepath.Join(tmp, "ovnbgp-lab-*")); len(m) == 0 {
					return fmt.Errorf("no ovnbgp-lab-* directory in %s", tmp)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			return ""
		}},
		{"after the demo", func(t *testing.T, _ string, lines <-chan string) string {
			var seen []string
			deadline := time.After(generous)
			for {
				select {
				case l, ok := <-lines:
					if !ok {
						t.Fatalf("lab exited early:\n%s", strings.Join(seen, "\n"))
					}
					seen = append(seen, l)
					if l == "Ctrl-C to stop." {
						return strings.Join(seen, "\n")
					}
				case <-deadline:
					t.Fatalf("lab printed no summary in %v:\n%s", generous, strings.Join(seen, "\n"))
				}
			}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tmp, err := os.MkdirTemp("", "ovnbgp-e2e-sigint-")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(tmp) })
			cmd := exec.Command(bin, "lab")
			cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + tmp, "TMPDIR=" + tmp}
			lines, stderr := startLabCmd(t, cmd)

			text := tt.ready(t, tmp, lines)
			if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
				t.Fatal(err)
			}
			waited := make(chan error, 1)
			go func() {
				for range lines {
				}
				waited <- cmd.Wait()
			}()
			select {
			case err := <-waited:
				if err != nil {
					t.Errorf("lab after SIGINT: %v (want exit code 0)", err)
				}
			case <-time.After(stopBound):
				t.Fatalf("lab did not stop within %v of SIGINT", stopBound)
			}
			if s := stderr.String(); s != "" {
				t.Errorf("lab wrote to stderr (want nothing):\n%s", s)
			}
			for _, bad := range []string{"panic", "goroutine "} {
				if strings.Contains(text, bad) {
					t.Errorf("lab output has %q:\n%s", bad, text)
				}
			}
			if left, _ := filepath.Glob(filepath.Join(tmp, "ovnbgp-lab-*")); len(left) > 0 {
				t.Errorf("lab left %v behind", left)
			}
		})
	}
}
