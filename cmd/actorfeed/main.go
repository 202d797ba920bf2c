package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"

	"github.com/spf13/cobra"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := newRoot().ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "actorfeed:", err)
		var ue usageError
		if errors.As(err, &ue) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

// usageError marks an error in how the command was called.
type usageError struct{ error }

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "actorfeed",
		Short:         "Feed training data to ML trainers",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(newDemo(), newRun(), newSim(), newBench(), newGen(), newInspect(), newConvert())
	return root
}
