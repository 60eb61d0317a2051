// Package nd finds the BGP peer of an unnumbered link (issue 20, RFC 8950):
// the link-local address of the one router on the other end of a link
// configured as `interface: <dev>` without an address.
//
// It sends Router Solicitations (at start, on link up, when asked) and
// Router Advertisements with router lifetime 0 (every 10 s and in answer to
// the peer's solicitation), so that the peer never makes the node a default
// router. It reads Router Advertisements and Solicitations on a raw ICMPv6
// socket (hop limit 255, link-local source, the link's own ifindex, not one
// of the node's addresses) and, at start, the kernel's neighbour table for
// link-local router entries (NTF_ROUTER).
//
// Sending is not optional: FRR (8.4) only talks to a `neighbor <dev>
// interface` peer whose router advertisement it received; until then it
// neither dials nor accepts a connection from our link-local address.
package nd
