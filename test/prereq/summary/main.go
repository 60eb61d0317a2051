// Command summary prints the skips the tests noted in a directory
// (prereq.Summary): make test's last step. Under CI=true any skip fails it.
//
//	go run ./test/prereq/summary DIR
package main

import (
	"fmt"
	"os"

	"github.com/ovnbgp/ovnbgp/test/prereq"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: summary DIR")
		os.Exit(2)
	}
	n, err := prereq.Summary(os.Args[1], os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "summary:", err)
		os.Exit(1)
	}
	if n > 0 && prereq.InCI() {
		fmt.Fprintln(os.Stderr, "CI=true: a test was skipped for a missing prerequisite")
		os.Exit(1)
	}
}
