// Command probe is a throwaway /init: it mounts the host root (9p, read-only)
// under a tmpfs overlay, adds test units and execs systemd as PID 1.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

var mods = []string{
	"kernel/drivers/virtio/virtio_ring.ko", "kernel/drivers/virtio/virtio.ko",
	"kernel/drivers/virtio/virtio_pci_legacy_dev.ko", "kernel/drivers/virtio/virtio_pci_modern_dev.ko",
	"kernel/drivers/virtio/virtio_pci.ko", "kernel/fs/netfs/netfs.ko", "kernel/fs/fscache/fscache.ko",
	"kernel/net/9p/9pnet.ko", "kernel/net/9p/9pnet_virtio.ko", "kernel/fs/9p/9p.ko", "kernel/fs/overlayfs/overlay.ko",
}

func fail(f string, a ...any) {
	fmt.Printf("probe: FAIL "+f+"\n", a...)
	unix.Sync()
	_ = unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF)
	select {}
}

func main() {
	for _, m := range mods {
		f, err := os.Open("/mods/" + filepath.Base(m))
		if err != nil {
			fail("%v", err)
		}
		if err := unix.FinitModule(int(f.Fd()), "", 0); err != nil && err != unix.EEXIST {
			fail("load %s: %v", m, err)
		}
		f.Close()
	}
	for _, d := range []string{"/lower", "/upper", "/newroot"} {
		_ = os.MkdirAll(d, 0o755)
	}
	if err := unix.Mount("hostroot", "/lower", "9p", unix.MS_RDONLY, "trans=virtio,version=9p2000.L,msize=262144"); err != nil {
		fail("mount 9p: %v", err)
	}
	if err := unix.Mount("tmpfs", "/upper", "tmpfs", 0, "mode=0755"); err != nil {
		fail("tmpfs: %v", err)
	}
	_ = os.MkdirAll("/upper/u", 0o755)
	_ = os.MkdirAll("/upper/w", 0o755)
	if err := unix.Mount("overlay", "/newroot", "overlay", 0, "lowerdir=/lower,upperdir=/upper/u,workdir=/upper/w"); err != nil {
		fail("overlay: %v", err)
	}
	// The test's files, copied from /payload into the new root.
	err := filepath.Walk("/payload", func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() {
			return err
		}
		rel, _ := filepath.Rel("/payload", p)
		dst := filepath.Join("/newroot", rel)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, b, fi.Mode().Perm())
	})
	if err != nil {
		fail("payload: %v", err)
	}
	if err := unix.Chdir("/newroot"); err != nil {
		fail("%v", err)
	}
	if err := unix.Mount(".", "/", "", unix.MS_MOVE, ""); err != nil {
		fail("move: %v", err)
	}
	if err := unix.Chroot("."); err != nil {
		fail("chroot: %v", err)
	}
	_ = unix.Chdir("/")
	fmt.Println("probe: exec systemd")
	err = unix.Exec("/lib/systemd/systemd", []string{"/lib/systemd/systemd", "--system", "--unit=u8.target", "--show-status=1"}, os.Environ())
	fail("exec systemd: %v", err)
}
