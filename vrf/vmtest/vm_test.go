package vmtest

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/ovnbgp/ovnbgp/test/vm"
)

// kernelModules are the modules the guest loads (none has dependencies in
// Debian's 6.1 kernel).
var kernelModules = []string{"kernel/drivers/net/vrf.ko", "kernel/drivers/net/dummy.ko"}

// TestVRFInVM boots Debian's kernel in qemu with the guest as /init and
// requires every check the guest runs to pass (see guest/main.go: adopt an
// existing VRF, create a missing one, refuse a VRF with another table, a
// table of another VRF and a device that is not a VRF, routes and a walk of
// desired states in a VRF's table read back with its name, notify on a
// route deleted there, VRFs never deleted, foreign VRF and routes
// untouched).
func TestVRFInVM(t *testing.T) {
	k := vm.Require(t, kernelModules...)
	dir := t.TempDir()
	guest := k.BuildGuest(t, dir, "./guest")

	initrd := filepath.Join(dir, "initrd.gz")
	if err := k.Initramfs(t, initrd, guest).Close(); err != nil {
		t.Fatal(err)
	}
	r := k.Boot(t, vm.Options{Initrd: initrd, Timeout: 5 * time.Minute})
	r.Check(t)
}
