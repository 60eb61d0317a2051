package labnb_test

import (
	"testing"

	"github.com/go-logr/stdr"

	_ "github.com/ovnbgp/ovnbgp/ovn/labnb"
)

// TestImportKeepsLibovsdbQuiet: linking the lab (and so libovsdb's server,
// whose init sets stdr's verbosity to 5) leaves stdr's verbosity at 0 for
// the rest of the binary, the daemon included (issue 5 item 18).
func TestImportKeepsLibovsdbQuiet(t *testing.T) {
	if v := stdr.SetVerbosity(0); v != 0 {
		t.Errorf("stdr verbosity after importing labnb = %d, want 0", v)
	}
}
