package main

import (
	"fmt"
	"image/color"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/actorfeed/actorfeed/actors"
	"github.com/actorfeed/actorfeed/internal/atomicfile"
)

// writeReport draws a run into dir: throughput.png, devices.png,
// buffers.png, and the actor tree as actors.png and actors.dot. It returns
// the files written.
func writeReport(dir string, series []sample, stages []actors.StageStats, devices int) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if len(series) < 2 {
		return nil, fmt.Errorf("the run was too short to sample (%d samples); nothing to draw", len(series))
	}
	var written []string
	save := func(name string, p *plot.Plot) error {
		path := filepath.Join(dir, name)
		if err := savePlot(p, 8*vg.Inch, 4*vg.Inch, path); err != nil {
			return fmt.Errorf("report: %w", err)
		}
		written = append(written, path)
		return nil
	}

	// Throughput: samples/s between consecutive samples.
	tp := plot.New()
	tp.Title.Text = "Throughput"
	tp.X.Label.Text, tp.Y.Label.Text = "seconds", "samples/s"
	rate := make(plotter.XYs, 0, len(series)-1)
	for i := 1; i < len(series); i++ {
		dt := (series[i].at - series[i-1].at).Seconds()
		if dt > 0 {
			rate = append(rate, plotter.XY{X: series[i].at.Seconds(), Y: float64(series[i].samples-series[i-1].samples) / dt})
		}
	}
	if err := plotutil.AddLines(tp, "all devices", rate); err != nil {
		return nil, err
	}
	if err := save("throughput.png", tp); err != nil {
		return nil, err
	}

	// Device utilisation: busy fraction of each interval.
	up := plot.New()
	up.Title.Text = "Device utilisation"
	up.X.Label.Text, up.Y.Label.Text = "seconds", "busy fraction"
	up.Y.Min, up.Y.Max = 0, 1.05
	var lines []any
	for d := range devices {
		xy := make(plotter.XYs, 0, len(series)-1)
		for i := 1; i < len(series); i++ {
			dt := series[i].at - series[i-1].at
			if dt > 0 && d < len(series[i].busy) && d < len(series[i-1].busy) {
				xy = append(xy, plotter.XY{X: series[i].at.Seconds(), Y: min(1, float64(series[i].busy[d]-series[i-1].busy[d])/float64(dt))})
			}
		}
		lines = append(lines, fmt.Sprintf("device %d", d), xy)
	}
	if err := plotutil.AddLines(up, lines...); err != nil {
		return nil, err
	}
	if err := save("devices.png", up); err != nil {
		return nil, err
	}

	// Buffer depth per stage.
	bp := plot.New()
	bp.Title.Text = "Buffer depth per stage (items held)"
	bp.X.Label.Text, bp.Y.Label.Text = "seconds", "items"
	names := make([]string, 0, len(stages))
	for _, s := range stages {
		names = append(names, s.Stage)
	}
	lines = lines[:0]
	for _, name := range names {
		xy := make(plotter.XYs, len(series))
		for i, s := range series {
			xy[i] = plotter.XY{X: s.at.Seconds(), Y: float64(s.held[name])}
		}
		lines = append(lines, name, xy)
	}
	if err := plotutil.AddLines(bp, lines...); err != nil {
		return nil, err
	}
	bp.Legend.Top = true
	if err := save("buffers.png", bp); err != nil {
		return nil, err
	}

	tree, err := drawTree(filepath.Join(dir, "actors.png"), stages)
	if err != nil {
		return nil, err
	}
	written = append(written, tree)
	dot := filepath.Join(dir, "actors.dot")
	if err := atomicfile.Write(dot, func(w io.Writer) error { _, err := io.WriteString(w, treeDOT(stages)); return err }); err != nil {
		return nil, err
	}
	return append(written, dot), nil
}

// treeDOT is the pipeline's actor tree in Graphviz: the supervisor and its
// children (solid), and the data flow between them (dashed).
func treeDOT(stages []actors.StageStats) string {
	var b strings.Builder
	b.WriteString("digraph pipeline {\n  rankdir=LR;\n  node [shape=box, fontname=\"Helvetica\"];\n")
	b.WriteString("  supervisor [label=\"supervisor\\n(restart intensity)\"];\n")
	for _, s := range stages {
		fmt.Fprintf(&b, "  %q [label=\"%s\\n%s: %d items, %d restarts\"];\n  supervisor -> %q;\n", s.Stage, s.Stage, s.Kind, s.Items, s.Restarts, s.Stage)
	}
	for _, e := range dataFlow(stages) {
		fmt.Fprintf(&b, "  %q -> %q [style=dashed, color=gray40];\n", e[0], e[1])
	}
	b.WriteString("}\n")
	return b.String()
}

// dataFlow lists which stage feeds which: file readers feed open_files,
// each stage the next, the last one every consumer.
func dataFlow(stages []actors.StageStats) [][2]string {
	var edges [][2]string
	var prev string
	var consumers []string
	for _, s := range stages {
		switch {
		case s.Kind == actors.KindFileReader:
			// fed into the open_files stage that follows
		case s.Kind == actors.KindDevice || s.Kind == actors.KindSink:
			consumers = append(consumers, s.Stage)
		default:
			if s.Kind == actors.KindFiles {
				for _, r := range stages {
					if r.Kind == actors.KindFileReader && strings.HasPrefix(r.Stage, s.Stage+"/") {
						edges = append(edges, [2]string{r.Stage, s.Stage})
					}
				}
			} else if prev != "" {
				edges = append(edges, [2]string{prev, s.Stage})
			}
			prev = s.Stage
		}
	}
	for _, c := range consumers {
		edges = append(edges, [2]string{prev, c})
	}
	return edges
}

// drawTree draws the supervision tree: the supervisor on the left, its
// children in a column on the right, each labelled with its counters.
func drawTree(path string, stages []actors.StageStats) (string, error) {
	rowH := vg.Points(34)
	h := rowH*vg.Length(len(stages)+1) + vg.Points(20)
	w := vg.Points(640)
	c := vgimg.New(w, h)
	dc := draw.New(c)
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())
	text := draw.TextStyle{Color: color.Black, Font: plot.DefaultFont, Handler: plot.DefaultTextHandler}
	text.Font.Size = vg.Points(10)
	line := draw.LineStyle{Color: color.Gray{Y: 90}, Width: vg.Points(1)}
	box := func(x, y, bw vg.Length, label string) {
		pts := []vg.Point{{X: x, Y: y - 12}, {X: x + bw, Y: y - 12}, {X: x + bw, Y: y + 12}, {X: x, Y: y + 12}, {X: x, Y: y - 12}}
		dc.FillPolygon(color.Gray{Y: 235}, pts)
		dc.StrokeLines(line, pts)
		text.YAlign = draw.YCenter
		dc.FillText(text, vg.Point{X: x + 6, Y: y}, label)
	}
	supY := h / 2
	box(10, supY, 110, "supervisor")
	for i, s := range stages {
		y := h - rowH*vg.Length(i+1)
		dc.StrokeLines(line, []vg.Point{{X: 120, Y: supY}, {X: 200, Y: y}})
		box(200, y, 420, fmt.Sprintf("%s   %d items, %d restarts", s.Stage, s.Items, s.Restarts))
	}
	return path, atomicfile.Write(path, func(w io.Writer) error { _, err := (vgimg.PngCanvas{Canvas: c}).WriteTo(w); return err })
}

// savePlot draws p as a PNG file of width x height at path, atomically.
func savePlot(p *plot.Plot, width, height vg.Length, path string) error {
	wt, err := p.WriterTo(width, height, "png")
	if err != nil {
		return err
	}
	return atomicfile.Write(path, func(w io.Writer) error { _, err := wt.WriteTo(w); return err })
}

// benchFigures is what `actorfeed bench --plot` draws.
type benchFigures struct {
	throughput  []benchBar
	waits       []time.Duration // the device's wait before each warm step
	step        time.Duration   // the mean step those waits are measured against
	deviceBatch int
	heap        []uint64 // in use after GC, after each pass
}

type benchBar struct {
	file, what string
	samples    float64 // per second, median
}

// plotBench draws throughput.png (samples/s of each pipeline and file),
// device-waits.png (the device's wait before each warm step, against the
// step) and heap.png (the heap after each pass) into dir.
func plotBench(dir string, f benchFigures) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var written []string
	save := func(name string, p *plot.Plot, h vg.Length) error {
		path := filepath.Join(dir, name)
		if err := savePlot(p, 8*vg.Inch, h, path); err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		written = append(written, path)
		return nil
	}

	// Throughput: one group of bars per pipeline, one bar per file kind.
	tp := plot.New()
	tp.Title.Text = "Throughput (median)"
	tp.X.Label.Text = "million samples/s"
	tp.X.Min = 0
	var whats, files []string
	for _, b := range f.throughput {
		if !slices.Contains(whats, b.what) {
			whats = append(whats, b.what)
		}
		if !slices.Contains(files, b.file) {
			files = append(files, b.file)
		}
	}
	width := vg.Points(18)
	for k, file := range files {
		vals := make(plotter.Values, len(whats))
		for _, b := range f.throughput {
			if b.file == file {
				vals[slices.Index(whats, b.what)] = b.samples / 1e6
			}
		}
		bars, err := plotter.NewBarChart(vals, width)
		if err != nil {
			return nil, err
		}
		bars.Color = plotutil.Color(k)
		bars.Offset = width * vg.Length(2*k-len(files)+1) / 2
		bars.Horizontal = true
		tp.Add(bars)
		tp.Legend.Add(file, bars)
	}
	tp.NominalY(whats...)
	// Bottom right, beside the per-record pipeline's short bars, clear of
	// the others.
	tp.Legend.Top, tp.Legend.Left = false, false
	if err := save("throughput.png", tp, vg.Length(len(whats))*vg.Points(48)+vg.Inch); err != nil {
		return nil, err
	}

	// The device's waits against its step.
	wp := plot.New()
	wp.Title.Text = fmt.Sprintf("Device wait before each warm step (batches of %d)", f.deviceBatch)
	wp.X.Label.Text, wp.Y.Label.Text = "step", "µs"
	waits := make(plotter.XYs, len(f.waits))
	steps := make(plotter.XYs, len(f.waits))
	for i, w := range f.waits {
		waits[i] = plotter.XY{X: float64(i), Y: float64(w.Microseconds())}
		steps[i] = plotter.XY{X: float64(i), Y: float64(f.step.Microseconds())}
	}
	wp.Legend.Top = true
	if err := plotutil.AddLines(wp, "wait", waits, "one step", steps); err != nil {
		return nil, err
	}
	if err := save("device-waits.png", wp, 4*vg.Inch); err != nil {
		return nil, err
	}

	// The heap after each pass.
	hp := plot.New()
	hp.Title.Text = "Heap in use after GC, after each pass"
	hp.X.Label.Text, hp.Y.Label.Text = "pass", "MB"
	hp.Y.Min = 0
	heap := make(plotter.XYs, len(f.heap))
	for i, h := range f.heap {
		heap[i] = plotter.XY{X: float64(i + 1), Y: float64(h) / 1e6}
	}
	if err := plotutil.AddLinePoints(hp, "heap", heap); err != nil {
		return nil, err
	}
	if err := save("heap.png", hp, 4*vg.Inch); err != nil {
		return nil, err
	}
	return written, nil
}
