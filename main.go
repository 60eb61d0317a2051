// Command ovnbgp advertises what an OVN-Kubernetes node owns to the
// provider's BGP routers, imports what they send, and explains itself.
package main

//go:debug multipathtcp=0

import "github.com/ovnbgp/ovnbgp/cmd"

func main() { cmd.Execute() }
