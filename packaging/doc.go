// Package packaging holds what installs ovnbgp on a node: the hardened
// systemd unit (systemd/ovnbgp.service), the tmpfiles.d entry for its
// runtime directory (tmpfiles.d/), the rt_protos.d name of its route
// protocol and the MachineConfig (machineconfig/). It has no Go code of its
// own: its tests check those files with systemd's own tools
// (systemd-analyze security and verify, systemd-tmpfiles) and against the
// daemon's defaults; packaging/vmtest runs the unit under a real systemd as
// PID 1 in a qemu VM.
package packaging
