package ovn

import (
	"testing"

	"github.com/ovnbgp/ovnbgp/model"
)

// TestParseNorthdVersion: the release is the first two numbers of the OVN
// version; anything of another shape is unknown, the text kept.
func TestParseNorthdVersion(t *testing.T) {
	for _, tt := range []struct {
		raw          string
		major, minor int
	}{
		{"24.03.2-20.33.0-72.6", 24, 3},
		{"25.03.0-20.41.0-77.1", 25, 3},
		{"24.09.90-20.37.0-73.4", 24, 9}, // a build between releases: the one before
		{"25.03", 25, 3},
		{"", 0, 0},
		{"garbage", 0, 0},
		{"25", 0, 0},
		{"v25.03.0-20.41.0-77.1", 0, 0},
		{"25.x.0-20.41.0-77.1", 0, 0},
		{"0.3.0-1-1.1", 0, 0},
		{"+25.03.0", 0, 0},
		{"99999.1.0", 0, 0},
	} {
		want := model.NorthdVersion{Major: tt.major, Minor: tt.minor, Raw: tt.raw}
		if got := parseNorthdVersion(tt.raw); got != want {
			t.Errorf("parseNorthdVersion(%q) = %+v, want %+v", tt.raw, got, want)
		}
	}
}
