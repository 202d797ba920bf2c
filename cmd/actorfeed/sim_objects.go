package main

import (
	"context"
	"fmt"
	"io"

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
	fmt.Fprintf(out, "running %d object-store scenarios: s3:// reads through throttling, server errors, cut bodies, stalls, dropped connections and delays, against the same reads from disk\n", o.scenarios)
	failed, requests := 0, 0
	for i := range o.scenarios {
		if err := ctx.Err(); err != nil {
			return err
		}
		sc := objsim.Generate(o.seed + uint64(i))
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
	fmt.Fprintf(out, "%d object-store scenarios: %d passed, %d failed; %d requests\n", o.scenarios, o.scenarios-failed, failed, requests)
	if failed > 0 {
		return fmt.Errorf("%d of %d object-store scenarios failed", failed, o.scenarios)
	}
	return nil
}
