package vrf

// Lookups is how many key lookups (whole-table dumps) m has made.
func Lookups(m *Manager) int64 { return m.lookups.Load() }
