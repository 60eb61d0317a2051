package ovn

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/ovnbgp/ovnbgp/model"
	"github.com/ovnbgp/ovnbgp/ovn/nbdb"
)

// optNorthdVersion is the NB_Global option ovn-northd writes its version
// into. en_global_config_run in OVN's northd/en-global-config.c (24.03
// on; ovnnb_db_run in northd/northd.c before) replaces it with
// ovn_get_internal_version() (lib/ovn-util.c: OVN_PACKAGE_VERSION, the
// Southbound schema version and the internal version, joined by "-")
// whenever it differs, and writes the options back.
const optNorthdVersion = "northd_internal_version"

// readNBGlobal fills out's northd version from NB_Global's options, the
// only column monitored: the last read's when the table did not change. A
// table of another shape than one row (NB_Global has maxRows 1, and
// ovn-nbctl init writes it) leaves the version "", unknown.
func readNBGlobal(out *nbRows, table tableRows, prev *nbRows, same func(...string) bool) error {
	if prev != nil && same(nbdb.NBGlobalTable) {
		out.Northd = prev.Northd
		return nil
	}
	rows, err := table(nbdb.NBGlobalTable)
	if err != nil {
		return err
	}
	out.Northd = ""
	if len(rows) != 1 {
		return nil
	}
	for _, m := range rows {
		g, ok := m.(*nbdb.NBGlobal)
		if !ok {
			return fmt.Errorf("%s cache holds a %T", nbdb.NBGlobalTable, m)
		}
		out.Northd = g.Options[optNorthdVersion]
	}
	return nil
}

// parseNorthdVersion reads the OVN release out of options:northd_internal_version
// ("24.03.2-20.33.0-72.6": release 24.03). Anything else is unknown, Raw
// kept: a development build between releases ("24.09.90") is the release
// before.
func parseNorthdVersion(raw string) model.NorthdVersion {
	v := model.NorthdVersion{Raw: raw}
	pkg, _, _ := strings.Cut(raw, "-")
	parts := strings.Split(pkg, ".")
	if len(parts) < 2 {
		return v
	}
	num := func(s string) (int, bool) {
		if s == "" || len(s) > 4 || strings.TrimLeft(s, "0123456789") != "" {
			return 0, false
		}
		n, err := strconv.Atoi(s)
		return n, err == nil
	}
	major, ok1 := num(parts[0])
	minor, ok2 := num(parts[1])
	if !ok1 || !ok2 || major == 0 {
		return v
	}
	v.Major, v.Minor = major, minor
	return v
}
