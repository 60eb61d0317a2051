package doctor

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/ovnbgp/ovnbgp/api"
	"github.com/ovnbgp/ovnbgp/config"
	"github.com/ovnbgp/ovnbgp/model"
	"github.com/ovnbgp/ovnbgp/nd"
	"github.com/ovnbgp/ovnbgp/ovn"
	"github.com/ovnbgp/ovnbgp/vrf"
)

// Env is the node as the checks see it. Every method only reads.
type Env interface {
	// Files is the host's file tree rooted at / (paths without the
	// leading slash: "proc/net/tcp"); symlinks are read with
	// fs.ReadLink ("proc/1/fd/3" -> "socket:[123]").
	Files() fs.FS
	// Northbound connects to NB with cfg (address and TLS), waits for a
	// first full read within ctx, and returns node's view.
	Northbound(ctx context.Context, cfg config.OVN, node string) (NBView, error)
	// Routing opens the host's routing tables.
	Routing() (Routing, error)
	// HTTP sends a request to the EC2 metadata service or the EC2 API.
	HTTP(req *http.Request) (*http.Response, error)
	// Getenv reads an environment variable (the AWS endpoint overrides).
	Getenv(key string) string
	// Daemon asks the daemon on socket for its peers; an error when it
	// does not answer.
	Daemon(ctx context.Context, socket string) (*DaemonView, error)
}

// NBView is what doctor reads from NB for one node.
type NBView struct {
	// Endpoint is the endpoint that answered.
	Endpoint string
	// Source says whether it is ovn.northbound (configured) or was found
	// among ovn.northboundSockets (discovered); Tried is then every socket
	// path looked at and what was there.
	Source config.NBSource
	Tried  []config.NBCandidate
	// Snapshot is node's networks and gateway routers.
	Snapshot model.Snapshot
}

// Routing is the host's routing, read only (vrf.Probe).
type Routing interface {
	// RouteTo is the device the kernel routes dst through.
	RouteTo(dst netip.Addr) (device string, err error)
	// VRFs are the host's VRF devices.
	VRFs() ([]model.VRFDevice, error)
	// TableProtocols counts a table's routes by protocol.
	TableProtocols(table uint32) (map[int]int, error)
	// Link is a device's IPv6 link-local addresses and neighbours (the
	// unnumbered peers' checks).
	Link(dev string) (nd.LinkFacts, error)
	Close()
}

// DaemonView is what the running daemon says.
type DaemonView struct {
	Peers []model.PeerStatus
}

// Host is the real Env: the files under Root, netlink, NB, HTTP and the
// daemon's socket of the machine doctor runs on.
type Host struct {
	// Root is the root of the file tree ("/").
	Root string
	// Client sends the AWS requests; nil = a client without proxy.
	Client *http.Client
}

// Files implements Env.
func (h Host) Files() fs.FS {
	root := h.Root
	if root == "" {
		root = "/"
	}
	return os.DirFS(root)
}

// Northbound implements Env with ovn.Dial: it waits for the first full
// read of NB, or for ctx.
func (h Host) Northbound(ctx context.Context, cfg config.OVN, node string) (NBView, error) {
	poke := make(chan struct{}, 1)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	c, err := ovn.Dial(ctx, cfg, nil, func() {
		select {
		case poke <- struct{}{}:
		default:
		}
	})
	if err != nil {
		return NBView{}, err
	}
	defer c.Close()
	for {
		if snap, ok := c.Snapshot(node); ok {
			st := c.Status()
			return NBView{Endpoint: st.Current, Source: st.Source, Tried: st.Tried, Snapshot: snap}, nil
		}
		select {
		case <-poke:
		case <-ctx.Done():
			st := c.Status()
			if st.LastError != "" {
				return NBView{}, fmt.Errorf("%s: %s", st.Endpoint, st.LastError)
			}
			return NBView{}, fmt.Errorf("%s: no answer: %w", st.Endpoint, context.Cause(ctx))
		}
	}
}

// Routing implements Env with vrf.Probe and an nd.Reader.
func (Host) Routing() (Routing, error) {
	p, err := vrf.OpenProbe()
	if err != nil {
		return nil, err
	}
	r, err := nd.NewReader(nil)
	if err != nil {
		p.Close()
		return nil, err
	}
	return hostRouting{Probe: p, nd: r}, nil
}

// hostRouting is the real Routing: routes from vrf.Probe, links from nd.
type hostRouting struct {
	*vrf.Probe
	nd *nd.Reader
}

func (h hostRouting) Link(dev string) (nd.LinkFacts, error) { return h.nd.Link(dev) }

func (h hostRouting) Close() {
	h.Probe.Close()
	h.nd.Close()
}

// HTTP implements Env. Requests never go through a proxy: the metadata
// service is link-local.
func (h Host) HTTP(req *http.Request) (*http.Response, error) {
	c := h.Client
	if c == nil {
		c = &http.Client{Transport: &http.Transport{Proxy: nil}, Timeout: 10 * time.Second}
	}
	return c.Do(req)
}

// Getenv implements Env.
func (Host) Getenv(key string) string { return os.Getenv(key) }

// Daemon implements Env through the control API.
func (Host) Daemon(ctx context.Context, socket string) (*DaemonView, error) {
	if _, err := os.Stat(socket); err != nil {
		return nil, err
	}
	peers, err := api.NewClient(socket).Peers(ctx)
	if err != nil {
		return nil, err
	}
	return &DaemonView{Peers: peers}, nil
}

// oneLine joins a multi-line message into one line.
func oneLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i := range lines {
		lines[i] = strings.TrimSpace(lines[i])
	}
	return strings.Join(lines, "; ")
}

// errNotFound is a file that is not there.
func notExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }
