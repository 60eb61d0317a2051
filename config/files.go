package config

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// Size caps for the files Load reads. Past them the file is refused, not
// read: /dev/zero or a runaway generator cannot fill the daemon's memory.
const (
	// MaxConfigSize is the largest configuration file (1 MiB).
	MaxConfigSize = 1 << 20
	// MaxSecretFileSize is the largest secret file: a TCP MD5 key is at
	// most 80 bytes, so anything much larger is not a secret file.
	MaxSecretFileSize = 1024
)

// readRegular reads the regular file at path (a symlink is followed),
// without blocking: it opens with O_NONBLOCK, so a FIFO with no writer
// cannot hang the caller, checks the opened file (fstat, so the file
// checked is the file read) and refuses anything but a regular file, and
// reads at most limit bytes, refusing a larger file. It returns the file's
// information for mode checks. Errors name the path and say what is wrong.
func readRegular(path string, limit int64) ([]byte, fs.FileInfo, error) {
	// Look before opening: opening some devices acts (a watchdog arms, a
	// tape rewinds), so anything but a regular file is refused unopened.
	before, err := os.Stat(path)
	if err != nil {
		return nil, nil, fmt.Errorf("cannot read %q: %w", path, unwrapPath(err))
	}
	if !before.Mode().IsRegular() {
		return nil, nil, notRegular(path, before.Mode())
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("cannot read %q: %w", path, unwrapPath(err))
	}
	defer f.Close()
	// fstat the opened file, so the file checked is the file read: one
	// swapped in between the two looks is refused.
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, fmt.Errorf("cannot read %q: %w", path, unwrapPath(err))
	}
	if !fi.Mode().IsRegular() {
		return nil, nil, notRegular(path, fi.Mode())
	}
	if !os.SameFile(before, fi) {
		return nil, nil, fmt.Errorf("%q changed while it was being opened: try again", path)
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, nil, fmt.Errorf("cannot read %q: %w", path, unwrapPath(err))
	}
	if int64(len(data)) > limit {
		return nil, nil, fmt.Errorf("%q is larger than %d bytes: refused", path, limit)
	}
	return data, fi, nil
}

// notRegular says what a non-regular file is.
func notRegular(path string, m fs.FileMode) error {
	kind := "not a regular file"
	switch {
	case m.IsDir():
		kind = "a directory"
	case m&fs.ModeNamedPipe != 0:
		kind = "a named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		kind = "a socket"
	case m&fs.ModeCharDevice != 0:
		kind = "a character device"
	case m&fs.ModeDevice != 0:
		kind = "a block device"
	}
	return fmt.Errorf("%q is %s, not a regular file: give the path of a regular file (a symlink to one is fine)", path, kind)
}

// unwrapPath drops the *fs.PathError wrapper, whose text repeats the path.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// ReadRegularFile reads the regular file at path (a symlink is followed)
// of at most limit bytes, without ever blocking: a FIFO, a device, a
// directory or a socket is refused at once with an error saying what it
// is. Other packages read the files the configuration names (TLS
// certificates) with it.
func ReadRegularFile(path string, limit int64) ([]byte, error) {
	data, _, err := readRegular(path, limit)
	return data, err
}
