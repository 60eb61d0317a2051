package e2e

import (
	"fmt"
	"net/netip"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ovnbgp/ovnbgp/model"
	"github.com/ovnbgp/ovnbgp/test/e2e/lab"
)

// The hostile-input suite (issue 9 item 2): one lab, the real daemon with
// import rules into OVN (GR_node1) and kernel table 100, and one raw-socket
// speaker per case (hostile_wire_test.go), each dialing the daemon's port
// 179 from its own address of the tor namespace, as its own passive peer.
// The cases run in parallel. Each asserts the RFC's action for its input
// (treat-as-withdraw, attribute discard, session reset with the
// NOTIFICATION the RFC names, or a rejection by the import filter with its
// reason), that the session is kept where the RFC keeps it (a fresh route
// announced after the hostile message is installed, and no NOTIFICATION
// came), and that the daemon is alive. Around them: `ip monitor route` and
// an NB monitor record every route and row ovnbgp ever installed, and none
// may be outside the legitimate space; the daemon's RSS stays bounded.

const (
	hostileASN = 65002
	// the legitimate space: what the rule "legit" accepts
	legitSpace = "10.99.0.0/16"
	legitMax   = 24
	// rssLimit bounds the daemon's resident memory through the suite.
	rssLimit = 256 << 20
)

// daemonAddr is where the raw speakers dial: the node's address on the
// import subnet.
var daemonAddr = netip.AddrPortFrom(lab.NodeExtIPv4.Addr(), 179)

// outcome is what a case expects of the daemon.
type outcome int

const (
	// treat-as-withdraw: the victim, installed before, is withdrawn by the
	// hostile UPDATE; the session is kept
	outWithdraw outcome = iota
	// attribute discard (or a harmless oddity): the hostile UPDATE's route
	// is installed; the session is kept
	outInstall
	// session reset: the daemon sends NOTIFICATION code/sub and closes; the
	// victim, installed before, is withdrawn
	outReset
	// the import filter rejects the hostile route with reason; the session
	// is kept
	outReject
	// a custom check (OPEN and connection cases)
	outCustom
)

// hcase is one row of the suite.
type hcase struct {
	name string
	// rule is the import rule the case's peer is listed in besides
	// "legit": "wide" (accept entries over protected space and 0/0 up to
	// /1, so that those are rejected as protected or default), "any" (0/0
	// up to /32: only the filter's own checks stand), "cap" (instead of
	// legit: at most 2 routes).
	rule string
	out  outcome
	// msg is the hostile UPDATE for the peer's address and the victim.
	msg func(c *hctx) []byte
	// code and sub: the NOTIFICATION of outReset.
	code, sub byte
	// reason (outReject) is part of the route's reason in `routes learned
	// --rejected`; prefix the rejected prefix (default: the victim).
	reason string
	prefix string
	// open, when set, is the case's OPEN (default stdOpen).
	open func(c *hctx) []byte
	// run replaces the standard flow (outCustom).
	run func(t *testing.T, c *hctx)
	// twoOctet: the case's OPEN has no four-octet AS capability, so its
	// well-formed UPDATEs carry a two-octet AS_PATH.
	twoOctet bool
	// deviation, when set, says how gobgp v4.8.0 departs from the RFC
	// here and what the RFC says: out is then what gobgp does (pinned, so
	// that a gobgp upgrade that fixes it fails the case and the row is
	// updated), always no less safe for imports. Listed in README.md.
	deviation string
}

// hctx is a running case: its peer, its prefixes and its session.
type hctx struct {
	w      *hostileWorld
	i      int
	peer   string
	addr   netip.Addr
	canary netip.Prefix // announced after the hostile input: proves the session kept
	victim netip.Prefix // installed before (withdraw, reset) or by the hostile UPDATE
	s      *rawSession
	as2    bool // two-octet AS session
}

// hostileWorld is the suite's lab.
type hostileWorld struct {
	*importWorld
	mu        sync.Mutex
	snap      hsnap
	gen       int
	changed   chan struct{}
	forbidden []netip.Prefix // never installed at the end, nor ever on the way
}

// hsnap is one reading of what is installed: kernel table 100 (protocol
// 200) and GR_node1's owned rows, each as prefix -> next hops.
type hsnap struct {
	kernel map[string][]string
	ovn    map[string][]string
	// kdup lists the kernel routes seen twice (same prefix, another
	// metric)
	kdup []string
	err  error
}

func peerAddr(i int) netip.Addr { return netip.AddrFrom4([4]byte{203, 0, 113, byte(100 + i)}) }

// std is the well-formed attribute set of c's peer: ORIGIN IGP, AS_PATH
// [65002], NEXT_HOP the peer's address.
func (c *hctx) std() []byte {
	if c.as2 {
		return cat(attrOrigin(0), attrASPath2(hostileASN), attrNextHop(c.addr))
	}
	return cat(attrOrigin(0), attrASPath4(hostileASN), attrNextHop(c.addr))
}

// announce is a well-formed UPDATE for ps.
func (c *hctx) announce(ps ...netip.Prefix) []byte { return updateMsg(nil, c.std(), nlri(ps...)) }

func (c *hctx) victimNLRI() []byte { return nlri(c.victim) }

// mpReach is an MP_REACH_NLRI for IPv4 unicast with next hop nh (its
// length as given) and NLRI reach.
func mpReach(nh []byte, reach []byte) []byte {
	v := append([]byte{0, 1, 1, byte(len(nh))}, nh...)
	v = append(v, 0)
	return attr(0x80, 14, append(v, reach...))
}

func hostileCases() []hcase {
	std := func(c *hctx, extra ...[]byte) []byte { return cat(append([][]byte{c.std()}, extra...)...) }
	upd := func(attrs func(c *hctx) []byte) func(c *hctx) []byte {
		return func(c *hctx) []byte { return updateMsg(nil, attrs(c), c.victimNLRI()) }
	}
	withAttr := func(a []byte) func(c *hctx) []byte {
		return upd(func(c *hctx) []byte { return std(c, a) })
	}
	nh := func(a string) func(c *hctx) []byte {
		return upd(func(c *hctx) []byte {
			return cat(attrOrigin(0), attrASPath4(hostileASN), attrNextHop(netip.MustParseAddr(a)))
		})
	}
	reject := func(name, rule, prefix, nextHop, reason string) hcase {
		return hcase{name: name, rule: rule, out: outReject, prefix: prefix, reason: reason,
			msg: func(c *hctx) []byte {
				n := c.addr
				if nextHop != "" {
					n = netip.MustParseAddr(nextHop)
				}
				return updateMsg(nil, cat(attrOrigin(0), attrASPath4(hostileASN), attrNextHop(n)), nlri(netip.MustParsePrefix(prefix)))
			}}
	}
	return []hcase{
		// RFC 7606 7.1: ORIGIN
		{name: "origin-value-3", out: outWithdraw, msg: upd(func(c *hctx) []byte {
			return cat(attr(0x40, 1, []byte{3}), attrASPath4(hostileASN), attrNextHop(c.addr))
		})},
		{name: "origin-length-2", out: outWithdraw, msg: upd(func(c *hctx) []byte {
			return cat(attr(0x40, 1, []byte{0, 0}), attrASPath4(hostileASN), attrNextHop(c.addr))
		})},
		// 7.2: AS_PATH
		{name: "as-path-segment-overrun", out: outWithdraw, msg: upd(func(c *hctx) []byte {
			return cat(attrOrigin(0), attr(0x40, 2, []byte{2, 5, 0, 0, 0xfd, 0xea}), attrNextHop(c.addr))
		})},
		{name: "as-path-confed-from-ebgp", out: outWithdraw, msg: upd(func(c *hctx) []byte {
			return cat(attrOrigin(0), attr(0x40, 2, []byte{3, 1, 0, 0, 0xfd, 0xea}), attrNextHop(c.addr))
		})},
		// 7.3: NEXT_HOP
		{name: "next-hop-length-5", out: outWithdraw, msg: upd(func(c *hctx) []byte {
			return cat(attrOrigin(0), attrASPath4(hostileASN), attr(0x40, 3, append(c.addr.AsSlice(), 0)))
		})},
		{name: "next-hop-zero", out: outWithdraw, msg: nh("0.0.0.0")},
		{name: "next-hop-class-e", out: outWithdraw, msg: nh("240.0.0.1")},
		{name: "next-hop-loopback", out: outWithdraw, msg: nh("127.0.0.1")},
		// 7.4: MED
		{name: "med-length-3", out: outWithdraw, msg: withAttr(attr(0x80, 4, []byte{0, 0, 1}))},
		// 7.5: LOCAL_PREF from an external peer: attribute discard
		{name: "local-pref-from-ebgp", out: outInstall, msg: withAttr(attr(0x40, 5, []byte{0, 0, 0, 200}))},
		{name: "local-pref-length-2-from-ebgp", out: outWithdraw, msg: withAttr(attr(0x40, 5, []byte{0, 200})),
			deviation: "a LOCAL_PREF of length 2 from an eBGP peer is treated as withdraw; RFC 7606 7.5 says attribute discard (from an external peer it is disregarded whatever its length)"},
		// 7.6, 7.7: ATOMIC_AGGREGATE and AGGREGATOR lengths: attribute discard
		{name: "atomic-aggregate-length-1", out: outInstall, msg: withAttr(attr(0x40, 6, []byte{1}))},
		{name: "aggregator-length-5", out: outInstall, msg: withAttr(attr(0xc0, 7, []byte{0, 0, 0xfd, 0xea, 1}))},
		// 7.8: COMMUNITIES length not a non-zero multiple of 4
		{name: "communities-length-3", out: outWithdraw, msg: withAttr(attr(0xc0, 8, []byte{0, 1, 2}))},
		{name: "communities-length-0", out: outWithdraw, msg: withAttr(attr(0xc0, 8, nil))},
		// 7.9, 7.10: ORIGINATOR_ID and CLUSTER_LIST from an external peer
		{name: "originator-id-from-ebgp", out: outInstall, msg: withAttr(attr(0x80, 9, []byte{198, 51, 100, 9}))},
		{name: "cluster-list-from-ebgp", out: outInstall, msg: withAttr(attr(0x80, 10, []byte{198, 51, 100, 9}))},
		// 7.14, RFC 8092: extended and large communities lengths
		{name: "ext-communities-length-5", out: outWithdraw, msg: withAttr(attr(0xc0, 16, []byte{0, 2, 0xfd, 0xea, 1}))},
		{name: "large-communities-length-11", out: outWithdraw, msg: withAttr(attr(0xc0, 32, make([]byte, 11)))},
		// 3.c: flags in conflict (ORIGIN marked optional)
		{name: "origin-flagged-optional", out: outWithdraw, msg: upd(func(c *hctx) []byte {
			return cat(attr(0xc0, 1, []byte{0}), attrASPath4(hostileASN), attrNextHop(c.addr))
		})},
		// 3.d: a well-known mandatory attribute missing
		{name: "missing-origin", out: outWithdraw, msg: upd(func(c *hctx) []byte {
			return cat(attrASPath4(hostileASN), attrNextHop(c.addr))
		})},
		// 3.g: an attribute twice: all but the first discarded
		{name: "duplicate-origin", out: outInstall, msg: withAttr(attrOrigin(2))},
		// 3.g: MP_REACH_NLRI twice: Malformed Attribute List
		{name: "duplicate-mp-reach", out: outReset, code: 3, sub: 1, msg: func(c *hctx) []byte {
			m := mpReach(c.addr.AsSlice(), nlri(c.victim))
			return updateMsg(nil, cat(attrOrigin(0), attrASPath4(hostileASN), m, m), nil)
		}},
		// 7.11: MP_REACH_NLRI next hop length inconsistent: the NLRI cannot
		// be located, session reset
		{name: "mp-reach-next-hop-length-5", out: outReset, code: 3, sub: 5 /* Attribute Length Error */, msg: func(c *hctx) []byte {
			return updateMsg(nil, cat(attrOrigin(0), attrASPath4(hostileASN), mpReach(append(c.addr.AsSlice(), 0), nlri(c.victim))), nil)
		}},
		// 5.3: an MP_UNREACH_NLRI prefix that cannot be parsed
		{name: "mp-unreach-prefix-length-40", out: outReset, code: 3, sub: 10 /* Invalid Network Field */, msg: func(c *hctx) []byte {
			return updateMsg(nil, attr(0x80, 15, []byte{0, 1, 1, 40, 10, 99, 0, 0, 0}), nil)
		}},
		// an MP_REACH_NLRI of a family not negotiated (IPv6 on an
		// IPv4-only session)
		{name: "mp-reach-unnegotiated-family", out: outReset, code: 0, sub: 0, msg: unnegotiated,
			deviation: "an IPv6 MP_REACH_NLRI on an IPv4-only session resets the session with NOTIFICATION 0/0, which is no error code (RFC 4271 4.5: 1 to 6); RFC 4760 makes a family that was not negotiated no session error (ignore it, or at most treat it as RFC 7606 AFI/SAFI disable)"},
		// RFC 4271 6.3, unchanged by 7606: unrecognized well-known attribute
		{name: "unknown-well-known", out: outReset, code: 3, sub: 2, msg: withAttr(attr(0x40, 0x60, []byte{1}))},
		// 4: an attribute longer than what is left of the attribute field
		// (gobgp v4.8.0 withdraws nothing here: ovnbgp rewrites the UPDATE
		// into a withdraw of its NLRI before gobgp reads it)
		{name: "attribute-length-overrun", out: outWithdraw,
			msg: upd(func(c *hctx) []byte {
				return cat(c.std(), []byte{0x80, 4, 8, 0, 0, 0, 1})
			})},
		// 4: Withdrawn Routes Length beyond the message: NLRI not locatable
		{name: "withdrawn-length-overrun", out: outReset, code: 3, sub: 1, msg: func(c *hctx) []byte {
			m := updateMsg(nil, c.std(), c.victimNLRI())
			m[19], m[20] = 0x03, 0xe8
			return m
		}},
		// 4: Total Path Attribute Length beyond the message
		{name: "attribute-total-length-overrun", out: outReset, code: 3, sub: 1, msg: func(c *hctx) []byte {
			m := updateMsg(nil, c.std(), c.victimNLRI())
			m[21], m[22] = 0x03, 0xe8
			return m
		}},
		// 5.3: an NLRI prefix longer than 32 bits
		{name: "nlri-prefix-length-33", out: outReset, code: 3, sub: 10, msg: func(c *hctx) []byte {
			return updateMsg(nil, c.std(), []byte{33, 10, 99, 0, 0, 1})
		}},
		// RFC 4271 6.1: header errors
		{name: "bad-marker", out: outReset, code: 1, sub: 1, msg: func(c *hctx) []byte {
			m := c.announce(c.victim)
			m[3] = 0
			return m
		}},
		{name: "unknown-message-type", out: outReset, code: 1, sub: 3, msg: func(c *hctx) []byte { return bgpMsg(9, []byte{1, 2, 3}) }},
		// AS4_PATH before AS_PATH from a peer without the four-octet AS
		// capability: the v3 crash (CVE-2026-41643). Merged, installed.
		{name: "as4-path-before-as-path", out: outInstall, twoOctet: true,
			open: func(c *hctx) []byte {
				return openMsg(4, hostileASN, 90, c.addr, capParam(capMP(1, 1)))
			},
			msg: upd(func(c *hctx) []byte {
				as4 := attr(0xc0, 17, []byte{2, 1, 0, 0, 0xfd, 0xea})
				return cat(attrOrigin(0), as4, attrASPath2(hostileASN), attrNextHop(c.addr))
			})},
		// an AS4_PATH from a four-octet speaker is discarded (RFC 6793 3)
		{name: "as4-path-from-4-octet-peer", out: outReject, reason: "malformed: first AS 65003 of the AS path is not peer",
			deviation: "gobgp merges an AS4_PATH from a four-octet peer into its AS_PATH (the path reads [65003], a spoofed first AS) instead of discarding it (RFC 6793 3: installed with AS_PATH [65002]); ovnbgp's first-AS check (RFC 4271 6.3) then refuses the path",
			msg: upd(func(c *hctx) []byte {
				as4 := attr(0xc0, 17, []byte{2, 1, 0, 0, 0xfd, 0xeb})
				return cat(attrOrigin(0), as4, attrASPath4(hostileASN), attrNextHop(c.addr))
			})},
		// a malformed AS4_PATH from a two-octet peer (RFC 6793 6: attribute
		// discard)
		{name: "as4-path-malformed", out: outWithdraw, twoOctet: true,
			deviation: "a malformed AS4_PATH from a two-octet peer is treated as withdraw; RFC 6793 6 says attribute discard (the AS_PATH alone is used)",
			open: func(c *hctx) []byte {
				return openMsg(4, hostileASN, 90, c.addr, capParam(capMP(1, 1)))
			},
			msg: upd(func(c *hctx) []byte {
				return cat(attrOrigin(0), attr(0xc0, 17, []byte{2, 1, 0}), attrASPath2(hostileASN), attrNextHop(c.addr))
			})},
		// an attribute flood: 3,000 unknown optional attributes (types 200
		// to 254, so most are duplicates: RFC 7606 3.g) in one extended
		// message (RFC 8654): the route is installed, the session kept
		{name: "attribute-flood", out: outInstall,
			open: func(c *hctx) []byte {
				return openMsg(4, hostileASN, 90, c.addr, capParam(capMP(1, 1), cap4Octet(hostileASN), capability(6, nil)))
			},
			msg: upd(func(c *hctx) []byte {
				b := c.std()
				for i := range 3000 {
					b = append(b, attr(0xc0, byte(200+i%55), []byte{byte(i >> 8), byte(i)})...)
				}
				return b
			})},
		// an unknown optional transitive attribute: kept, route installed
		{name: "unknown-optional-transitive", out: outInstall, msg: withAttr(attr(0xc0, 0xf0, []byte{0xde, 0xad, 0xbe, 0xef}))},

		// the import filter
		reject("pod-subnet", "wide", "10.128.0.0/23", "", "10.128.0.0/23 is protected: pod subnet"),
		reject("pod-subnet-more-specific", "wide", "10.128.0.128/25", "", "is inside protected 10.128.0.0/23: pod subnet"),
		reject("service-cidr", "wide", "172.30.5.0/24", "", "is inside protected 172.30.0.0/16: cluster.serviceCIDRs"),
		reject("join-subnet", "wide", "100.64.7.0/24", "", "is inside protected 100.64.0.0/16: join"),
		reject("default-route", "wide", "0.0.0.0/0", "", "is the default route and rule wide does not set allowDefaultRoute"),
		reject("too-long", "wide", "10.99.240.0/28", "", "no accept entry matches 10.99.240.0/28"),
		reject("next-hop-self", "", "10.99.241.0/24", "203.0.113.1", "next hop 203.0.113.1 of 10.99.241.0/24 is local"),
		reject("next-hop-in-pod-subnet", "", "10.99.242.0/24", "10.128.0.5", "next hop 10.128.0.5 of 10.99.242.0/24 is inside protected 10.128.0.0/23"),
		reject("martian-loopback", "any", "127.0.0.0/8", "", "special-purpose"),
		reject("martian-this-network", "any", "0.0.0.0/8", "", "special-purpose"),
		reject("martian-multicast", "any", "224.0.0.0/4", "", "special-purpose"),
		reject("martian-class-e", "any", "240.0.0.0/4", "", "special-purpose"),
		reject("martian-broadcast", "any", "255.255.255.255/32", "", "special-purpose"),
		reject("martian-link-local", "any", "169.254.200.0/24", "", "special-purpose"),
		{name: "import-cap", rule: "cap", out: outCustom, run: runImportCap},
		{name: "update-5000-nlri", out: outCustom, run: run5000NLRI},

		// OPEN oddities (RFC 4271 6.2, RFC 5492)
		{name: "open-version-3", out: outCustom, run: openRefused(2, 1, func(c *hctx) []byte {
			return openMsg(3, hostileASN, 90, c.addr, capParam(capMP(1, 1), cap4Octet(hostileASN)))
		})},
		{name: "open-hold-time-1", out: outCustom, run: openRefused(2, 6, func(c *hctx) []byte {
			return openMsg(4, hostileASN, 1, c.addr, capParam(capMP(1, 1), cap4Octet(hostileASN)))
		})},
		{name: "open-hold-time-2", out: outCustom, run: openRefused(2, 6, func(c *hctx) []byte {
			return openMsg(4, hostileASN, 2, c.addr, capParam(capMP(1, 1), cap4Octet(hostileASN)))
		})},
		{name: "open-bad-peer-as", out: outCustom, run: openRefused(2, 2, func(c *hctx) []byte {
			return openMsg(4, 65099, 90, c.addr, capParam(capMP(1, 1), cap4Octet(65099)))
		})},
		{name: "open-bgp-id-zero", out: outCustom, run: openRefused(2, 3, func(c *hctx) []byte {
			return openMsg(4, hostileASN, 90, netip.IPv4Unspecified(), capParam(capMP(1, 1), cap4Octet(hostileASN)))
		})},
		// the daemon's listener refuses it (gobgp v4.8.0 alone accepts it;
		// a session the daemon dials still does)
		{name: "open-unsupported-optional-parameter", out: outCustom, run: openRefused(2, 4, func(c *hctx) []byte {
			return openMsg(4, hostileASN, 90, c.addr, cat(capParam(capMP(1, 1), cap4Octet(hostileASN)), []byte{1, 2, 0, 0}))
		})},
		{name: "open-unknown-capabilities", out: outInstall, msg: func(c *hctx) []byte { return c.announce(c.victim) },
			open: func(c *hctx) []byte {
				return openMsg(4, hostileASN, 90, c.addr, capParam(capMP(1, 1), capability(200, []byte{1, 2, 3}),
					cap4Octet(hostileASN), capability(201, nil), capMP(99, 99)))
			}},
		{name: "open-optional-parameters-255", out: outInstall, msg: func(c *hctx) []byte { return c.announce(c.victim) },
			open: func(c *hctx) []byte {
				// the longest optional parameters a classic OPEN holds: the
				// two needed capabilities and unknown ones up to 255 octets
				params := capParam(capMP(1, 1), cap4Octet(hostileASN))
				for len(params) < 255-20 {
					params = append(params, capParam(capability(byte(210+len(params)%40), make([]byte, 14)))...)
				}
				params = append(params, capParam(capability(250, make([]byte, 255-len(params)-4)))...)
				return openMsg(4, hostileASN, 90, c.addr, params)
			}},

		// connections
		{name: "notification-spam", out: outCustom, run: runNotificationSpam},
		{name: "silent-connections", out: outCustom, run: runSilent(false)},
		{name: "half-open-connections", out: outCustom, run: runSilent(true)},
		{name: "connection-flood", out: outCustom, run: runFlood},
	}
}

// hostileCaseRules renders the import rules for cases.
func hostileCaseRules(cases []hcase) string {
	legit, capped, wide, anyr := []string{"hwarm"}, []string{}, []string{}, []string{}
	for i, c := range cases {
		name := fmt.Sprintf("h%d", i)
		if c.rule == "cap" {
			capped = append(capped, name)
		} else {
			legit = append(legit, name)
		}
		switch c.rule {
		case "wide":
			wide = append(wide, name)
		case "any":
			anyr = append(anyr, name)
		}
	}
	targets := "    targets: {ovn: true, kernel: {table: 100}}\n"
	s := "  - name: legit\n    peers: [" + strings.Join(legit, ", ") + "]\n    network: default\n    maxRoutes: 50\n" +
		"    accept:\n      - {prefix: " + legitSpace + ", maxLength: " + strconv.Itoa(legitMax) + "}\n" + targets
	s += "  - name: cap\n    peers: [" + strings.Join(capped, ", ") + "]\n    network: default\n    maxRoutes: 2\n" +
		"    accept:\n      - {prefix: " + legitSpace + ", maxLength: " + strconv.Itoa(legitMax) + "}\n" + targets
	s += "  - name: wide\n    peers: [" + strings.Join(wide, ", ") + "]\n    network: default\n    accept:\n" +
		"      - {prefix: 0.0.0.0/0, maxLength: 1}\n      - {prefix: 10.128.0.0/14, maxLength: 32}\n" +
		"      - {prefix: 172.16.0.0/12, maxLength: 32}\n      - {prefix: 100.64.0.0/10, maxLength: 32}\n" + targets
	s += "  - name: any\n    peers: [" + strings.Join(anyr, ", ") + "]\n    network: default\n    accept:\n" +
		"      - {prefix: 0.0.0.0/0, maxLength: 32}\n" + targets
	return strings.TrimSuffix(s, "\n")
}

// startHostile builds a hostile-input lab: the import link, addrs on the
// tor namespace's side of it (the raw speakers' addresses), NB with the
// OVN-Kubernetes topology and GR_node1 on the import link, prepare (when
// set) run before the daemon starts, then the daemon with cfg listening on
// port 179 without graceful restart (fail static lets go after 1 s), and
// the poller of the installed state (stopped at the end of the test). It
// returns when the daemon listens.
func startHostile(t *testing.T, addrs []netip.Addr, prepare func(w *hostileWorld), cfg lab.DaemonConfig) *hostileWorld {
	t.Helper()
	w := &hostileWorld{importWorld: &importWorld{l: lab.New(t)}, changed: make(chan struct{})}
	w.l.AddImportLink()
	for _, a := range addrs {
		if out, err := w.l.Exec(w.l.Tor, "ip", "addr", "add", netip.PrefixFrom(a, 24).String(), "dev", lab.TorLink); err != nil {
			t.Fatalf("address %s: %v: %s", a, err, out)
		}
	}
	w.nb = w.l.StartNB()
	w.nb.PopulateOVNK()
	w.nb.GatewayRouter("node1", lab.ImportLinkNetworks()...)
	if prepare != nil {
		prepare(w)
	}
	cfg.ListenPort = 179
	cfg.DeferralTime = time.Second
	w.d = w.l.StartDaemon(w.nb, cfg)
	stop := make(chan struct{})
	polled := make(chan struct{})
	go w.poll(stop, polled)
	t.Cleanup(func() { close(stop); <-polled })
	lab.Eventually(t, 30*time.Second, 100*time.Millisecond, "daemon answers", func() error {
		_, err := w.d.Status()
		return err
	})
	lab.Eventually(t, 30*time.Second, 100*time.Millisecond, "the daemon listens on port 179", func() error {
		out, err := w.l.Exec(w.l.Node, "ss", "-Hltn", "sport = :179")
		if err != nil || !strings.Contains(out, ":179") {
			return fmt.Errorf("ss: %q (%v)", out, err)
		}
		return nil
	})
	return w
}

// TestHostileInput runs every hostile case against one daemon.
func TestHostileInput(t *testing.T) {
	t.Parallel()
	cases := hostileCases()
	addrs := []netip.Addr{peerAddr(-1), netip.MustParseAddr("203.0.113.250")}
	for i := range cases {
		addrs = append(addrs, peerAddr(i))
	}
	// hwarm: a well-behaved peer that installs and withdraws one route
	// before the cases, so that the descriptors the daemon opens on first
	// use are in the baseline
	peers := []lab.Peer{{Name: "hwarm", Address: peerAddr(-1), ASN: hostileASN, Passive: true, Families: []string{"ipv4"}}}
	for i := range cases {
		peers = append(peers, lab.Peer{Name: fmt.Sprintf("h%d", i), Address: peerAddr(i), ASN: hostileASN, Passive: true, Families: []string{"ipv4"}})
	}
	w := startHostile(t, addrs, nil, lab.DaemonConfig{Peers: peers, Import: hostileCaseRules(cases)})
	kmon := w.l.MonitorRoutes(w.l.Node)
	nbmon := w.nb.Monitor("Logical_Router_Static_Route", "ip_prefix", "nexthop")
	warm := &hctx{w: w, i: -1, peer: "hwarm", addr: peerAddr(-1), canary: netip.MustParsePrefix("10.99.255.0/24")}
	warm.connect(t, nil)
	if err := warm.s.Send(warm.announce(warm.canary)); err != nil {
		t.Fatal(err)
	}
	warm.waitInstalled(t, "the warm-up route installed", warm.canary)
	warm.s.Close()
	warm.waitGone(t, "the warm-up route withdrawn with its session", warm.canary)
	rss0 := w.rss(t)
	fd0 := w.fds(t)

	t.Run("cases", func(t *testing.T) {
		for i, hc := range cases {
			t.Run(hc.name, func(t *testing.T) {
				t.Parallel()
				c := &hctx{w: w, i: i, peer: fmt.Sprintf("h%d", i), addr: peerAddr(i),
					canary: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 99, byte(i), 0}), 24),
					victim: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 99, byte(100 + i), 0}), 24)}
				runCase(t, hc, c)
				if err := w.d.Exited(); err != nil {
					t.Fatalf("the daemon died: %v", err)
				}
				if rss := w.rss(t); rss > rssLimit {
					t.Fatalf("daemon RSS %d KiB exceeds %d KiB", rss>>10, rssLimit>>10)
				}
			})
		}
	})

	// nothing forbidden, now or ever
	if err := w.d.Exited(); err != nil {
		t.Fatalf("the daemon died: %v", err)
	}
	w.mu.Lock()
	forbidden := w.forbidden
	w.mu.Unlock()
	snap := w.read()
	if snap.err != nil {
		t.Fatal(snap.err)
	}
	for _, p := range forbidden {
		if _, ok := snap.kernel[p.String()]; ok {
			t.Errorf("table 100 holds forbidden %s", p)
		}
		if _, ok := snap.ovn[p.String()]; ok {
			t.Errorf("GR_node1 holds forbidden %s", p)
		}
	}
	checkEverInstalled(t, "ip monitor route", kmon.Stop(), "table 100")
	checkEverInstalled(t, "the NB monitor", nbmon.Stop(), "")
	// every case's connections are closed: the daemon's descriptors go
	// back to what they were (no leak through floods, resets, spam)
	lab.Eventually(t, 30*time.Second, 200*time.Millisecond, "the daemon's descriptors back to the start", func() error {
		if n := w.fds(t); len(n) > len(fd0)+5 {
			return fmt.Errorf("%d open descriptors, %d at the start:\n%s\nat the start:\n%s", len(n), len(fd0), strings.Join(n, "\n"), strings.Join(fd0, "\n"))
		}
		return nil
	})
	rss1 := w.rss(t)
	t.Logf("daemon RSS %d KiB at the start, %d KiB at the end (limit %d KiB)", rss0>>10, rss1>>10, rssLimit>>10)
	if rss1 > rssLimit {
		t.Errorf("daemon RSS %d KiB exceeds %d KiB", rss1>>10, rssLimit>>10)
	}
}

var ipv4PrefixRE = regexp.MustCompile(`\b(\d+\.\d+\.\d+\.\d+(?:/\d+)?)\b`)

// checkEverInstalled fails for every route or row a monitor saw added
// outside the legitimate space (10.99.0.0/16 up to /24). filter keeps the
// lines that contain it.
func checkEverInstalled(t *testing.T, what, out, filter string) {
	t.Helper()
	checkEverInstalledIn(t, what, out, filter, netip.MustParsePrefix(legitSpace), legitMax)
}

// checkEverInstalledIn is checkEverInstalled for the legitimate space
// legit up to /maxLen.
func checkEverInstalledIn(t *testing.T, what, out, filter string, legit netip.Prefix, maxLen int) {
	t.Helper()
	n := 0
	for _, line := range strings.Split(out, "\n") {
		if line == "" || strings.HasPrefix(line, "Deleted") || (filter != "" && !strings.Contains(line, filter)) {
			continue
		}
		if filter == "" && !strings.Contains(line, ",insert,") && !strings.Contains(line, ",new,") {
			continue // the NB monitor: initial rows, deletions, old values
		}
		m := ipv4PrefixRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		p, err := netip.ParsePrefix(m[1])
		if err != nil {
			p = netip.PrefixFrom(netip.MustParseAddr(m[1]), 32)
		}
		n++
		if !legit.Contains(p.Addr()) || p.Bits() < legit.Bits() || p.Bits() > maxLen {
			t.Errorf("%s saw forbidden %s installed: %q", what, p, line)
		}
	}
	t.Logf("%s: %d installs checked against %s up to /%d", what, n, legit, maxLen)
}

// rss is the daemon's resident set size in bytes.
func (w *hostileWorld) rss(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", w.d.PID()))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, err := strconv.Atoi(f[1])
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// fds lists the daemon's open descriptors (what each points to).
func (w *hostileWorld) fds(t *testing.T) []string {
	t.Helper()
	dir := fmt.Sprintf("/proc/%d/fd", w.d.PID())
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var res []string
	for _, e := range ents {
		l, _ := os.Readlink(dir + "/" + e.Name())
		res = append(res, e.Name()+" -> "+l)
	}
	return res
}

// poll reads the installed state every 200 ms for the cases to wait on.
func (w *hostileWorld) poll(stop, done chan struct{}) {
	defer close(done)
	for {
		s := w.readNow()
		w.mu.Lock()
		w.snap = s
		w.gen++
		close(w.changed)
		w.changed = make(chan struct{})
		w.mu.Unlock()
		select {
		case <-stop:
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (w *hostileWorld) read() hsnap { return w.readNow() }

func (w *hostileWorld) readNow() hsnap {
	s := hsnap{kernel: map[string][]string{}, ovn: map[string][]string{}}
	lines, err := w.l.KernelRoutes(w.l.Node, importTable, "200")
	if err != nil {
		s.err = err
		return s
	}
	for _, l := range lines {
		f := strings.Fields(strings.TrimPrefix(l, "unicast "))
		if len(f) == 0 {
			continue
		}
		var hops []string
		for i := range f {
			if f[i] == "via" && i+1 < len(f) {
				hops = append(hops, f[i+1])
			}
		}
		if _, ok := s.kernel[f[0]]; ok {
			s.kdup = append(s.kdup, l)
		}
		s.kernel[f[0]] = hops
	}
	rows, err := w.ownedRows()
	if err != nil {
		s.err = err
		return s
	}
	for _, r := range rows {
		s.ovn[r.Prefix] = append(s.ovn[r.Prefix], r.NextHop)
	}
	return s
}

// wait waits for cond to hold on a fresh reading of the installed state.
func (w *hostileWorld) wait(t *testing.T, what string, timeout time.Duration, cond func(hsnap) error) {
	t.Helper()
	deadline := time.After(timeout)
	w.mu.Lock()
	ch := w.changed // the next reading, not one taken before the call
	w.mu.Unlock()
	var last error
	for {
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("%s: not within %s: %v", what, timeout, last)
		}
		w.mu.Lock()
		s := w.snap
		ch = w.changed
		w.mu.Unlock()
		if s.err != nil {
			last = s.err
			continue
		}
		if last = cond(s); last == nil {
			return
		}
	}
}

func (c *hctx) waitInstalled(t *testing.T, what string, p netip.Prefix) {
	t.Helper()
	c.w.wait(t, what, 30*time.Second, func(s hsnap) error {
		nh := c.addr.String()
		if k := s.kernel[p.String()]; len(k) != 1 || k[0] != nh {
			return fmt.Errorf("table 100: %s via %v, want via %s", p, k, nh)
		}
		if o := s.ovn[p.String()]; len(o) != 1 || o[0] != nh {
			return fmt.Errorf("GR_node1: %s via %v, want via %s", p, o, nh)
		}
		return nil
	})
}

func (c *hctx) waitGone(t *testing.T, what string, p netip.Prefix) {
	t.Helper()
	c.w.wait(t, what, 30*time.Second, func(s hsnap) error {
		if k, ok := s.kernel[p.String()]; ok {
			return fmt.Errorf("table 100 still has %s via %v", p, k)
		}
		if o, ok := s.ovn[p.String()]; ok {
			return fmt.Errorf("GR_node1 still has %s via %v", p, o)
		}
		return nil
	})
}

func (c *hctx) forbid(ps ...netip.Prefix) {
	c.w.mu.Lock()
	c.w.forbidden = append(c.w.forbidden, ps...)
	c.w.mu.Unlock()
}

// connect establishes the case's session with open (nil: stdOpen) and
// sends End-of-RIB.
func (c *hctx) connect(t *testing.T, open []byte) {
	t.Helper()
	if open == nil {
		open = stdOpen(hostileASN, c.addr)
	}
	var err error
	_, perr := lab.Poll(60*time.Second, 500*time.Millisecond, func() error {
		if c.s != nil {
			c.s.Close()
		}
		if c.s, err = newRawSession(c.w.l.Tor, c.addr, daemonAddr); err != nil {
			return err
		}
		return c.s.Establish(open, 15*time.Second)
	})
	if perr != nil {
		t.Fatalf("session of %s from %s: %v", c.peer, c.addr, perr)
	}
	s := c.s
	t.Cleanup(s.Close)
	if err := s.Send(updateMsg(nil, nil, nil)); err != nil {
		t.Fatal(err)
	}
}

// kept proves the session kept after the hostile input: a fresh route
// announced now is installed, no NOTIFICATION came, and the daemon says
// Established.
func (c *hctx) kept(t *testing.T) {
	t.Helper()
	if err := c.s.Send(c.announce(c.canary)); err != nil {
		t.Fatalf("session ended: %v (%v)", err, c.s.Notified())
	}
	c.waitInstalled(t, "a route announced after the hostile input installed (session kept)", c.canary)
	if n := c.s.Notified(); n != nil {
		t.Fatalf("the daemon sent %s: the session was reset", n)
	}
	p, err := c.w.d.Peer(c.peer)
	if err != nil {
		t.Fatal(err)
	}
	if p.State != model.StateEstablished {
		t.Fatalf("peers: %s is %s (%s), want established", c.peer, p.State, p.LastError)
	}
}

func runCase(t *testing.T, hc hcase, c *hctx) {
	c.as2 = hc.twoOctet
	if hc.deviation != "" {
		t.Logf("pinned deviation of gobgp v4.8.0: %s", hc.deviation)
	}
	if hc.run != nil {
		hc.run(t, c)
		return
	}
	var open []byte
	if hc.open != nil {
		open = hc.open(c)
	}
	c.connect(t, open)
	switch hc.out {
	case outWithdraw:
		if err := c.s.Send(c.announce(c.victim)); err != nil {
			t.Fatal(err)
		}
		c.waitInstalled(t, "the victim installed before the hostile UPDATE", c.victim)
		if err := c.s.Send(hc.msg(c)); err != nil {
			t.Fatal(err)
		}
		c.waitGone(t, "the victim withdrawn (treat-as-withdraw)", c.victim)
		c.kept(t)
	case outInstall:
		if err := c.s.Send(hc.msg(c)); err != nil {
			t.Fatal(err)
		}
		c.waitInstalled(t, "the hostile UPDATE's route installed (attribute discard)", c.victim)
		c.kept(t)
	case outReset:
		if err := c.s.Send(c.announce(c.victim)); err != nil {
			t.Fatal(err)
		}
		c.waitInstalled(t, "the victim installed before the hostile message", c.victim)
		if err := c.s.Send(hc.msg(c)); err != nil {
			t.Fatal(err)
		}
		n, err := c.s.WaitClosed(30 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if n == nil || n.code != hc.code || n.sub != hc.sub {
			t.Fatalf("the daemon sent %v, want NOTIFICATION %d/%d (session reset)", n, hc.code, hc.sub)
		}
		c.waitGone(t, "the victim withdrawn with the session", c.victim)
	case outReject:
		p := c.victim
		if hc.prefix != "" {
			p = netip.MustParsePrefix(hc.prefix)
		}
		c.forbid(p)
		if err := c.s.Send(hc.msg(c)); err != nil {
			t.Fatal(err)
		}
		c.waitRejected(t, p, hc.reason)
		c.kept(t)
		// the rejected route is not installed (the canary, sent after it,
		// is)
		s := c.w.read()
		if _, ok := s.kernel[p.String()]; ok {
			t.Errorf("table 100 holds %s", p)
		}
		if _, ok := s.ovn[p.String()]; ok {
			t.Errorf("GR_node1 holds %s", p)
		}
	}
}

// waitRejected waits for p from c's peer in `routes learned --rejected`
// with a reason containing reason.
func (c *hctx) waitRejected(t *testing.T, p netip.Prefix, reason string) {
	t.Helper()
	lab.Eventually(t, 30*time.Second, 300*time.Millisecond, fmt.Sprintf("%s rejected: %s", p, reason), func() error {
		rej, err := c.w.d.Learned(true)
		if err != nil {
			return err
		}
		for _, lp := range rej {
			if lp.Peer == c.peer && lp.Prefix == p {
				if lp.Accepted || !strings.Contains(lp.Reason, reason) {
					return fmt.Errorf("accepted %v, reason %q (malformed %q)", lp.Accepted, lp.Reason, lp.Malformed)
				}
				return nil
			}
		}
		return fmt.Errorf("%s from %s not in routes learned --rejected", p, c.peer)
	})
}

// runImportCap: maxRoutes 2; the canary and a second route fill it, a
// third is rejected for the cap; the session is kept.
func runImportCap(t *testing.T, c *hctx) {
	c.connect(t, nil)
	if err := c.s.Send(c.announce(c.canary)); err != nil {
		t.Fatal(err)
	}
	c.waitInstalled(t, "first route", c.canary)
	if err := c.s.Send(c.announce(c.victim)); err != nil {
		t.Fatal(err)
	}
	c.waitInstalled(t, "second route", c.victim)
	third := netip.MustParsePrefix("10.99.250.0/24")
	c.forbid(third)
	if err := c.s.Send(c.announce(third)); err != nil {
		t.Fatal(err)
	}
	c.waitRejected(t, third, "import cap: rule cap accepts at most 2 routes from peer "+c.peer)
	if n := c.s.Notified(); n != nil {
		t.Fatalf("the daemon sent %s", n)
	}
	p, err := c.w.d.Peer(c.peer)
	if err != nil {
		t.Fatal(err)
	}
	if p.State != model.StateEstablished || p.ImportAlarm == "" {
		t.Errorf("peers: %s %s, import alarm %q: want established with an alarm", c.peer, p.State, p.ImportAlarm)
	}
}

// run5000NLRI: one UPDATE with 5,000 /32s in 10.99.0.0/16 (too long for
// every rule). With extended messages (RFC 8654) on both sides it is one
// legal 25 kB UPDATE: every path is learned and rejected, nothing
// installed, the session kept. Without them it is longer than 4,096
// octets: NOTIFICATION 1/2 Bad Message Length.
func run5000NLRI(t *testing.T, c *hctx) {
	open := openMsg(4, hostileASN, 90, c.addr, capParam(capMP(1, 1), cap4Octet(hostileASN), capability(6, nil)))
	c.connect(t, open)
	var ps []netip.Prefix
	for i := range 5000 {
		ps = append(ps, netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 99, byte(200 + i/250), byte(i % 250)}), 32))
	}
	if err := c.s.Send(updateMsg(nil, c.std(), nlri(ps...))); err != nil {
		t.Fatal(err)
	}
	t.Logf("extended messages: daemon %v", c.s.PeerCapability(6))
	if !c.s.PeerCapability(6) {
		n, err := c.s.WaitClosed(30 * time.Second)
		if err != nil || n == nil || n.code != 1 || n.sub != 2 {
			t.Fatalf("no extended messages: the daemon sent %v (%v), want NOTIFICATION 1/2", n, err)
		}
		return
	}
	lab.Eventually(t, 60*time.Second, time.Second, "5,000 paths learned and rejected", func() error {
		rej, err := c.w.d.Learned(true)
		if err != nil {
			return err
		}
		n := 0
		for _, lp := range rej {
			if lp.Peer == c.peer && !lp.Accepted && lp.Prefix.Bits() == 32 {
				n++
			}
		}
		if n != 5000 {
			return fmt.Errorf("%d rejected", n)
		}
		return nil
	})
	c.kept(t)
	s := c.w.read()
	for p := range s.kernel {
		if pp := netip.MustParsePrefix(p); pp.Bits() == 32 {
			t.Errorf("table 100 holds %s", p)
		}
	}
}

// unnegotiated is an UPDATE with an IPv6 MP_REACH_NLRI.
func unnegotiated(c *hctx) []byte {
	v6 := netip.MustParsePrefix("2001:db8:99:7::/64")
	c.forbid(v6)
	nh := netip.MustParseAddr("2001:db8:200::3").AsSlice()
	v := append([]byte{0, 2, 1, byte(len(nh))}, nh...)
	v = append(v, 0)
	m := attr(0x80, 14, append(v, nlri(v6)...))
	return updateMsg(nil, cat(attrOrigin(0), attrASPath4(hostileASN), m), nil)
}

// openRefused: the daemon answers the OPEN with NOTIFICATION code/sub and
// never establishes.
func openRefused(code, sub byte, open func(c *hctx) []byte) func(t *testing.T, c *hctx) {
	return func(t *testing.T, c *hctx) {
		s, err := newRawSession(c.w.l.Tor, c.addr, daemonAddr)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		err = s.Establish(open(c), 15*time.Second)
		if err == nil {
			t.Fatalf("Established with a bad OPEN")
		}
		n, cerr := s.WaitClosed(15 * time.Second)
		if cerr != nil {
			t.Fatal(cerr)
		}
		if n == nil || n.code != code || n.sub != sub {
			t.Fatalf("the daemon answered %v (%v), want NOTIFICATION %d/%d", n, err, code, sub)
		}
	}
}

// runNotificationSpam: twenty sessions opened and ended at once with a
// NOTIFICATION (Cease), then a good session comes up.
func runNotificationSpam(t *testing.T, c *hctx) {
	for i := range 20 {
		s, err := newRawSession(c.w.l.Tor, c.addr, daemonAddr)
		if err != nil {
			continue // the listener may refuse while the peer is idle
		}
		_ = s.Send(stdOpen(hostileASN, c.addr), notificationMsg(6, byte(1+i%9), []byte("spam")))
		s.Drain()
		s.Close()
	}
	c.connect(t, nil)
	c.kept(t)
}

// runSilent: ten connections from the peer's address that send nothing
// (or half a header), then the real session comes up.
func runSilent(half bool) func(t *testing.T, c *hctx) {
	return func(t *testing.T, c *hctx) {
		for range 10 {
			s, err := newRawSession(c.w.l.Tor, c.addr, daemonAddr)
			if err != nil {
				t.Fatal(err)
			}
			if half {
				_ = s.Send(stdOpen(hostileASN, c.addr)[:10])
			}
			t.Cleanup(s.Close)
		}
		c.connect(t, nil)
		c.kept(t)
	}
}

// runFlood: 300 connections from an address that is no peer; the daemon
// closes every one, and a real session comes up.
func runFlood(t *testing.T, c *hctx) {
	from := netip.MustParseAddr("203.0.113.250")
	var ss []*rawSession
	for range 300 {
		s, err := newRawSession(c.w.l.Tor, from, daemonAddr)
		if err != nil {
			t.Fatalf("flood: %v", err)
		}
		ss = append(ss, s)
	}
	for i, s := range ss {
		if _, err := s.WaitClosed(30 * time.Second); err != nil {
			t.Fatalf("flood connection %d from a stranger: %v", i, err)
		}
		s.Close()
	}
	c.connect(t, nil)
	c.kept(t)
}
