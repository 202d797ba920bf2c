// The race detector is off for these tests: the scenarios run remote nodes
// in this process, and the pinned protoactor-go remote races with itself
// when a node starts or stops (docs/distributed.md). The README's test
// command runs them without it.

//go:build !race

package netsim_test

import (
	"bufio"
	"io"
	"net"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/actorfeed/actorfeed/sim"
	"github.com/actorfeed/actorfeed/sim/netsim"
)

// Network scenarios pass: the batches of one process through workers
// behind faulty proxies.
func TestNetworkScenariosPass(t *testing.T) {
	for seed := range uint64(12) {
		res := netsim.Run(t.Context(), netsim.Generate(seed), netsim.Config{}) // each under its own deadline
		require.Equal(t, sim.Pass, res.Verdict, "%s: %v", res.Scenario.Describe(), res.Violations)
	}
}

// echo serves connections that send back what they read; each
// connection's bytes go to got when it ends.
func echo(t *testing.T, got chan<- string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				var all strings.Builder
				_, _ = io.Copy(io.MultiWriter(c, &all), c)
				got <- all.String()
			}()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	return ln.Addr().String()
}

// The proxy forwards, holds what comes while stalled until it resumes,
// and cuts a connection after the bytes it was told.
func TestProxyForwardsStallsAndCuts(t *testing.T) {
	p, err := netsim.NewProxy()
	require.NoError(t, err)
	defer p.Close()
	received := make(chan string, 1)
	p.SetTarget(echo(t, received))
	c, err := net.Dial("tcp", p.Addr())
	require.NoError(t, err)
	defer c.Close()
	r := bufio.NewReader(c)
	_, err = io.WriteString(c, "one\n")
	require.NoError(t, err)
	got, err := r.ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "one\n", got)

	p.Stall() // what is written while stalled is held, not lost
	_, err = io.WriteString(c, "two\n")
	require.NoError(t, err)
	p.Resume()
	got, err = r.ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "two\n", got)

	p.CutAfter(3)
	_, err = io.WriteString(c, "three\n")
	require.NoError(t, err)
	_, err = r.ReadString('\n')
	require.Error(t, err, "the connection was cut")
	require.Equal(t, "one\ntwo\nthr", <-received, "the target got the first 3 bytes, then the cut")
}

// A trainer that misbehaves towards the workers (leases of 1ms, which a
// lease of 1ns made a worker drop and reopen sessions without bound and
// die of out-of-memory; a storm of sessions; credit without end) takes no
// more than the workers' limits, and the scenario's trainer beside it is
// served exactly once.
func TestNetworkHostileTrainerLeavesTheOtherServed(t *testing.T) {
	for seed := range uint64(2) {
		res := netsim.Run(t.Context(), netsim.Hostile(seed), netsim.Config{})
		require.Equal(t, sim.Pass, res.Verdict, "%s: %v", res.Scenario.Describe(), res.Violations)
	}
}
