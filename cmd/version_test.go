package cmd

import (
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestBuildVersion: the link-time stamps win field by field; what is not
// stamped comes from the go command's VCS stamps and module list (a
// replaced module reports its replacement); with no build information at
// all the version is "unknown".
func TestBuildVersion(t *testing.T) {
	bi := &debug.BuildInfo{
		GoVersion: "go1.99.1",
		Main:      debug.Module{Path: "github.com/ovnbgp/ovnbgp", Version: "v0.0.0-20261201072435-e7f40cf07064+dirty"},
		Deps: []*debug.Module{
			{Path: gobgpModule, Version: "v4.8.0", Replace: &debug.Module{Path: "example.com/gobgp-fork", Version: "v4.8.1-fix"}},
			{Path: libovsdbModule, Version: "v0.7.0"},
			{Path: "github.com/spf13/cobra", Version: "v1.10.2"},
		},
		Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "e7f40cf07064c55f3b698c1da73928348be7a2af"},
			{Key: "vcs.modified", Value: "true"},
			{Key: "vcs.time", Value: "2026-12-01T07:24:35Z"},
		},
	}
	noVCS := &debug.BuildInfo{GoVersion: "go1.99.1", Main: debug.Module{Version: "(devel)"}}
	revOnly := &debug.BuildInfo{GoVersion: "go1.99.1", Main: debug.Module{Version: "(devel)"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.modified", Value: "false"}}}
	platform := versionInfo{OS: runtime.GOOS, Arch: runtime.GOARCH}
	with := func(v versionInfo) versionInfo { v.OS, v.Arch = platform.OS, platform.Arch; return v }
	for _, tc := range []struct {
		name string
		s    stamps
		bi   *debug.BuildInfo
		want versionInfo
	}{
		{"vcs only", stamps{}, bi, with(versionInfo{Version: "v0.0.0-20261201072435-e7f40cf07064+dirty",
			Commit: "e7f40cf07064c55f3b698c1da73928348be7a2af", TreeState: "dirty", CommitDate: "2026-12-01T07:24:35Z",
			Go: "go1.99.1", GoBGP: "v4.8.1-fix", Libovsdb: "v0.7.0"})},
		{"stamps win", stamps{"v1.2.3", "abc", "clean", "2026-01-01T00:00:00Z"}, bi, with(versionInfo{Version: "v1.2.3",
			Commit: "abc", TreeState: "clean", CommitDate: "2026-01-01T00:00:00Z", Go: "go1.99.1", GoBGP: "v4.8.1-fix", Libovsdb: "v0.7.0"})},
		{"version stamped only", stamps{version: "v1.2.3"}, bi, with(versionInfo{Version: "v1.2.3",
			Commit: "e7f40cf07064c55f3b698c1da73928348be7a2af", TreeState: "dirty", CommitDate: "2026-12-01T07:24:35Z",
			Go: "go1.99.1", GoBGP: "v4.8.1-fix", Libovsdb: "v0.7.0"})},
		{"devel, revision", stamps{}, revOnly, with(versionInfo{Version: "devel-0123456789ab", Commit: "0123456789abcdef0123", TreeState: "clean", Go: "go1.99.1"})},
		{"devel", stamps{}, noVCS, with(versionInfo{Version: "devel", Go: "go1.99.1"})},
		{"no build info", stamps{}, nil, with(versionInfo{Version: "unknown", Go: runtime.Version()})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, buildVersion(tc.s, tc.bi)); diff != "" {
				t.Errorf("buildVersion (-want +got):\n%s", diff)
			}
		})
	}
}
