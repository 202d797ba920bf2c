package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/actorfeed/actorfeed/actors"
	"github.com/actorfeed/actorfeed/readers"
	"github.com/actorfeed/actorfeed/readers/format"
	"github.com/actorfeed/actorfeed/readers/order"
	"github.com/actorfeed/actorfeed/readers/recordio"
)

// verifyHelp is the verify-ids command's long help.
const verifyHelp = `Reads the --emit-ids files of every rank and every run of a job (before
and after its resumes, in any order) and checks them against the data
(--data, as run takes it): for each epoch, the records delivered, lost,
duplicated, padded (repeats that --remainder pad adds, marked "padding")
and left out by design (the remainder that --remainder drop leaves out, and
the last batch --drop-last drops, which run writes as "dropped" lines), with
the first ids of each kind. It exits 1 when a record of an epoch is lost or
delivered twice, or an id names no record of the data. A blended job's ids
(run --weights) are checked against its blend: give the job's --weights,
--weights-from, --blend-samples and --global-batch.`

// verifyOptions are verify-ids' flags.
type verifyOptions struct {
	data        []string
	epochs      int
	show        int
	blend       blendFlags
	globalBatch int
	remainder   string
}

func newVerifyIDs() *cobra.Command {
	o := verifyOptions{}
	cmd := &cobra.Command{
		Use:   "verify-ids --data FILES... IDS.jsonl...",
		Short: "Check a job's --emit-ids files: every record of every epoch exactly once",
		Long:  verifyHelp,
		Example: `  actorfeed verify-ids --data 'data/*.recordio' 'ids-*.jsonl'
  actorfeed verify-ids --data 'data/*.recordio' --epochs 3 a.jsonl b.jsonl`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(o.data) == 0 {
				return usageError{errors.New("give the data the ids name with --data")}
			}
			if err := checkInts(intFlag{"--epochs", o.epochs, 0, actors.MaxEpoch}, intFlag{"--show", o.show, 0, 1000}); err != nil {
				return usageError{err}
			}
			return verifyIDs(cmd.Context(), cmd.OutOrStdout(), o, args)
		},
	}
	f := cmd.Flags()
	f.Var(entriesValue{&o.data}, "data", "the files the job read, as run's --data (paths, globs or braces, each optionally format:path)")
	f.IntVar(&o.epochs, "epochs", 0, "the epochs the job ran: any of 0 .. N-1 missing is lost (0: the epochs the files name)")
	f.IntVar(&o.show, "show", 5, "ids of each kind to show per epoch")
	o.blend.flags(f)
	f.IntVar(&o.globalBatch, "global-batch", 0, "with --weights-from: the job's --global-batch, which its steps are counted in")
	f.StringVar(&o.remainder, "remainder", "drop", "with --weights-from: the job's --remainder")
	return cmd
}

// tally is what the ids files say of one epoch.
type tally struct {
	seen    map[string]int // non-padding deliveries
	padded  int
	dropped map[string]bool
}

func verifyIDs(ctx context.Context, out io.Writer, o verifyOptions, idFiles []string) error {
	files, err := expand(ctx, o.data)
	if err != nil {
		return err
	}
	if err := o.blend.check(len(files), o.globalBatch > 0); err != nil {
		return err
	}
	records, err := recordNames(ctx, files, o)
	if err != nil {
		return err
	}
	epochs := map[int]*tally{}
	for e := range o.epochs {
		epochs[e] = newTally()
	}
	paths, err := globAll(idFiles)
	if err != nil {
		return err
	}
	for _, p := range paths {
		if err := readIDFile(ctx, p, epochs); err != nil {
			return err
		}
	}
	return reportIDs(out, records, epochs, o.show)
}

func newTally() *tally { return &tally{seen: map[string]int{}, dropped: map[string]bool{}} }

// globAll expands the ids files' globs (a pattern that matches nothing is
// an error); a file named twice is read once.
func globAll(entries []string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for _, e := range entries {
		m, err := globEntry("ids", e)
		if err != nil {
			return nil, err
		}
		for _, p := range m {
			if key := fileKey(p); !seen[key] {
				seen[key] = true
				out = append(out, p)
			}
		}
	}
	return out, nil
}

// recordNames gives the ids of every record of an epoch of files, as run
// names them: each record of each file, or of a blend (--weights) the
// ids of the epoch's positions, which count each file's positions from
// the start of the run.
func recordNames(ctx context.Context, files []string, o verifyOptions) (func(epoch int) []string, error) {
	names := baseNames([]actors.Stage{actors.Files{Paths: files}})
	var all []string
	var splits []order.Split
	for i, e := range files {
		n, err := countRecords(ctx, e)
		if err != nil {
			return nil, fmt.Errorf("--data %s: %w", e, err)
		}
		splits = append(splits, order.Split{File: i, Count: n})
		for r := range n {
			all = append(all, fmt.Sprintf("%s#%d", names[i], r))
		}
	}
	if len(o.blend.weights) == 0 {
		return func(int) []string { return all }, nil
	}
	blend, steps := o.blend.blend()
	rem, err := order.ParseRemainder(o.remainder)
	if err != nil {
		return nil, fmt.Errorf("--remainder: %w", err)
	}
	blend, err = actors.BlendAt(actors.Files{Blend: blend, BlendSteps: steps}, uint64(len(all)), actors.Shard{GlobalBatch: o.globalBatch, Remainder: rem})
	if err == nil {
		var ord *order.Order
		if ord, err = order.New(splits, order.Config{Files: len(files), Blend: blend}); err == nil {
			return func(e int) []string {
				ep := ord.Epoch(uint64(e))
				out := make([]string, ord.Len())
				for g := range ord.Len() {
					f, q := ep.At(g)
					out[g] = fmt.Sprintf("%s#%d", names[f], q)
				}
				return out
			}, nil
		}
	}
	return nil, fmt.Errorf("--weights: %w", err)
}

// countRecords is how many records a data file holds: from a RecordIO
// file's chunk index, otherwise by reading it.
func countRecords(ctx context.Context, entry string) (uint64, error) {
	name, path, err := readers.ParseEntry(entry)
	if err != nil {
		return 0, err
	}
	if name == "recordio" || (name == "" && formatOf(path) == "recordio") {
		fh, size, err := format.OpenFile("recordio", path)
		if err != nil {
			return 0, err
		}
		defer fh.Close()
		idx, err := recordio.LoadIndex(fh, size, path)
		if err == nil {
			err = idx.Err()
		}
		if err != nil {
			return 0, err
		}
		return uint64(idx.NumRecords), nil
	}
	r, err := readers.Open(entry, readers.OpenOptions{})
	if err != nil {
		return 0, err
	}
	defer r.Close()
	var n uint64
	for {
		if _, err := r.Next(ctx); errors.Is(err, io.EOF) {
			return n, nil
		} else if err != nil {
			return 0, err
		}
		n++
	}
}

// idRecord is a line of an --emit-ids file: a consumed batch, or the
// records an epoch leaves out by design.
type idRecord struct {
	Epoch   int      `json:"epoch"`
	IDs     []string `json:"ids"`
	Padding int      `json:"padding"`
	Dropped []string `json:"dropped"`
}

// readIDFile adds an ids file's lines to epochs.
func readIDFile(ctx context.Context, path string, epochs map[int]*tally) error {
	f, _, err := format.OpenFile("ids", path) // a regular file: a named pipe would block
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 256<<20) // a batch's line: its ids
	for line := 1; sc.Scan(); line++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		var l idRecord
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			return fmt.Errorf("%s:%d: not an --emit-ids line: %w", path, line, err)
		}
		if l.Epoch < 0 || l.Epoch > actors.MaxEpoch || l.Padding < 0 || l.Padding > len(l.IDs) {
			return fmt.Errorf("%s:%d: not an --emit-ids line: epoch %d, padding %d of %d ids", path, line, l.Epoch, l.Padding, len(l.IDs))
		}
		t := epochs[l.Epoch]
		if t == nil {
			t = newTally()
			epochs[l.Epoch] = t
		}
		for _, id := range l.IDs[:len(l.IDs)-l.Padding] {
			t.seen[id]++
		}
		t.padded += l.Padding
		for _, id := range l.Dropped {
			t.dropped[id] = true
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// epochVerdict is one epoch's counts, and the first ids of each kind.
type epochVerdict struct {
	delivered, dropped, padded int
	lost, twice, unknown       []string
}

// judge compares an epoch's tally with the data's records.
func (t *tally) judge(records []string) epochVerdict {
	v := epochVerdict{padded: t.padded}
	known := make(map[string]bool, len(records))
	for _, id := range records {
		known[id] = true
		switch n := t.seen[id]; {
		case n > 0:
			v.delivered++
			if n > 1 {
				v.twice = append(v.twice, fmt.Sprintf("%s (%d times)", id, n))
			}
		case t.dropped[id]:
			v.dropped++
		default:
			v.lost = append(v.lost, id)
		}
	}
	for id := range t.seen {
		if !known[id] {
			v.unknown = append(v.unknown, id)
		}
	}
	slices.Sort(v.unknown)
	return v
}

// reportIDs prints a row per epoch and the first ids of each kind, and
// fails when any epoch lost, repeated or made up a record.
func reportIDs(out io.Writer, recordsOf func(epoch int) []string, epochs map[int]*tally, show int) error {
	keys := slices.Sorted(maps.Keys(epochs))
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "epoch\trecords\tdelivered\tlost\tduplicated\tpadded\tdropped\tunknown\t")
	var bad []string
	var details []string
	for _, e := range keys {
		records := recordsOf(e)
		v := epochs[e].judge(records)
		fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t\n", e, len(records), v.delivered, len(v.lost), len(v.twice), v.padded, v.dropped, len(v.unknown))
		for _, k := range []struct {
			what string
			ids  []string
		}{{"lost", v.lost}, {"duplicated", v.twice}, {"unknown", v.unknown}} {
			if len(k.ids) > 0 {
				bad = append(bad, fmt.Sprintf("epoch %d: %d %s", e, len(k.ids), k.what))
				details = append(details, fmt.Sprintf("epoch %d, %s: %s", e, k.what, firstFew(k.ids, show)))
			}
		}
	}
	tw.Flush()
	for _, d := range details {
		fmt.Fprintln(out, d)
	}
	if len(bad) > 0 {
		return fmt.Errorf("not exactly once: %s", strings.Join(bad, "; "))
	}
	fmt.Fprintf(out, "every record of %d epoch(s) delivered exactly once\n", len(keys))
	return nil
}

// firstFew is up to n ids, and how many more there are.
func firstFew(ids []string, n int) string {
	if len(ids) <= n {
		return strings.Join(ids, " ")
	}
	return fmt.Sprintf("%s ... and %d more", strings.Join(ids[:n], " "), len(ids)-n)
}
