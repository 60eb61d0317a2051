// Package vmtest tests package vrf against real VRF devices in a qemu VM:
// the machines ovnbgp is developed on run kernels without VRF support, so
// TestVRFInVM builds the static guest program (./guest) as /init, packs it
// with Debian's vrf.ko and dummy.ko into an initramfs, boots Debian's kernel
// (linux-image-amd64) in qemu-system-x86_64 without network, and reads the
// guest's verdict from the serial console.
package vmtest
