package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/actorfeed/actorfeed/actors"
	"github.com/actorfeed/actorfeed/internal/harness/leakcheck"
	"github.com/actorfeed/actorfeed/internal/serveproc"
	"github.com/actorfeed/actorfeed/service"
)

// nodeFlags are the flags of a data-service node, worker or client.
type nodeFlags struct {
	listen     string
	advertise  string
	tls        service.TLS
	maxMessage int
	keepalive  time.Duration
}

func (n *nodeFlags) flags(f *pflag.FlagSet, listen, listenHelp string) {
	f.StringVar(&n.listen, "listen", listen, listenHelp)
	f.StringVar(&n.advertise, "advertise", "", "host:port the other nodes reach this one at, when not --listen's (behind NAT, or listening on 0.0.0.0)")
	f.StringVar(&n.tls.Cert, "tls-cert", "", "this node's certificate (PEM), for mutual TLS with the other nodes; needed to listen beyond loopback")
	f.StringVar(&n.tls.Key, "tls-key", "", "the key of --tls-cert (PEM)")
	f.StringVar(&n.tls.CA, "tls-ca", "", "the CA that signs every node's certificate (PEM)")
	f.IntVar(&n.maxMessage, "max-message", actors.DefaultMaxMessage, "bytes a batch may have on the wire; the same on every node")
	f.DurationVar(&n.keepalive, "keepalive", service.DefaultKeepalive, "how often an idle connection is pinged (by its dialing side, 10s at least); a peer that does not answer within it is cut")
}

// listenNode starts the process's node of the data service, and raises
// its heap floor (raiseHeapFloor).
func (n *nodeFlags) listenNode() (*service.Node, error) {
	if err := checkInts(intFlag{"--max-message", n.maxMessage, 1, service.MaxMaxMessage}); err != nil {
		return nil, usageError{err}
	}
	if n.keepalive < time.Millisecond {
		return nil, usageError{fmt.Errorf("--keepalive %v: want at least 1ms", n.keepalive)}
	}
	raiseHeapFloor()
	return service.Listen(service.Config{Listen: n.listen, Advertise: n.advertise, TLS: n.tls, MaxMessage: n.maxMessage, Keepalive: n.keepalive})
}

// serveOptions are serve's flags.
type serveOptions struct {
	node       nodeFlags
	roots      []string
	threads    int
	every      time.Duration
	checkLeaks bool
	limits     service.WorkerLimits
}

func newServe() *cobra.Command {
	o := serveOptions{}
	cmd := &cobra.Command{
		Use:   "serve [--listen HOST:PORT] [--root DIR...] [flags]",
		Short: "Run a worker of the data service: read and batch data for remote trainers",
		Long: `Runs a worker node of actorfeed's data service (docs/distributed.md): trainers
started with run --service HOST:PORT,... hand it tasks, runs of their order's
positions, and it reads, shuffles and batches them from files it shares with
them (a shared file system, or the same paths on every node), sending the
batches back under the trainer's credit. It opens files only under the --root
directories (default: the current one), and runs the maps trainers name among
its own (normalize: uint8 images to float32 in [0, 1]; to_tensor: float32
[B, C, H, W] images and int64 labels, as torchvision gives them). It listens on loopback
unless given mutual TLS (--tls-cert, --tls-key, --tls-ca). Unless GOGC is
set, it keeps a heap floor of 64 MiB (the collector first runs near 128 MiB),
as run --service does: a worker's live heap is small and it allocates every
batch afresh. It runs until SIGTERM, SIGINT or SIGHUP.`,
		Example: `  actorfeed serve --listen 127.0.0.1:7070 --root data
  actorfeed run --data 'data/*.recordio' --service 127.0.0.1:7070`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			l := o.limits
			if err := checkInts(intFlag{"--threads", o.threads, 0, actors.MaxConcurrency},
				intFlag{"--max-sessions", l.Sessions, 1, actors.MaxQueue}, intFlag{"--max-sessions-per-trainer", l.SessionsPerClient, 1, actors.MaxQueue},
				intFlag{"--max-tasks", l.Tasks, 1, actors.MaxQueue}, intFlag{"--max-tasks-per-trainer", l.TasksPerClient, 1, actors.MaxQueue},
				intFlag{"--max-credit", l.Credit, 1, actors.MaxQueue}); err != nil {
				return usageError{err}
			}
			if o.every <= 0 {
				return usageError{fmt.Errorf("--progress-every must be positive")}
			}
			return serve(cmd.Context(), cmd.OutOrStdout(), o)
		},
	}
	f := cmd.Flags()
	o.node.flags(f, "127.0.0.1:7070", "host:port to listen on (port 0 picks a free one)")
	f.StringSliceVar(&o.roots, "root", []string{"."}, "directories whose files, or s3://bucket/prefix whose objects, trainers may have read (repeat or comma-separate)")
	f.IntVar(&o.threads, "threads", 0, "file readers per task (default: the cores)")
	f.DurationVar(&o.every, "progress-every", 10*time.Second, "interval of the status lines")
	d := service.DefaultWorkerLimits
	f.IntVar(&o.limits.Sessions, "max-sessions", d.Sessions, "sessions open at once, all trainers'; past it a trainer is told the worker is busy")
	f.IntVar(&o.limits.SessionsPerClient, "max-sessions-per-trainer", d.SessionsPerClient, "sessions open at once of one trainer (by its node's address)")
	f.IntVar(&o.limits.Tasks, "max-tasks", d.Tasks, "tasks running at once, all trainers'")
	f.IntVar(&o.limits.TasksPerClient, "max-tasks-per-trainer", d.TasksPerClient, "tasks running at once of one trainer")
	f.IntVar(&o.limits.Credit, "max-credit", d.Credit, "batches a trainer's grant lets a task send past what it had sent; with --max-message, what a task may have in flight")
	f.BoolVar(&o.checkLeaks, "check-leaks", false, "once stopped, fail if goroutines are left (but the remote's idle gRPC connections'); for tests and sim --network")
	return cmd
}

// serve runs a worker until ctx ends, printing its address first and its
// counters every o.every.
func serve(ctx context.Context, out io.Writer, o serveOptions) error {
	node, err := o.node.listenNode()
	if err != nil {
		return err
	}
	w, err := node.Serve(service.WorkerOptions{Roots: o.roots, Threads: o.threads, MaxMessage: o.node.maxMessage, Maps: builtinMaps, SampleMaps: sampleMaps, Limits: o.limits})
	if err != nil {
		node.Close()
		return err
	}
	fmt.Fprintf(out, "%s%s, data roots %v\n", serveproc.ServingPrefix, node.Address(), o.roots) // what sim and bench wait for
	tick := time.NewTicker(o.every)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			printWorker(out, w.Stats())
		case <-ctx.Done():
			st := w.Stats()
			err := node.Close()
			printWorker(out, st)
			if err == nil && o.checkLeaks {
				err = leakcheck.Find()
			}
			if err == nil { // stopped cleanly, by a signal: exit 128 + it, as run does
				err = context.Cause(ctx)
			}
			return err
		}
	}
}

func printWorker(out io.Writer, st service.WorkerStats) {
	fmt.Fprintf(out, "worker: %d session(s), %d task(s) done, %d failed, %d running, %d batches sent, %.1f MB, %d file indexes from its cache, %d busy answers\n",
		st.Sessions, st.Tasks, st.Failed, st.Running, st.Batches, float64(st.Bytes)/1e6, st.IndexHits, st.Busy)
}
