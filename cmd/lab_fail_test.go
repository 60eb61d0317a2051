package cmd

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestLabDaemonFailsToStart: when the lab's daemon cannot start (here its
// control socket path is too long for a unix socket, while the NB socket's
// still fits), the lab returns the daemon's error instead of waiting for
// it a second time, for ever.
func TestLabDaemonFailsToStart(t *testing.T) {
	// The lab's directory is $TMPDIR/ovnbgp-lab-<7..10 digits>: with a
	// 77-byte TMPDIR, "nb.sock" fits in the 107 bytes of sun_path and
	// "ovnbgp.sock" does not.
	base := t.TempDir()
	tmp := filepath.Join(base, strings.Repeat("x", 77-len(base)-1))
	if len(tmp) != 77 {
		t.Fatalf("t.TempDir() is too long (%d bytes) to build a 77-byte TMPDIR", len(base))
	}
	if err := os.Mkdir(tmp, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TMPDIR", tmp)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out syncBuffer
	done := make(chan error, 1)
	go func() { done <- runLab(ctx, &out, labOptions{node: labNode, timeout: 60 * time.Second}) }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "daemon stopped") {
			t.Fatalf("lab returned %v, want the daemon's start error", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("the lab did not return after its daemon failed:\n%s", out.String())
	}
}
