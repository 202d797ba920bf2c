// Package objsim runs object-store scenarios: a pipeline reads its files
// as objects of a real S3 server (Versity's gateway) through a proxy that
// answers with throttling and server errors, cuts bodies off mid-object,
// stalls answers and bodies, drops connections and delays answers, at
// rates drawn per scenario. Its batches must be those of the same
// pipeline over the same files on disk: each sample once, in the same
// order, in every pass.
package objsim

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/actorfeed/actorfeed/actors"
	"github.com/actorfeed/actorfeed/internal/s3server"
	"github.com/actorfeed/actorfeed/readers"
	"github.com/actorfeed/actorfeed/readers/objstore"
	"github.com/actorfeed/actorfeed/sim/internal/batches"
	"github.com/actorfeed/actorfeed/sim/internal/records"
)

// Scenario is a data set, a pipeline over it and the store's faults.
type Scenario struct {
	Seed                  uint64
	Files, Records, Chunk int
	Batch, Window, Passes int
	// Throttle, Errors and Cuts are the shares of requests answered 503
	// SlowDown, answered 500, and passed on with the body cut off after
	// CutAt bytes.
	Throttle, Errors, Cuts float64
	CutAt                  int64
	// Stalls, Drops and Delays are the shares of requests whose answer
	// stops after StallAt bytes of its body (0: before its headers) until
	// the store gives up on it, whose connection is closed unanswered, and
	// that are answered after Delay.
	Stalls, Drops, Delays float64
	StallAt               int64
	Delay                 time.Duration
	// Cached runs the pipeline over objects with the object cache on, a
	// cache of its own: the first open of each object fetches it through
	// the faults, and later ones (the second pass) read its copy.
	Cached bool
	// Hostile, when set, is a hostile server's behaviour that every
	// request meets instead of the drawn faults (Hostiles).
	Hostile Hostile
}

// Hostile is a behaviour of a broken or malicious store (s3server.Fault).
type Hostile string

// The hostile stores, and what a job must do against each: a body that
// never ends is read as far as its range and the job reads as from disk;
// one that trickles in fails the job, naming the object, within its
// deadline; a listing that loops or never ends fails it, naming the
// prefix. A job that fails delivers nothing twice.
const (
	EndlessBody    Hostile = "endless-body"
	TrickleBody    Hostile = "trickle-body"
	RepeatToken    Hostile = "repeat-token"
	EndlessListing Hostile = "endless-listing"
)

// Hostiles are the scenarios of the hostile stores, one each, run before
// the drawn ones.
func Hostiles() []Scenario {
	base := Scenario{Seed: 1, Files: 2, Records: 300, Chunk: 1024, Batch: 16, Window: 16, Passes: 1}
	var out []Scenario
	for _, h := range []Hostile{EndlessBody, TrickleBody, RepeatToken, EndlessListing} {
		sc := base
		sc.Hostile = h
		out = append(out, sc)
	}
	return out
}

// stallAfter is how long the scenarios' store waits on a silent
// connection: short, so that a stall costs the run little. For the same
// reason a body must come at minRate at least, and a listing ends within
// bounds far below the defaults (objstore.Options).
const (
	stallAfter   = 250 * time.Millisecond
	minRate      = 16 << 20
	maxMatches   = 100_000
	maxListPages = 1000
	// trickle is how often a trickling body sends a byte.
	trickle = 5 * time.Millisecond
)

// Generate draws the scenario of seed: 2 to 4 files of a few hundred
// records, one or two passes, and up to a fifth of the requests failing.
func Generate(seed uint64) Scenario {
	rng := rand.New(rand.NewPCG(seed, 0x6f626a656374)) // "object"
	return Scenario{Seed: seed, Files: 2 + rng.IntN(3), Records: 100 + rng.IntN(500), Chunk: 512 << rng.IntN(4),
		Batch: []int{4, 8, 16, 32}[rng.IntN(4)], Window: []int{0, 16, 64}[rng.IntN(3)], Passes: 1 + rng.IntN(2),
		Throttle: 0.1 * rng.Float64(), Errors: 0.05 * rng.Float64(), Cuts: 0.1 * rng.Float64(), CutAt: int64(1 + rng.IntN(4096)),
		Stalls: 0.03 * rng.Float64(), Drops: 0.05 * rng.Float64(), Delays: 0.1 * rng.Float64(),
		StallAt: int64(rng.IntN(4096)), Delay: time.Duration(1+rng.IntN(20)) * time.Millisecond,
		Cached: rng.IntN(2) == 0}
}

// Describe is the scenario in a line.
func (sc Scenario) Describe() string {
	if sc.Hostile != "" {
		return fmt.Sprintf("%s: %d files x %d records, batch %d, window %d, a store whose every answer is hostile", sc.Hostile, sc.Files, sc.Records, sc.Batch, sc.Window)
	}
	cached := ""
	if sc.Cached {
		cached = ", object cache on"
	}
	return fmt.Sprintf("seed %d: %d files x %d records (chunks of %d B), batch %d, window %d, %d pass(es)%s; requests: %.0f%% throttled, %.0f%% 500, %.0f%% cut at %d B, %.0f%% stalled at %d B, %.0f%% dropped, %.0f%% delayed %v",
		sc.Seed, sc.Files, sc.Records, sc.Chunk, sc.Batch, sc.Window, sc.Passes, cached, 100*sc.Throttle, 100*sc.Errors, 100*sc.Cuts, sc.CutAt,
		100*sc.Stalls, sc.StallAt, 100*sc.Drops, 100*sc.Delays, sc.Delay)
}

// Result is what a scenario's run found.
type Result struct {
	Scenario   Scenario
	Violations []string
	Requests   int // made of the proxy
	Duration   time.Duration
}

// Passed reports whether the run found nothing wrong.
func (r Result) Passed() bool { return len(r.Violations) == 0 }

// Env is a gateway, a proxy before it and a store that reads through the
// proxy, shared by the scenarios of a run (one at a time).
type Env struct {
	srv   *s3server.Server
	proxy *s3server.Proxy
	store *objstore.Store
	dir   string
	n     int // scenarios run: each has a bucket of its own
}

// Start starts the gateway (found by s3server.Find) and the proxy.
func Start(ctx context.Context) (*Env, error) {
	bin, err := s3server.Find()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "actorfeed-objsim-")
	if err != nil {
		return nil, err
	}
	e := &Env{dir: dir}
	if err = os.Mkdir(filepath.Join(dir, "store"), 0o755); err == nil {
		e.srv, err = s3server.Launch(bin, filepath.Join(dir, "store"))
	}
	if err == nil {
		e.proxy, err = s3server.StartProxy(e.srv)
	}
	if err == nil {
		e.store, err = objstore.New(ctx, objstore.Options{Endpoint: e.proxy.URL, AccessKey: s3server.AccessKey,
			SecretKey: s3server.SecretKey, Backoff: time.Millisecond, Stall: stallAfter, MinRate: minRate,
			MaxMatches: maxMatches, MaxListPages: maxListPages})
	}
	if err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}

// Close stops the proxy and the gateway and removes their files.
func (e *Env) Close() {
	if e.proxy != nil {
		e.proxy.Close()
	}
	if e.srv != nil {
		e.srv.Close()
	}
	os.RemoveAll(e.dir)
}

// Run writes sc's data set to disk and to a bucket of its own, reads it
// both ways, the objects through the faults, and compares the batches.
func Run(ctx context.Context, e *Env, sc Scenario) (res Result) {
	res.Scenario = sc
	start := time.Now()
	defer func() { res.Duration = time.Since(start) }()
	fail := func(err error) Result {
		res.Violations = append(res.Violations, err.Error())
		return res
	}
	e.n++
	bucket := fmt.Sprintf("scenario-%d", e.n)
	e.proxy.SetFaults(nil)
	if err := e.srv.MakeBucket(ctx, bucket); err != nil {
		return fail(err)
	}
	local := filepath.Join(e.dir, bucket)
	if err := os.MkdirAll(local, 0o755); err != nil {
		return fail(err)
	}
	var paths, urls []string
	for f := range sc.Files {
		path := filepath.Join(local, fmt.Sprintf("part-%d.recordio", f))
		url := fmt.Sprintf("s3://%s/part-%d.recordio", bucket, f)
		if err := records.Write(path, f, sc.Records, sc.Chunk, false); err != nil {
			return fail(err)
		}
		if err := e.store.Upload(ctx, url, path); err != nil {
			return fail(err)
		}
		paths, urls = append(paths, path), append(urls, url)
	}
	want, err := passes(ctx, sc, paths, readers.OpenOptions{})
	if err != nil {
		return fail(fmt.Errorf("the run from disk: %w", err))
	}
	if sc.Hostile != "" {
		res.Violations = e.hostile(ctx, sc, bucket, urls, want)
		res.Requests = e.proxy.Requests()
		e.proxy.SetFaults(nil)
		return res
	}
	opts := readers.OpenOptions{Objects: e.store}
	if sc.Cached {
		opts.ObjectCache = filepath.Join(e.dir, bucket+"-cache")
	}
	e.proxy.SetFaults(sc.faults())
	got, err := passes(ctx, sc, urls, opts)
	res.Requests = e.proxy.Requests()
	e.proxy.SetFaults(nil)
	if err != nil {
		return fail(fmt.Errorf("the run from objects: %w", err))
	}
	res.Violations = append(res.Violations, compare(want, got)...)
	return res
}

// compare says in which passes got's batches are not want's.
func compare(want, got [][][]uint64) []string {
	var out []string
	for p := range want {
		if p >= len(got) || !slices.EqualFunc(want[p], got[p], slices.Equal[[]uint64]) {
			out = append(out, fmt.Sprintf("pass %d: the batches from objects differ from those from disk", p))
		}
	}
	return out
}

// faults draws what the proxy does to each request, from sc's rates.
func (sc Scenario) faults() func(int, *http.Request) s3server.Fault {
	rng := rand.New(rand.NewPCG(sc.Seed, 0x6661756c7473)) // "faults"
	kinds := []struct {
		share float64
		fault s3server.Fault
	}{
		{sc.Throttle, s3server.Fault{Status: http.StatusServiceUnavailable}},
		{sc.Errors, s3server.Fault{Status: http.StatusInternalServerError}},
		{sc.Cuts, s3server.Fault{Cut: sc.CutAt}},
		{sc.Stalls, stall(sc.StallAt)},
		{sc.Drops, s3server.Fault{Drop: true}},
		{sc.Delays, s3server.Fault{Delay: sc.Delay}},
	}
	return func(int, *http.Request) s3server.Fault {
		x := rng.Float64()
		for _, k := range kinds {
			if x < k.share {
				return k.fault
			}
			x -= k.share
		}
		return s3server.Fault{}
	}
}

// stall is a stall after at bytes of the body; at 0, before the answer.
func stall(at int64) s3server.Fault {
	if at == 0 {
		return s3server.Fault{Delay: time.Hour}
	}
	return s3server.Fault{Stall: at}
}

// passes reads sc.Passes passes of the pipeline over paths, opened with
// opts, and returns each batch's ids.
func passes(ctx context.Context, sc Scenario, paths []string, opts readers.OpenOptions) ([][][]uint64, error) {
	chain := []actors.Stage{actors.Files{Paths: paths, Threads: 2}}
	if sc.Window > 0 {
		chain = append(chain, actors.Shuffle{Window: sc.Window, Seed: sc.Seed})
	}
	chain = append(chain, actors.Batch{Size: sc.Batch})
	open := func(ctx context.Context, entry string) (readers.Reader, error) {
		return readers.OpenContext(ctx, entry, opts)
	}
	p, err := actors.New(chain, actors.Options{GroupSize: 8, Open: open})
	if err != nil {
		return nil, err
	}
	defer p.Close()
	return batches.Passes(ctx, p, sc.Passes, nil)
}
