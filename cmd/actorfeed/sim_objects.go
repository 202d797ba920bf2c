package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/actorfeed/actorfeed/sim/objsim"
)

// runObjSim runs --scenarios object-store scenarios from --seed, one at a
// time against one gateway, and prints each failure and a summary line.
func runObjSim(ctx context.Context, out io.Writer, o simOptions) error {
	e, err := objsim.Start(ctx)
	if err != nil {
		return err
	}
	defer e.Close()
	hostiles := objsim.Hostiles()
	fmt.Fprintf(out, "running %d hostile stores (%s), then %d object-store scenarios: s3:// reads through throttling, server errors, cut bodies, stalls, dropped connections and delays, against the same reads from disk\n",
		len(hostiles), hostileNames(hostiles), o.scenarios)
	failed, requests := 0, 0
	total := len(hostiles) + o.scenarios
	for i := range total {
		if err := ctx.Err(); err != nil {
			return err
		}
		var sc objsim.Scenario
		if i < len(hostiles) {
			sc = hostiles[i]
		} else {
			sc = objsim.Generate(o.seed + uint64(i-len(hostiles)))
		}
		sctx, cancel := context.WithTimeout(ctx, o.deadline)
		res := objsim.Run(sctx, e, sc)
		cancel()
		requests += res.Requests
		if !res.Passed() {
			failed++
			fmt.Fprintf(out, "FAIL %s\n  %v\n", sc.Describe(), res.Violations)
		} else if o.show == "all" {
			fmt.Fprintf(out, "ok   %s (%d requests, %v)\n", sc.Describe(), res.Requests, res.Duration.Round(1e6))
		}
	}
	fmt.Fprintf(out, "%d object-store scenarios: %d passed, %d failed; %d requests\n", total, total-failed, failed, requests)
	if failed > 0 {
		return fmt.Errorf("%d of %d object-store scenarios failed", failed, total)
	}
	return nil
}

// hostileNames lists the hostile stores' behaviours.
func hostileNames(scs []objsim.Scenario) string {
	names := make([]string, len(scs))
	for i, sc := range scs {
		names[i] = string(sc.Hostile)
	}
	return strings.Join(names, ", ")
}
