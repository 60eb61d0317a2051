// Package vmtest proves the shipped systemd unit (packaging/systemd/
// ovnbgp.service, unchanged) under a real systemd as PID 1: the machines
// ovnbgp is developed on do not boot systemd, so TestUnitUnderSystemd boots
// Debian's kernel in qemu (KVM when it works, else TCG), mounts this
// machine's root read-only over 9p under a tmpfs overlay, and runs its
// systemd 252 with an OVN NB ovsdb-server, an FRR peer in a network
// namespace and the binary under test ($OVNBGP_BIN, else built from the
// module). Its watchdog check swaps in the test-hooks build
// ($OVNBGP_TESTHOOKS_BIN, else built with -tags ovnbgp_testhooks), whose
// loop SIGUSR2 hangs, under a drop-in that only shortens WatchdogSec. The
// guest program (./guest) is both the VM's /init and the checker whose
// report the test reads from the serial console.
package vmtest
