package ovn

import "github.com/ovn-org/libovsdb/ovsdb"

// SetBatchSize sets the most route operations ApplyRoutes puts in one
// transaction.
func SetBatchSize(c *Client, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.batchSize = n
}

// SetTxnHook makes ApplyRoutes pass each transaction through hook.
func SetTxnHook(c *Client, hook func(batch int, ops []ovsdb.Operation) []ovsdb.Operation) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.txnHook = hook
}

// CachedRows is how many rows of table the live session's cache holds, -1
// when disconnected.
func CachedRows(c *Client, table string) int {
	c.mu.Lock()
	cli := c.cli
	c.mu.Unlock()
	if cli == nil {
		return -1
	}
	t := cli.Cache().Table(table)
	if t == nil {
		return 0
	}
	return t.Len()
}

// TableEvents is how many cache events of table the client's memo has
// recorded (all sessions).
func TableEvents(c *Client, table string) uint64 {
	c.memo.mu.Lock()
	defer c.memo.mu.Unlock()
	return c.memo.version[table]
}
