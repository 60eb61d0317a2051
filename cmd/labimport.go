package cmd

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"syscall"
	"text/tabwriter"
	"time"

	"go.uber.org/zap"

	"github.com/ovnbgp/ovnbgp/api"
	"github.com/ovnbgp/ovnbgp/model"
	"github.com/ovnbgp/ovnbgp/ovn/labnb"
)

// labImport is the lab's import half: the rule starts in mode manual, so
// that `plan` shows the static route it would add to GR_<node> while
// nothing is written; the lab then switches the rule to mode auto in its
// config file and reloads (SIGHUP), the daemon applies that plan, and the
// lab shows `routes imported`, the row as the in-memory NB holds it, and
// `explain` for the prefix.
type labImport struct {
	client    *api.Client
	node, nb  string
	files     labFiles
	port      int
	done      <-chan struct{}
	daemonErr func() error
	log       *zap.Logger
}

func (li labImport) run(ctx context.Context, out io.Writer) error {
	prefix := netip.MustParsePrefix(labImportPrefix)
	router := "GR_" + li.node
	section := func(title string, table func(*tabwriter.Writer)) {
		fmt.Fprintf(out, "\n== %s\n", title)
		_ = render(out, "table", nil, table)
	}

	// The plan in mode manual: the add waits for `ovnbgp apply`.
	var pr api.PlanResponse
	if err := li.wait(ctx, "the plan to name "+labImportPrefix, func() (bool, error) {
		var err error
		pr, err = li.client.Plan(ctx)
		return err == nil && hasOVNAdd(pr.Plan.OVN, router, prefix), nil
	}); err != nil {
		return err
	}
	section(fmt.Sprintf("plan (ovnbgp plan): rule %s is in mode manual, so its add waits", labImportRule),
		func(w *tabwriter.Writer) { planTable(w, pr) })

	// Mode auto, as an operator does once the plan looks right: edit the
	// config and reload. `ovnbgp reload` is for root; SIGHUP is the same
	// reload, and the lab's daemon runs in this process.
	text := labConfig(li.node, li.port, li.nb, li.files.sock, "auto")
	if err := writeFileAtomic(li.files.cfg, []byte(text)); err != nil {
		return err
	}
	fmt.Fprintf(out, "\n== rule %s set to mode auto in %s, and reloaded (SIGHUP)\n", labImportRule, li.files.cfg)
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		return fmt.Errorf("reload: %w", err)
	}
	var imp api.Imported
	if err := li.wait(ctx, labImportPrefix+" to be installed on "+router, func() (bool, error) {
		var err error
		imp, err = li.client.Imported(ctx, "")
		if err != nil {
			return false, nil
		}
		for _, r := range imp.OVN {
			if r.Router == router && r.Prefix == prefix && r.State == api.ImportInstalled {
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		return err
	}
	section("imported (ovnbgp routes imported)", func(w *tabwriter.Writer) { importedTable(w, imp) })

	rows, err := labnb.RouterStaticRoutes(ctx, li.nb, router, li.log)
	if err != nil {
		return err
	}
	section(fmt.Sprintf("what the in-memory NB's %s holds now (Logical_Router_Static_Route)", router),
		func(w *tabwriter.Writer) {
			row(w, "ROUTER", "PREFIX", "NEXT HOP", "OUTPUT PORT", "RULE", "OWNER")
			for _, r := range rows {
				owner := r.ExternalIDs["ovnbgp.io/owner"]
				if owner == "" {
					owner = "OVN-Kubernetes"
				}
				row(w, router, r.Prefix, r.NextHop, dash(r.OutputPort), dash(r.ExternalIDs["ovnbgp.io/rule"]), owner)
			}
		})

	e, err := li.client.Explain(ctx, labImportPrefix)
	if err != nil {
		return err
	}
	section("explain "+labImportPrefix+" (ovnbgp explain)", func(w *tabwriter.Writer) { explainTable(w, e) })
	return nil
}

// hasOVNAdd reports whether ops add prefix on router.
func hasOVNAdd(ops []model.OVNOp, router string, prefix netip.Prefix) bool {
	for _, op := range ops {
		if op.Op == model.OpAdd && op.Route.Router == router && op.Route.Prefix == prefix {
			return true
		}
	}
	return false
}

// wait polls cond every 50 ms for at most 10 s, and stops early when the
// daemon does.
func (li labImport) wait(ctx context.Context, what string, cond func() (bool, error)) error {
	deadline := time.After(10 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-li.done:
			return fmt.Errorf("daemon stopped: %v", li.daemonErr())
		case <-deadline:
			return fmt.Errorf("waited 10 s for %s", what)
		case <-tick.C:
		}
	}
}

// writeFileAtomic replaces path with data: a reader sees the old file or
// the new one, never a part.
func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".config-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
