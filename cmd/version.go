package cmd

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// Link-time stamps, set by the Makefile (make build, make package) from git:
//
//	-X github.com/ovnbgp/ovnbgp/cmd.version=v1.2.3
//	-X github.com/ovnbgp/ovnbgp/cmd.commit=<full hash>
//	-X github.com/ovnbgp/ovnbgp/cmd.treeState=clean|dirty
//	-X github.com/ovnbgp/ovnbgp/cmd.commitDate=<RFC 3339>
//
// They are never written at run time. An unstamped binary falls back on the
// VCS information the go command records (go build in a git clone).
var (
	version    = ""
	commit     = ""
	treeState  = ""
	commitDate = ""
)

// versionInfo is what `ovnbgp version` prints. commitDate stands in for
// a build date: it is the same for every build of a commit, so builds stay
// reproducible.
type versionInfo struct {
	Version    string `json:"version"`
	Commit     string `json:"commit"`
	TreeState  string `json:"treeState"`
	CommitDate string `json:"commitDate"`
	Go         string `json:"go"`
	OS         string `json:"os"`
	Arch       string `json:"arch"`
	GoBGP      string `json:"gobgp"`
	Libovsdb   string `json:"libovsdb"`
}

// Modules whose versions `ovnbgp version` reports.
const (
	gobgpModule    = "github.com/osrg/gobgp/v4"
	libovsdbModule = "github.com/ovn-org/libovsdb"
)

// stamps are the link-time values (empty: not stamped).
type stamps struct{ version, commit, treeState, commitDate string }

// buildVersion collects the stamps, falling back on bi (nil: no build
// information) field by field.
func buildVersion(s stamps, bi *debug.BuildInfo) versionInfo {
	v := versionInfo{Version: s.version, Commit: s.commit, TreeState: s.treeState, CommitDate: s.commitDate,
		Go: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH}
	if bi == nil {
		if v.Version == "" {
			v.Version = "unknown"
		}
		return v
	}
	var rev, modified, vcsTime string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		case "vcs.time":
			vcsTime = s.Value
		}
	}
	if v.Commit == "" {
		v.Commit = rev
	}
	if v.TreeState == "" {
		switch modified {
		case "true":
			v.TreeState = "dirty"
		case "false":
			v.TreeState = "clean"
		}
	}
	if v.CommitDate == "" {
		v.CommitDate = vcsTime
	}
	if v.Version == "" {
		switch mv := bi.Main.Version; {
		case mv != "" && mv != "(devel)":
			v.Version = mv
		case rev != "":
			v.Version = "devel-" + rev[:min(12, len(rev))]
		default:
			v.Version = "devel"
		}
	}
	if bi.GoVersion != "" {
		v.Go = bi.GoVersion
	}
	for _, d := range bi.Deps {
		ver := d.Version
		if d.Replace != nil { // a fork or a local copy: report what was built
			ver = d.Replace.Version
		}
		switch d.Path {
		case gobgpModule:
			v.GoBGP = ver
		case libovsdbModule:
			v.Libovsdb = ver
		}
	}
	return v
}

// readVersion is buildVersion of this binary.
func readVersion() versionInfo {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		bi = nil
	}
	return buildVersion(stamps{version, commit, treeState, commitDate}, bi)
}

// versionString is the version the daemon reports (status, metrics, logs).
func versionString() string { return readVersion().Version }

func newVersionCommand(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, the commit, and the Go, gobgp and libovsdb versions",
		Long: `Print the version ovnbgp was built as, the git commit (and whether the tree had
uncommitted changes), the commit's date, the Go version and platform, and the
versions of the embedded gobgp and libovsdb modules.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			v := readVersion()
			if o.output != "table" {
				return render(o.stdout, o.output, v, nil)
			}
			c := orUnknown(v.Commit)
			if v.TreeState != "" {
				c += " (" + v.TreeState + ")"
			}
			_, err := fmt.Fprintf(o.stdout, "ovnbgp %s\ncommit %s, %s\n%s %s/%s, gobgp %s, libovsdb %s\n",
				v.Version, c, orUnknown(v.CommitDate), v.Go, v.OS, v.Arch, orUnknown(v.GoBGP), orUnknown(v.Libovsdb))
			return err
		},
	}
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}
