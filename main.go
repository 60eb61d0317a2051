//go:debug multipathtcp=0

// Command ovnbgp advertises what an OVN-Kubernetes node owns to the
// provider's BGP routers, imports what they send, and explains itself.
//
// The go:debug line keeps every listener plain TCP: MD5 (RFC 2385) and GTSM
// cannot be set on the MPTCP sockets Go 1.24+ makes where net.mptcp.enabled=1.
package main

import "github.com/ovnbgp/ovnbgp/cmd"

func main() { cmd.Execute() }
