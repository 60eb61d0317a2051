package vrf

// Lookups is how many key lookups (whole-table dumps) m has made.
func Lookups(m *Manager) int64 { return m.lookups.Load() }

// Sends is how many sendmsg calls m's batch socket has made.
func Sends(m *Manager) int64 { return m.sock.sends.Load() }

// RouteWakes is how often the route watcher woke from its sleep.
func RouteWakes(m *Manager) int64 { return m.routeWakes.Load() }
