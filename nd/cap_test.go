package nd

import (
	"net/netip"
	"os"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestRawSocketNeedsCapNetRaw: without CAP_NET_RAW the error names the
// link and the capability. Capabilities are per thread: this one drops
// the capability from its effective set and raises it again.
func TestRawSocketNeedsCapNetRaw(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (to hold CAP_NET_RAW and drop it)")
	}
	runtime.LockOSThread()
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		runtime.UnlockOSThread()
		t.Fatal(err)
	}
	orig := data
	data[0].Effective &^= 1 << unix.CAP_NET_RAW
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		runtime.UnlockOSThread()
		t.Fatal(err)
	}
	s, err := openSock(nil, "lo", 1, netip.MustParseAddr("::1"))
	if err := unix.Capset(&hdr, &orig[0]); err != nil {
		// the thread stays locked: Go ends it with the goroutine
		t.Fatalf("restore capabilities: %v", err)
	}
	runtime.UnlockOSThread()
	if s != nil {
		s.close()
	}
	if err == nil || !strings.Contains(err.Error(), "on lo") || !strings.Contains(err.Error(), "CAP_NET_RAW") {
		t.Errorf("got %v, want an error naming lo and CAP_NET_RAW", err)
	}
}
