package bgp

import (
	"errors"
	"net"
	"reflect"
	"unsafe"

	"github.com/osrg/gobgp/v4/pkg/server"
)

// The only writes into gobgp's unexported fields, both before the server
// serves anything, both failing (not misbehaving) when a gobgp upgrade
// renamed or retyped the field: TestGobgpInternalsPinned pins the gobgp
// version they were written against, TestHandoffField and
// TestBFDResetterField the fields. gobgp v4.8.0's public API has neither
// hook; the upstream issue text is in docs/architecture.md ("The BGP
// listener, and other gobgp workarounds"; "BFD").

// gobgpVersion is the gobgp module these writes were checked against.
const gobgpVersion = "v4.8.0"

// handoffTo makes gobgp read the connections sent on ch as accepted ones.
// gobgp v4.8.0 has no API for that: its Serve loop reads the unexported
// field acceptCh, which StartBgp sets only when gobgp listens itself (it
// never does here: ovnbgp starts it with ListenPort -1). It must be
// called before srv.Serve runs. It fails, rather than misbehaves, if a
// gobgp upgrade renamed or retyped the field.
func handoffTo(srv *server.BgpServer, ch chan net.Conn) error {
	f := reflect.ValueOf(srv).Elem().FieldByName("acceptCh")
	if !f.IsValid() || f.Type() != reflect.TypeOf(ch) {
		return errors.New("gobgp's BgpServer has no field acceptCh of type chan net.Conn: this gobgp version is not supported by ovnbgp's listener (see bgp/gobgpinternals.go)")
	}
	reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem().Set(reflect.ValueOf(ch))
	return nil
}

// bfdTo makes gobgp's BFD server call r instead of srv.ResetPeer. gobgp
// v4.8.0 has no API for it: the BFD server keeps srv in its unexported
// field peerState and copies it into each BFD peer it creates, so this must
// run before any peer is added. It fails, rather than misbehaves, if a
// gobgp upgrade renamed or retyped the fields (TestBFDResetterField).
func bfdTo(srv *server.BgpServer, r bfdResetter) error {
	bs := reflect.ValueOf(srv).Elem().FieldByName("bfdServer")
	if !bs.IsValid() || bs.Kind() != reflect.Pointer || bs.IsNil() {
		return errors.New("gobgp's BgpServer has no field bfdServer: this gobgp version is not supported by ovnbgp's BFD (see bgp/gobgpinternals.go)")
	}
	f := bs.Elem().FieldByName("peerState")
	if !f.IsValid() || f.Kind() != reflect.Interface || !reflect.TypeOf(r).Implements(f.Type()) {
		return errors.New("gobgp's BFD server has no field peerState that ovnbgp can stand in for: this gobgp version is not supported by ovnbgp's BFD (see bgp/gobgpinternals.go)")
	}
	reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem().Set(reflect.ValueOf(r))
	return nil
}
