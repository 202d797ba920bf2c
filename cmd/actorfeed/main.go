package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/actorfeed/actorfeed/actors"
	"github.com/actorfeed/actorfeed/readers"
)

func main() {
	// A reader of the output that goes away (run ... | head) must not kill
	// a run mid-write by SIGPIPE, leaving its temporary files behind: the
	// run goes on, and its writes to the closed pipe fail.
	signal.Ignore(syscall.SIGPIPE)
	ctx, stop := stopOnSignal(context.Background())
	err := newRoot().ExecuteContext(ctx)
	var in interrupted
	if errors.As(context.Cause(ctx), &in) && !errors.As(err, &in) && errors.Is(err, context.Canceled) {
		err = fmt.Errorf("%w: %w", in, err) // a reader that saw ctx.Err() was stopped by the signal
	}
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "actorfeed:", userMessage(err))
		os.Exit(exitCode(err))
	}
}

// usageError marks an error in how the command was called.
type usageError struct{ error }

func (u usageError) Unwrap() error { return u.error }

// interrupted is the cause of a run's context when a signal stopped it.
type interrupted struct{ sig syscall.Signal }

func (i interrupted) Error() string { return fmt.Sprintf("stopped by %s", signalName(i.sig)) }

func signalName(s syscall.Signal) string {
	switch s {
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGHUP:
		return "SIGHUP"
	}
	return s.String()
}

// stopOnSignal cancels ctx, with an interrupted cause, on SIGINT, SIGTERM
// or SIGHUP: container runtimes and batch schedulers stop a trainer with
// SIGTERM, a person with Ctrl-C, a closed terminal (and some schedulers)
// with SIGHUP, and all must stop it the same way (promptly, with
// complete outputs and the summary so far). A second signal is left to its
// default action, so a stuck stop can still be killed.
func stopOnSignal(parent context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(parent)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		select {
		case s := <-sigs:
			signal.Stop(sigs)
			cancel(interrupted{s.(syscall.Signal)})
		case <-done:
		}
	}()
	return ctx, func() {
		signal.Stop(sigs)
		close(done)
		cancel(nil)
	}
}

// exitCode is 2 for a bad command line or pipeline spec, 128+N for a stop
// by signal N (as a shell reports a process killed by it), and 1 for any
// other failure.
func exitCode(err error) int {
	var ue usageError
	var in interrupted
	switch {
	case errors.As(err, &ue), errors.Is(err, actors.ErrBadSpec):
		return 2
	case errors.As(err, &in):
		return 128 + int(in.sig)
	}
	return 1
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "actorfeed",
		Short:         "Feed training data to ML trainers",
		SilenceUsage:  true,
		SilenceErrors: true,
		// A word that names no command is a bad command line, said in one
		// line (cobra's own error spans several and has no type).
		Args:                       cobra.ArbitraryArgs,
		SuggestionsMinimumDistance: 2,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return cmd.Help()
			}
			msg := fmt.Sprintf("unknown command %q", args[0])
			if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
				msg += fmt.Sprintf(" (did you mean %s?)", strings.Join(s, " or "))
			}
			return usageError{errors.New(msg + "; actorfeed --help lists them")}
		},
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	// A cache's limit set wrong is refused before anything is read: the
	// cache would otherwise be left unused without a word.
	root.PersistentPreRunE = func(*cobra.Command, []string) error {
		if err := readers.CheckCacheLimits(); err != nil {
			return usageError{err}
		}
		return nil
	}
	root.PersistentFlags().BoolVar(&verbose, "verbose", false, "show an error with the chain of what was under way (stages, files), not one line")
	root.AddCommand(newDemo(), newRun(), newSim(), newBench(), newGen(), newInspect(), newConvert(), newServe(), newVerifyIDs(), newFeed(), newWrite())
	for _, c := range root.Commands() {
		if args := c.Args; args != nil { // a missing or extra argument is a bad command line
			c.Args = func(cmd *cobra.Command, a []string) error {
				if err := args(cmd, a); err != nil {
					return usageError{err}
				}
				return nil
			}
		}
	}
	return root
}
