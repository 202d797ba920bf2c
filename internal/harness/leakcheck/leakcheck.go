// Package leakcheck finds goroutines left behind in a process that ran
// Proto.Actor remote nodes (package service): it ignores the goroutines the
// pinned remote never ends (service.RemoteLeaks), and gives its others
// service.RemoteSettle to end first. A writer whose peer had gone sleeps
// 2 s in its connection retry, and a failed gRPC connection is still
// connecting until it turns idle: neither is a leak, yet goleak's own
// retries (about 0.4 s) miss them.
//
// Users: actorfeed serve --check-leaks, sim --network's last check, and the
// TestMain of packages whose tests start nodes. It may import service
// and goleak; no user package imports it.
package leakcheck

import (
	"fmt"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/actorfeed/actorfeed/service"
)

// Options are opts and one that ignores service.RemoteLeaks.
func Options(opts ...goleak.Option) []goleak.Option {
	for _, fn := range service.RemoteLeaks {
		opts = append(opts, goleak.IgnoreTopFunction(fn))
	}
	return opts
}

// Find returns the goroutines left (those opts do not ignore, nor
// service.RemoteLeaks) once service.RemoteSettle has passed, or nil as soon
// as there are none.
func Find(opts ...goleak.Option) error {
	deadline := time.Now().Add(service.RemoteSettle)
	for {
		err := goleak.Find(Options(opts...)...) // retries for about 0.4 s itself
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("goroutines left %v after the nodes stopped: %w", service.RemoteSettle, err)
		}
	}
}

// Settled wraps a test binary's m for goleak.VerifyTestMain: after the
// tests it waits, up to service.RemoteSettle, for the goroutines opts and
// service.RemoteLeaks do not ignore to end, so that goleak's own check
// (given Options) sees only what stays:
//
//	goleak.VerifyTestMain(leakcheck.Settled(m), leakcheck.Options()...)
func Settled(m *testing.M, opts ...goleak.Option) goleak.TestingM {
	return settled{m: m, opts: opts}
}

type settled struct {
	m    *testing.M
	opts []goleak.Option
}

func (s settled) Run() int {
	code := s.m.Run()
	_ = Find(s.opts...) // goleak reports what is left
	return code
}
