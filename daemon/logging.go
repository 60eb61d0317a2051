package daemon

import (
	"fmt"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/ovnbgp/ovnbgp/config"
)

// logging is the daemon's zap logger and the level SIGHUP can change.
type logging struct {
	logger *zap.Logger
	level  *zap.AtomicLevel // nil when the caller supplied the logger
}

// NewLogger builds a logger from the config's log section: JSON or console
// lines on stderr (journald adds timestamps of its own, zap's stay for
// `ovnbgp daemon` run by hand).
func NewLogger(c config.Log) (*zap.Logger, zap.AtomicLevel, error) {
	lvl, err := zap.ParseAtomicLevel(c.Level)
	if err != nil {
		return nil, lvl, fmt.Errorf("log.level: %w", err)
	}
	zc := zap.NewProductionConfig()
	if c.Format == "console" {
		zc = zap.NewDevelopmentConfig()
		zc.EncoderConfig.EncodeLevel = zapcore.CapitalLevelEncoder
	}
	zc.Level = lvl
	zc.Sampling = nil
	zc.DisableStacktrace = true
	zc.EncoderConfig.TimeKey = "ts"
	zc.EncoderConfig.EncodeTime = zapcore.ISO8601TimeEncoder
	l, err := zc.Build()
	if err != nil {
		return nil, lvl, err
	}
	return l, lvl, nil
}

// newLogging builds the daemon's logger from c, or uses supplied. Every
// logger the daemon hands out (bgp, ovn, the HTTP servers' error logs) is a
// child of this one, so they share its level: a reload changes them all.
// A supplied logger follows log.level only if its level is given too.
func newLogging(c config.Log, supplied *zap.Logger, level *zap.AtomicLevel) (*logging, error) {
	if supplied != nil {
		l := &logging{logger: supplied, level: level}
		if err := l.setLevel(c.Level); err != nil {
			return nil, fmt.Errorf("log.level: %w", err)
		}
		return l, nil
	}
	l, lvl, err := NewLogger(c)
	if err != nil {
		return nil, err
	}
	return &logging{logger: l, level: &lvl}, nil
}

func (l *logging) setLevel(s string) error {
	if l.level == nil {
		return nil
	}
	lvl, err := zapcore.ParseLevel(s)
	if err != nil {
		return err
	}
	l.level.SetLevel(lvl)
	return nil
}

func (l *logging) sync() { _ = l.logger.Sync() }
