package ovn

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/ovnbgp/ovnbgp/config"
)

// TestTLSFilesNeverBlock: a FIFO or /dev/zero named as a TLS file is
// refused at once (a blocking read would hang Dial, hence a reload).
func TestTLSFilesNeverBlock(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "ca.pem")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		tls  config.TLS
		want string
	}{
		{config.TLS{CAFile: fifo}, "ovn.tls.caFile: \"" + fifo + "\" is a named pipe (FIFO)"},
		{config.TLS{CAFile: "/dev/zero"}, "ovn.tls.caFile: \"/dev/zero\" is a character device"},
	} {
		if _, err := tlsConfig(tc.tls); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("tlsConfig(%+v) = %v, want an error with %q", tc.tls, err, tc.want)
		}
	}
}
