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
	start := time.Now()
	dir := t.TempDir()
	guest := k.BuildGuest(t, dir, "./guest")
	built := time.Now()

	initrd := filepath.Join(dir, "initrd.gz")
	a, err := vm.NewInitramfs(initrd)
	if err != nil {
		t.Fatal(err)
	}
	a.Copy("init", guest)
	for _, m := range k.Modules {
		a.Copy("modules/"+filepath.Base(m), m)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	r := k.Boot(t, vm.Options{Initrd: initrd, Timeout: 5 * time.Minute})
	t.Logf("VM test wall time %s: guest build %s, qemu boot to power-off %s (%s, %s)",
		time.Since(start).Round(100*time.Millisecond), built.Sub(start).Round(100*time.Millisecond),
		r.Took.Round(100*time.Millisecond), filepath.Base(k.Vmlinuz), r.Accel)
	r.Check(t)
}
