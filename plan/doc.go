// Package plan decides what ovnbgp wants: from the config and the
// snapshots of OVN NB, the BGP speaker and the kernel, the advertisements
// for each peer (Advertisements, DiffAdvertisements, the export cap, the
// drain; AdvertState keeps them up to date per changed egress IP and
// VIP) and the import of learned paths (Protected, ImportTable, Build,
// Split, Explain). It is pure: no I/O and no gobgp, libovsdb or netlink
// types, so every rule is table-tested.
//
// What happens to imported routes (OVN rows and kernel routes), by event
// and by whether graceful restart (GR) was negotiated with the peer (Build,
// Adopted, StaleWindows; docs/architecture.md has the same table):
//
//	event                                  GR not negotiated        GR negotiated (family in its capability)
//	a route learned in this run withdrawn  deleted on the next pass deleted on the next pass
//	  or moved to another next hop
//	ovnbgp starts: routes found installed  adopted; those the peer does not send again are deleted
//	                                       when the peer is synced: 2 s of quiet   at its End-of-RIB
//	                                       Established (tableSettle), or deferralTime, whichever first
//	session ends by NOTIFICATION, BFD      deleted on the next pass deleted (ovnbgp sends no RFC 8538 N bit)
//	session ends by hold timer, TCP reset  deleted on the next pass kept stale until it is back and sends
//	                                                                End-of-RIB, at most its restart time
//	peer back with the F bit for the family  -                      stale kept until End-of-RIB (those not
//	                                                                re-sent deleted then) or stalePathTime
//	peer back without the F bit or GR        -                      stale deleted at once (RFC 4724 4.2)
//
// An unchanged route is never deleted and re-added by any of these. The
// stale routes are the daemon's own copies of what the peer last sent
// (Retained): gobgp drops them in most of these cases.
package plan
