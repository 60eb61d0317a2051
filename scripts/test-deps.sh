#!/usr/bin/env bash
# test-deps.sh - install the system packages ovnbgp's tests need, when missing.
#
# The end-to-end suite (test/e2e) runs a real OVN Northbound ovsdb-server and
# FRR in network namespaces. This script installs them on Debian/Ubuntu:
#   frr                  zebra, bgpd, bfdd, staticd, vtysh (the "ToR" BGP peer)
#   frr-pythontools      frr-reload.py: bench/'s FRR(reload) contender (frr-k8s's reload)
#   ovn-central          /usr/share/ovn/ovn-nb.ovsschema
#   ovn-common           ovn-nbctl
#   openvswitch-common   ovsdb-server, ovsdb-tool
#   iproute2             ip (netns, veth), nstat
#   exabgp               a second, scriptable BGP peer that sends hostile and
#                        malformed UPDATEs (the route import tests)
#   bird2                BIRD 2, the third BGP peer of the chaos suite
#                        (test/e2e/chaos_test.go), beside two FRRs
#   gobgpd               Debian's gobgpd 3.10 and its gobgp CLI: a peer of the
#                        peer matrix (test/e2e/peer_matrix_test.go)
#   iptables             cuts the node-tor link without taking it down (BFD tests)
#   file
#   systemd              systemd-analyze (security, verify) and systemd-tmpfiles
#                        check packaging/ offline; PID 1 need not be systemd.
#                        packaging/vmtest boots this systemd as PID 1 in qemu
#                        (with this machine's root, frr and ovn read over 9p)
#   podman, runc         packaging/: make image, run the image, the sandbox
#                        the packages are installed and removed in, and the
#                        MachineConfig's ovnbgp-install copying the binary
#                        out of it (runc: crun refuses this host's hybrid
#                        cgroups); storage of the test's own, nothing pulled
#   rpm                  rpm -qlp on the package make package builds, and
#                        rpm -i / -e of it in packaging/'s sandbox (a podman
#                        container on an overlay of this machine's root)
#   gcc, libc6-dev       the C compiler and headers cgo needs for `make race`
#                        (the race detector runs with cgo on)
#   qemu-system-x86      the VMs of vrf/vmtest (real VRF devices: the host
#   linux-image-amd64    kernel may have none) and packaging/vmtest (the unit
#                        under systemd); Debian's kernel with vrf.ko, 9p and
#                        overlay modules boots there. INITRD=No skips the kernel package's
#                        initramfs hook (the test makes its own initramfs);
#                        no boot loader is installed or updated.
#
# Idempotent and quiet: when everything is present it only checks and exits.
# apt-get update runs only when something must be installed. Not root: it
# installs nothing and says so (the e2e tests then skip, unless CI=true).
# No daemon is started: a /usr/sbin/policy-rc.d that exits 101 is created if
# absent, so package postinst scripts do not start frr or ovn services.
set -euo pipefail

# package -> a file it ships that the tests use
declare -A probe=(
  [frr]=/usr/lib/frr/bgpd
  [frr-pythontools]=/usr/lib/frr/frr-reload.py
  [ovn-central]=/usr/share/ovn/ovn-nb.ovsschema
  [ovn-common]=/usr/bin/ovn-nbctl
  [openvswitch-common]=/usr/sbin/ovsdb-server
  [iproute2]=/usr/sbin/ip
  [iptables]=/usr/sbin/iptables
  [exabgp]=/usr/sbin/exabgp
  [bird2]=/usr/sbin/bird
  [gobgpd]=/usr/bin/gobgpd
  [file]=/usr/bin/file
  [gcc]=/usr/bin/gcc
  [libc6-dev]=/usr/include/stdio.h
  [qemu-system-x86]=/usr/bin/qemu-system-x86_64
  [systemd]=/usr/bin/systemd-analyze
  [podman]=/usr/bin/podman
  [runc]=/usr/sbin/runc
  [rpm]=/usr/bin/rpm
)
need=()
for pkg in frr frr-pythontools ovn-central ovn-common openvswitch-common iproute2 iptables exabgp bird2 gobgpd file gcc libc6-dev qemu-system-x86 systemd podman runc rpm; do
  [ -e "${probe[$pkg]}" ] || need+=("$pkg")
done
# a kernel for the VM tests: any /boot/vmlinuz-VER with VER's vrf.ko and 9p.ko
have_kernel=
for k in /boot/vmlinuz-*; do
  m="/lib/modules/${k#/boot/vmlinuz-}/kernel"
  [ -e "$k" ] && [ -e "$m/drivers/net/vrf.ko" ] && [ -e "$m/fs/9p/9p.ko" ] && have_kernel=1
done
[ -n "$have_kernel" ] || need+=(linux-image-amd64)
[ ${#need[@]} -eq 0 ] && exit 0

if [ "$(id -u)" != 0 ]; then
  echo "test-deps: missing packages: ${need[*]} (not root: not installing; e2e tests will skip)" >&2
  exit 0
fi
if ! command -v apt-get >/dev/null; then
  echo "test-deps: missing packages: ${need[*]} and no apt-get: install them by hand" >&2
  exit 1
fi

if [ ! -e /usr/sbin/policy-rc.d ]; then
  printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
  chmod 0755 /usr/sbin/policy-rc.d
fi
echo "test-deps: installing ${need[*]}" >&2
export DEBIAN_FRONTEND=noninteractive INITRD=No
apt-get update -qq >/dev/null
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
