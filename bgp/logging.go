package bgp

import (
	"context"
	"fmt"
	"log/slog"

	"go.uber.org/zap/zapcore"
)

// gobgpHandler is the slog handler gobgp logs through. It passes gobgp's
// records to the zap core from Warn up, or from Info up while the core is
// enabled at Debug: the level is read from the core at each record, so a
// reload that changes the daemon's log level (a zap AtomicLevel) applies
// to gobgp's messages at once. floor (gobgp's SetLogLevel, and the silence
// of Stop) can raise it further. It also hands every NOTIFICATION gobgp
// sends or receives to tap, with the peer address gobgp keys it by: gobgp's
// peer events carry only "invalid-msg" or "bad-peer-as".
type gobgpHandler struct {
	inner slog.Handler
	core  zapcore.Core
	floor *slog.LevelVar
	// key is gobgp's "Key" attribute (the peer address) of this logger.
	key string
	tap func(addr string, sent bool, code, subcode uint8, communication string)
	// bfdDown gets the peer address of gobgp's BFD going down (its Warn
	// records "Expired" and "Remote peer signaled BFD down", logged right
	// before it resets the session).
	bfdDown func(addr string, expired bool)
}

func (h gobgpHandler) passes(ctx context.Context, l slog.Level) bool {
	min := slog.LevelWarn
	if h.core.Enabled(zapcore.DebugLevel) {
		min = slog.LevelInfo
	}
	return l >= min && l >= h.floor.Level() && h.inner.Enabled(ctx, l)
}

func (h gobgpHandler) Enabled(ctx context.Context, l slog.Level) bool {
	if h.key != "" && h.tap != nil && l >= slog.LevelInfo {
		return true // NOTIFICATIONs are logged at Info
	}
	if h.bfdDown != nil && l == slog.LevelWarn && h.floor.Level() <= slog.LevelWarn {
		return true // BFD going down is logged at Warn (and rare)
	}
	return h.passes(ctx, l)
}

func (h gobgpHandler) Handle(ctx context.Context, r slog.Record) error {
	if h.key != "" && h.tap != nil && (r.Message == "sent notification" || r.Message == "received notification") {
		var code, sub int64
		var comm string
		r.Attrs(func(a slog.Attr) bool {
			switch a.Key {
			case "Code":
				code = a.Value.Int64()
			case "Subcode":
				sub = a.Value.Int64()
			case "Communicated-Reason":
				comm = a.Value.String()
			}
			return true
		})
		h.tap(h.key, r.Message == "sent notification", uint8(code), uint8(sub), comm)
	}
	if h.bfdDown != nil && (r.Message == "Expired" || r.Message == "Remote peer signaled BFD down") {
		var topic, peer string
		r.Attrs(func(a slog.Attr) bool {
			switch a.Key {
			case "Topic":
				topic = a.Value.String()
			case "Peer":
				peer = a.Value.String()
			}
			return true
		})
		if topic == "bfd" {
			h.bfdDown(peer, r.Message == "Expired")
		}
	}
	if r.Message == "update prefix limit configuration" {
		// ovnbgp arms and disarms the limit itself (prefixlimit.go) and
		// logs a change of maxPrefixes: gobgp warns of each change.
		return nil
	}
	if !h.passes(ctx, r.Level) {
		return nil
	}
	return h.inner.Handle(ctx, r)
}

func (h gobgpHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	n := h
	n.inner = h.inner.WithAttrs(attrs)
	for _, a := range attrs {
		if a.Key == "Key" {
			n.key = a.Value.String()
		}
	}
	return n
}

func (h gobgpHandler) WithGroup(name string) slog.Handler {
	n := h
	n.inner = h.inner.WithGroup(name)
	return n
}

// notificationText describes a NOTIFICATION as operators read it, e.g.
// "received NOTIFICATION 2/2 OPEN Message Error / Bad Peer AS".
func notificationText(sent bool, code, subcode uint8, communication string) string {
	dir := "received"
	if sent {
		dir = "sent"
	}
	name, sn, hasSubs := notificationName(code, subcode)
	s := fmt.Sprintf("%s NOTIFICATION %d/%d %s", dir, code, subcode, name)
	if hasSubs {
		if sn != "" {
			s += " / " + sn
		} else if subcode != 0 {
			s += " / unknown subcode"
		}
	}
	if communication != "" {
		s += fmt.Sprintf(": %q", communication)
	}
	if sent && code == 6 && subcode == 1 {
		// gobgp sends it for maxPrefixes alone. gobgp logs it before
		// the peer event that starts the hold (onPeerEvent), and a
		// status read between the two shows this text.
		s += ": the peer sent more prefixes than maxPrefixes allows"
	}
	if sent && code == 5 && (subcode == 1 || subcode == 2) {
		// gobgp answers so to a NOTIFICATION it receives during the OPEN
		// exchange, which it does not report.
		s += " (the peer most likely sent a NOTIFICATION first: its log says why it refused the session)"
	}
	return s
}

// notificationName is the IANA name of a NOTIFICATION error code and, if
// known, of its subcode ("BGP Error (Notification) Codes" and subcodes:
// RFC 4271, 4486, 6608, 7313, 8538, 9234, 9384).
func notificationName(code, subcode uint8) (name, sub string, hasSubs bool) {
	var subs []string // indexed by subcode; "" is unknown
	switch code {
	case 1:
		name = "Message Header Error"
		subs = []string{1: "Connection Not Synchronized", 2: "Bad Message Length", 3: "Bad Message Type"}
	case 2:
		name = "OPEN Message Error"
		subs = []string{1: "Unsupported Version Number", 2: "Bad Peer AS", 3: "Bad BGP Identifier", 4: "Unsupported Optional Parameter",
			5: "Authentication Failure (deprecated)", 6: "Unacceptable Hold Time", 7: "Unsupported Capability", 11: "Role Mismatch"}
	case 3:
		name = "UPDATE Message Error"
		subs = []string{1: "Malformed Attribute List", 2: "Unrecognized Well-known Attribute", 3: "Missing Well-known Attribute",
			4: "Attribute Flags Error", 5: "Attribute Length Error", 6: "Invalid ORIGIN Attribute", 7: "AS Routing Loop (deprecated)",
			8: "Invalid NEXT_HOP Attribute", 9: "Optional Attribute Error", 10: "Invalid Network Field", 11: "Malformed AS_PATH"}
	case 4:
		name = "Hold Timer Expired"
	case 5:
		name = "Finite State Machine Error"
		subs = []string{1: "Receive Unexpected Message in OpenSent State", 2: "Receive Unexpected Message in OpenConfirm State",
			3: "Receive Unexpected Message in Established State"}
	case 6:
		name = "Cease"
		subs = []string{1: "Maximum Number of Prefixes Reached", 2: "Administrative Shutdown", 3: "Peer De-configured",
			4: "Administrative Reset", 5: "Connection Rejected", 6: "Other Configuration Change",
			7: "Connection Collision Resolution", 8: "Out of Resources", 9: "Hard Reset", 10: "BFD Down"}
	case 7:
		name = "ROUTE-REFRESH Message Error"
		subs = []string{1: "Invalid Message Length"}
	default:
		name = "unknown error code"
	}
	if int(subcode) < len(subs) {
		sub = subs[subcode]
	}
	return name, sub, subs != nil
}
