package nd

import (
	"runtime"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestCloseLeavesNoGoroutine: Close waits for every goroutine the Finder
// started (links, readers, link events), also after a reload removed a
// link.
func TestCloseLeavesNoGoroutine(t *testing.T) {
	a, b := newNS(t, "a"), newNS(t, "b")
	vethPair(t, a, "va", b, "vb")
	opt := goleak.IgnoreCurrent()
	ha, hb := a.h, b.h
	fa, err := New(Options{Namespace: &ha, AdvertiseInterval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	fb, err := New(Options{Namespace: &hb, AdvertiseInterval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	fa.SetLinks([]string{"va", "nosuch"})
	fb.SetLinks([]string{"vb"})
	eventually(t, 20*time.Second, "a learns b", func() string {
		if !fa.Peer("va").IsValid() {
			return status(fa, "va").Waiting
		}
		return ""
	})
	fa.SetLinks([]string{"nosuch"})
	fa.Close()
	fb.Close()
	fa.Close() // twice is fine
	// At once, not eventually: Close has waited for our goroutines.
	buf := make([]byte, 1<<20)
	stacks := string(buf[:runtime.Stack(buf, true)])
	for _, g := range strings.Split(stacks, "\n\n") {
		// A goroutine that signalled its end may not be gone yet
		// (runnable); one not waited for is still blocked.
		header, _, _ := strings.Cut(g, "\n")
		if strings.Contains(header, "[runnable") || strings.Contains(header, "[running") {
			continue
		}
		if strings.Contains(g, "ovnbgp/nd.(*link)") || strings.Contains(g, "ovnbgp/nd.(*Finder)") {
			t.Errorf("a goroutine of the Finder outlived Close:\n%s", g)
		}
	}
	goleak.VerifyNone(t, opt)
}
