package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/actorfeed/actorfeed/actors"
	"github.com/actorfeed/actorfeed/readers/objstore"
)

// ---- Prometheus ----

// collector exports a pipeline's counters from a private registry, read on
// every scrape.
type collector struct {
	p                               func() *actors.Pipeline
	items, held, demand, restarts   *prometheus.Desc
	batches, instances, busy, waits *prometheus.Desc
	// The service's workers (run --service).
	wBatches, wBytes, wTasks, wLost, wAlive, wCredit, wReassigned *prometheus.Desc
	// The object stores read (s3:// URLs), the process's.
	oRequests, oBytes, oCopied *prometheus.Desc
}

func newCollector(p func() *actors.Pipeline) *collector {
	stage := []string{"stage", "kind"}
	dev := []string{"device"}
	wrk := []string{"worker"}
	return &collector{p: p,
		items:     prometheus.NewDesc("actorfeed_stage_items_total", "Items a stage produced (a consumer: consumed).", stage, nil),
		held:      prometheus.NewDesc("actorfeed_stage_buffered_items", "Items a stage holds: produced and not acknowledged, or queued.", stage, nil),
		demand:    prometheus.NewDesc("actorfeed_stage_outstanding_demand", "Demand outstanding on a stage's upstream link.", stage, nil),
		restarts:  prometheus.NewDesc("actorfeed_stage_restarts_total", "Restarts of a stage's actor.", stage, nil),
		batches:   prometheus.NewDesc("actorfeed_device_batches_total", "Batches a device stepped.", dev, nil),
		instances: prometheus.NewDesc("actorfeed_device_samples_total", "Samples a device stepped.", dev, nil),
		busy:      prometheus.NewDesc("actorfeed_device_busy_seconds_total", "Time a device spent in steps.", dev, nil),
		waits:     prometheus.NewDesc("actorfeed_device_wait_seconds_total", "Time a device waited for data.", dev, nil),
		wBatches:  prometheus.NewDesc("actorfeed_service_worker_batches_total", "Batches taken in from a worker of the service.", wrk, nil),
		wBytes:    prometheus.NewDesc("actorfeed_service_worker_bytes_total", "Bytes on the wire of the batches taken in from a worker.", wrk, nil),
		wTasks:    prometheus.NewDesc("actorfeed_service_worker_tasks_total", "Tasks a worker completed.", wrk, nil),
		wLost:     prometheus.NewDesc("actorfeed_service_worker_lost_total", "Times a worker was taken for lost and its tasks handed to others.", wrk, nil),
		wAlive:    prometheus.NewDesc("actorfeed_service_worker_alive", "1 while a worker's session is alive.", wrk, nil),
		wCredit:   prometheus.NewDesc("actorfeed_service_worker_credit", "Batches a worker may send now: granted to its running attempts, not taken in yet.", wrk, nil),
		wReassigned: prometheus.NewDesc("actorfeed_service_worker_reassigned_total",
			"Tasks of a worker taken back and handed out again (lost with it, batches lost on the way, a restart of the service stage).", wrk, nil),
		oRequests: prometheus.NewDesc("actorfeed_object_requests_total", "Requests made of object stores (s3:// URLs): lookups, listings, ranged reads, retries.", nil, nil),
		oBytes:    prometheus.NewDesc("actorfeed_object_bytes_total", "Bytes read from object stores.", nil, nil),
		oCopied:   prometheus.NewDesc("actorfeed_object_cache_bytes_total", "Bytes of objects read from their local copies (ACTORFEED_OBJECT_CACHE).", nil, nil),
	}
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.items, c.held, c.demand, c.restarts, c.batches, c.instances, c.busy, c.waits,
		c.wBatches, c.wBytes, c.wTasks, c.wLost, c.wAlive, c.wCredit, c.wReassigned, c.oRequests, c.oBytes, c.oCopied} {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	p := c.p()
	if p == nil {
		return
	}
	requests, bytes := objstore.Totals()
	ch <- prometheus.MustNewConstMetric(c.oRequests, prometheus.CounterValue, float64(requests))
	ch <- prometheus.MustNewConstMetric(c.oBytes, prometheus.CounterValue, float64(bytes))
	ch <- prometheus.MustNewConstMetric(c.oCopied, prometheus.CounterValue, float64(objstore.CopiedTotal()))
	for _, s := range p.StageStats() {
		ch <- prometheus.MustNewConstMetric(c.items, prometheus.CounterValue, float64(s.Items), s.Stage, s.Kind)
		ch <- prometheus.MustNewConstMetric(c.held, prometheus.GaugeValue, float64(s.Held), s.Stage, s.Kind)
		ch <- prometheus.MustNewConstMetric(c.demand, prometheus.GaugeValue, float64(s.Demand), s.Stage, s.Kind)
		ch <- prometheus.MustNewConstMetric(c.restarts, prometheus.CounterValue, float64(s.Restarts), s.Stage, s.Kind)
	}
	for _, d := range p.Stats().Devices {
		id := strconv.Itoa(d.Device)
		ch <- prometheus.MustNewConstMetric(c.batches, prometheus.CounterValue, float64(d.Batches), id)
		ch <- prometheus.MustNewConstMetric(c.instances, prometheus.CounterValue, float64(d.Instances), id)
		ch <- prometheus.MustNewConstMetric(c.busy, prometheus.CounterValue, d.Busy.Seconds(), id)
		ch <- prometheus.MustNewConstMetric(c.waits, prometheus.CounterValue, d.Wait.Seconds(), id)
	}
	for _, w := range p.ServiceWorkers() {
		alive := 0.0
		if w.State == actors.ServiceWorkerAlive {
			alive = 1
		}
		ch <- prometheus.MustNewConstMetric(c.wBatches, prometheus.CounterValue, float64(w.Batches), w.Addr)
		ch <- prometheus.MustNewConstMetric(c.wBytes, prometheus.CounterValue, float64(w.Bytes), w.Addr)
		ch <- prometheus.MustNewConstMetric(c.wTasks, prometheus.CounterValue, float64(w.Tasks), w.Addr)
		ch <- prometheus.MustNewConstMetric(c.wLost, prometheus.CounterValue, float64(w.Lost), w.Addr)
		ch <- prometheus.MustNewConstMetric(c.wAlive, prometheus.GaugeValue, alive, w.Addr)
		ch <- prometheus.MustNewConstMetric(c.wCredit, prometheus.GaugeValue, float64(w.Credit), w.Addr)
		ch <- prometheus.MustNewConstMetric(c.wReassigned, prometheus.CounterValue, float64(w.Reassigned), w.Addr)
	}
}

// metricsServer serves /metrics for a pipeline until stopped.
type metricsServer struct {
	srv  *http.Server
	addr string
	done chan error
}

// loopback makes an address without a host listen on 127.0.0.1 only;
// an explicit host (0.0.0.0 included) is the user's choice.
func loopback(addr string, expose bool) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("--metrics-addr %q: want host:port, such as 127.0.0.1:9100", addr)
	}
	if _, err := net.LookupPort("tcp", port); err != nil {
		return "", fmt.Errorf("--metrics-addr %q: bad port: %w", addr, err)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	if ip := net.ParseIP(host); !expose && host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return "", fmt.Errorf("--metrics-addr %q is reachable from other machines: add --metrics-expose to mean it", addr)
	}
	return net.JoinHostPort(host, port), nil
}

func serveMetrics(addr string, expose bool, p func() *actors.Pipeline) (*metricsServer, error) {
	addr, err := loopback(addr, expose)
	if err != nil {
		return nil, err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(newCollector(p))
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr: %w", err)
	}
	m := &metricsServer{srv: &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}, addr: ln.Addr().String(), done: make(chan error, 1)}
	go func() { m.done <- m.srv.Serve(ln) }()
	return m, nil
}

// stop shuts the server down within a second.
func (m *metricsServer) stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err := m.srv.Shutdown(ctx)
	if serr := <-m.done; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return err
}

// ---- time series for the report ----

// sample is the pipeline at one moment.
type sample struct {
	at      time.Duration // since the run started
	samples int           // consumed by all devices so far
	busy    []time.Duration
	held    map[string]int // per stage
}

// recorder samples a running pipeline at an interval, keeping at most
// maxSamples samples: when full it drops every other one and doubles the
// interval, so memory stays bounded on long runs.
type recorder struct {
	every time.Duration
	max   int
	// counted, when set, is the samples delivered so far, in place of the
	// devices' (a feed has no devices: its loader consumes).
	counted func() int

	mu      sync.Mutex
	samples []sample
	stopc   chan struct{}
	wg      sync.WaitGroup
}

const maxSamples = 512

func newRecorder(every time.Duration) *recorder { return &recorder{every: every, max: maxSamples} }

func (r *recorder) start(p *actors.Pipeline, start time.Time) {
	r.stopc = make(chan struct{})
	r.take(p, start)
	r.wg.Go(func() {
		t := time.NewTimer(r.every)
		defer t.Stop()
		for {
			select {
			case <-r.stopc:
				r.take(p, start)
				return
			case <-t.C:
				r.take(p, start)
				t.Reset(r.every)
			}
		}
	})
}

func (r *recorder) take(p *actors.Pipeline, start time.Time) {
	s := sample{at: time.Since(start), held: map[string]int{}}
	for _, d := range p.Stats().Devices {
		s.samples += d.Instances
		s.busy = append(s.busy, d.Busy)
	}
	if r.counted != nil {
		s.samples = r.counted()
	}
	for _, st := range p.StageStats() {
		s.held[st.Stage] = st.Held
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.samples = append(r.samples, s)
	if len(r.samples) >= r.max {
		kept := r.samples[:0]
		for i := 0; i < len(r.samples); i += 2 {
			kept = append(kept, r.samples[i])
		}
		r.samples = kept
		r.every *= 2
	}
}

func (r *recorder) stop() []sample {
	close(r.stopc)
	r.wg.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.samples
}
