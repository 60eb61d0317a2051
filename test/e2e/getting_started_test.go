package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ovnbgp/ovnbgp/test/e2e/lab"
)

// guideBlocks returns the ```sh blocks of a Markdown file, in order.
func guideBlocks(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var blocks []string
	var cur *strings.Builder
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := sc.Text()
		switch {
		case cur == nil && l == "```sh":
			cur = &strings.Builder{}
		case cur != nil && l == "```":
			blocks = append(blocks, cur.String())
			cur = nil
		case cur != nil:
			cur.WriteString(l + "\n")
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return blocks
}

// TestGettingStarted runs docs/getting-started.md as a newcomer would:
// every sh block in order, in one bash with -euo pipefail, with the binary
// under test as `ovnbgp` on PATH. The guide must end with the router
// holding the node's moved subnet, and clean up after itself (its last
// block, run again here if the guide failed half-way).
func TestGettingStarted(t *testing.T) {
	lab.Require(t)
	bin := lab.Binary(t)
	blocks := guideBlocks(t, filepath.Join("..", "..", "docs", "getting-started.md"))
	if len(blocks) < 8 {
		t.Fatalf("docs/getting-started.md has %d sh blocks: the test expects the whole walk-through", len(blocks))
	}
	cleanup := blocks[len(blocks)-1]
	if !strings.Contains(cleanup, "ip netns del") {
		t.Fatalf("the last sh block of docs/getting-started.md is not the clean-up:\n%s", cleanup)
	}
	name := fmt.Sprintf("ovnbgp-gs%d", os.Getpid()%100000)
	binDir := t.TempDir()
	if err := os.Symlink(bin, filepath.Join(binDir, "ovnbgp")); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "LAB="+name, "PATH="+binDir+":"+os.Getenv("PATH"))
	run := func(script string, timeout time.Duration) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", script)
		cmd.Env = env
		cmd.WaitDelay = 5 * time.Second
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	t.Cleanup(func() {
		if out, err := run("LAB="+name+"\nDIR=/tmp/$LAB\n"+cleanup, time.Minute); err != nil {
			t.Errorf("the guide's clean-up, run again: %v\n%s", err, out)
		}
	})
	out, err := run(strings.Join(blocks, "\n"), 3*time.Minute)
	if err != nil {
		t.Fatalf("docs/getting-started.md failed: %v\n%s", err, out)
	}
	for _, want := range []string{"tor   192.0.2.1  65001  established", "10.128.0.0/23  sent   default  pods",
		"*> 10.128.2.0/23    192.0.2.0", "advertise rule pods (podNetwork) selects it"} {
		if !strings.Contains(out, want) {
			t.Errorf("the guide's output lacks %q:\n%s", want, out)
		}
	}
	if nss, err := exec.Command("ip", "netns", "list").Output(); err != nil || strings.Contains(string(nss), name) {
		t.Errorf("the guide left a namespace behind (%v):\n%s", err, nss)
	}
	if _, err := os.Stat("/tmp/" + name); !os.IsNotExist(err) {
		t.Errorf("the guide left /tmp/%s behind (%v)", name, err)
	}
}
