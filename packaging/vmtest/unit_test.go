package vmtest

import (
	"os"
	"os/user"
	"path/filepath"
	"testing"
	"time"

	"github.com/ovnbgp/ovnbgp/test/e2e/lab"
	"github.com/ovnbgp/ovnbgp/test/vm"
)

func TestMain(m *testing.M) {
	code := m.Run()
	lab.Cleanup()
	os.Exit(code)
}

// modules9p are what the guest's /init loads, in this order, to mount the
// host root over virtio-9p under an overlay (Debian's 6.1 kernel builds them
// as modules).
var modules9p = []string{
	"kernel/drivers/virtio/virtio_ring.ko", "kernel/drivers/virtio/virtio.ko",
	"kernel/drivers/virtio/virtio_pci_legacy_dev.ko", "kernel/drivers/virtio/virtio_pci_modern_dev.ko",
	"kernel/drivers/virtio/virtio_pci.ko", "kernel/fs/netfs/netfs.ko", "kernel/fs/fscache/fscache.ko",
	"kernel/net/9p/9pnet.ko", "kernel/net/9p/9pnet_virtio.ko", "kernel/fs/9p/9p.ko",
	"kernel/fs/overlayfs/overlay.ko",
}

// hostPrograms are what the VM runs from this machine's root.
var hostPrograms = []string{
	"/lib/systemd/systemd", "/usr/bin/systemctl", "/usr/bin/journalctl", "/usr/lib/frr/bgpd", "/usr/bin/vtysh",
	"/usr/sbin/ovsdb-server", "/usr/bin/ovsdb-tool", "/usr/bin/ovsdb-client", "/usr/bin/ovn-nbctl", "/usr/share/ovn/ovn-nb.ovsschema",
	"/usr/sbin/ip", "/usr/bin/nstat",
}

// checks are the checker's results the test requires (guest/main.go).
var checks = []string{
	"ready",           // Type=notify: active/running only after READY=1
	"sandbox",         // CapEff/CapPrm/CapBnd 0x3400, CapAmb 0, NoNewPrivs 1, Seccomp 2, uid 0
	"credential",      // LoadCredential=: $CREDENTIALS_DIRECTORY/tor-a, not readable by others
	"established-md5", // the session with FRR, which requires the TCP MD5 password
	"cli-peers",       // ovnbgp peers -o json through the control socket
	"advertised",      // node1's pod subnet in FRR's RIB from us
	"nb-discovered",   // no ovn.northbound: the NB socket created later at /var/run/ovn-ic is found and used
	"kernel-route",    // the learned route in table 100, proto ovnbgp (CAP_NET_ADMIN)
	"reload",          // systemctl reload: a new rule applies, no session reset, no restart
	"watchdog",        // a hung loop (test-hooks build, SIGUSR2) is killed by the watchdog and restarted; the imports never leave table 100 nor GR_node1
	"start-limit",     // a bad config: restarts, then start-limit-hit
}

// TestUnitUnderSystemd boots one VM and requires every check of the
// guest's checker to pass: the shipped unit, unchanged but for a drop-in
// with LoadCredential=, runs the daemon under its whole sandbox with a real
// BGP session (TCP MD5 from the credential), finds the NB socket that
// appears only at /var/run/ovn-ic after it started (no ovn.northbound),
// advertises the pod subnet,
// programs a learned route into the kernel, reloads on SIGHUP without
// resetting the session, is killed by the watchdog when its loop hangs and
// restarted with the imported routes kept, and hits the start limit with a
// bad config.
//
// The watchdog check runs the test-hooks build ($OVNBGP_TESTHOOKS_BIN,
// else built with -tags ovnbgp_testhooks): SIGUSR2 hangs its loop. A
// drop-in (testdata/root/etc/vmtest/ovnbgp-watchdog.conf) shortens only
// WatchdogSec, to 10 s; the shipped unit is unchanged.
func TestUnitUnderSystemd(t *testing.T) {
	k := vm.Require(t, modules9p...)
	var missing []string
	for _, p := range hostPrograms {
		if _, err := os.Stat(p); err != nil {
			missing = append(missing, p)
		}
	}
	if _, err := user.Lookup("frr"); err != nil {
		missing = append(missing, "user frr")
	}
	if os.Geteuid() != 0 {
		missing = append(missing, "root (qemu reads the whole root file system for the guest)")
	}
	vm.Need(t, missing...)
	bin := lab.Binary(t)
	// The watchdog check swaps this one in: the daemon with the test-only
	// hook that hangs its loop on SIGUSR2 (-tags ovnbgp_testhooks).
	hooksBin := lab.TestHooksBinary(t)
	dir := t.TempDir()
	guest := k.BuildGuest(t, dir, "./guest")

	initrd := filepath.Join(dir, "initrd.gz")
	a := k.Initramfs(t, initrd, guest)
	// /payload is copied over the VM's root: the shipped files at the
	// places the packages install them, then the test's units and configs.
	a.Copy("payload/etc/systemd/system/ovnbgp.service", "../systemd/ovnbgp.service")
	a.Copy("payload/etc/tmpfiles.d/ovnbgp.conf", "../tmpfiles.d/ovnbgp.conf")
	a.Copy("payload/etc/iproute2/rt_protos.d/ovnbgp.conf", "../rt_protos.d/ovnbgp.conf")
	a.Copy("payload/usr/local/bin/ovnbgp", bin)
	a.Copy("payload/usr/local/libexec/ovnbgp-testhooks", hooksBin)
	a.Copy("payload/usr/local/libexec/ovnbgp-vmcheck", guest)
	a.CopyTree("payload", "testdata/root")
	secret, err := os.ReadFile("testdata/tor-a.secret")
	if err != nil {
		t.Fatal(err)
	}
	a.File("payload/etc/ovnbgp/secrets/tor-a", 0o600, secret)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}

	r := k.Boot(t, vm.Options{
		Initrd:  initrd,
		Memory:  "1024",
		Append:  "console=ttyS0 quiet panic=-1 systemd.show_status=error",
		Args:    []string{"-nic", "none", "-virtfs", "local,path=/,mount_tag=hostroot,security_model=none,readonly=on"},
		Timeout: 15 * time.Minute,
	})
	r.Check(t, checks...)
}
