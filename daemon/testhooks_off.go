//go:build !ovnbgp_testhooks

package daemon

import "go.uber.org/zap"

// newTestHooks returns no hooks: this build has none (testhooks.go).
func newTestHooks(*zap.Logger) testHooks { return testHooks{} }
