// Package packaging holds what installs ovnbgp on a node: the hardened
// systemd unit (systemd/ovnbgp.service), the tmpfiles.d entry for its
// runtime directory (tmpfiles.d/), the rt_protos.d name of its route
// protocol, the container image that carries the binary (Containerfile),
// the RHCOS MachineConfigs that copy the binary out of that image
// (machineconfig/: Butane sources, the YAML they render to, ovnbgp-install)
// and the deb and rpm packages (nfpm/, built by scripts/package.sh).
//
// It has no Go code of its own. Its tests check those files with the real
// tools: systemd-analyze security and verify, systemd-tmpfiles, Butane
// (pinned in tools/go.mod), podman, nfpm, dpkg and rpm; and against the
// daemon's defaults and its command tree. packaging/vmtest runs the unit
// under a real systemd as PID 1 in a qemu VM.
package packaging
