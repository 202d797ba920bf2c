package main

import (
	"fmt"
	"image/color"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
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
func writeReport(dir string, series []sample, stages []actors.StageStats, workers []actors.ServiceWorker, devices int) ([]string, error) {
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

	tp, err := throughputPlot(series)
	if err != nil {
		return nil, err
	}
	if err := save("throughput.png", tp); err != nil {
		return nil, err
	}

	if devices > 0 {
		if err := devicesPlot(series, devices, save); err != nil {
			return nil, err
		}
	}

	// Buffer depth per stage, in two panels because the units differ:
	// groups of samples before the batch stage, batches from it on.
	if err := drawBuffers(filepath.Join(dir, "buffers.png"), series, stages); err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	written = append(written, filepath.Join(dir, "buffers.png"))

	tree, err := drawTree(filepath.Join(dir, "actors.png"), stages, workers)
	if err != nil {
		return nil, err
	}
	written = append(written, tree)
	dot := filepath.Join(dir, "actors.dot")
	if err := atomicfile.Write(dot, func(w io.Writer) error { _, err := io.WriteString(w, treeDOT(stages, workers)); return err }); err != nil {
		return nil, err
	}
	return append(written, dot), nil
}

// devicesPlot draws each device's busy fraction of each interval, saved
// as devices.png.
func devicesPlot(series []sample, devices int, save func(string, *plot.Plot) error) error {
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
		return err
	}
	return save("devices.png", up)
}

// throughputPlot is samples/s between consecutive samples, on an axis from
// 0 so that a dip looks like one, not like a fall to nothing.
func throughputPlot(series []sample) (*plot.Plot, error) {
	tp := plot.New()
	tp.Title.Text = "Throughput, all devices"
	tp.X.Label.Text, tp.Y.Label.Text = "seconds", "samples/s"
	rate := make(plotter.XYs, 0, len(series)-1)
	for i := 1; i < len(series); i++ {
		dt := (series[i].at - series[i-1].at).Seconds()
		if dt > 0 {
			rate = append(rate, plotter.XY{X: series[i].at.Seconds(), Y: float64(series[i].samples-series[i-1].samples) / dt})
		}
	}
	tp.Y.Min = 0
	tp.Y.Tick.Marker = wholeTicks{}
	rl, err := plotter.NewLine(rate)
	if err != nil {
		return nil, err
	}
	rl.Color = seriesColor(0, 1)
	tp.Add(rl)
	return tp, nil
}

// drawBuffers draws the items each stage holds over time: the stages before
// the batch stage hold groups of samples, the batch stage and those after
// it batches, so each kind of item gets a panel of its own. Every stage
// has a colour of its own, and the legend sits in a margin the data leaves
// free.
func drawBuffers(path string, series []sample, stages []actors.StageStats) error {
	plots, err := bufferPlots(series, stages)
	if err != nil {
		return err
	}
	return drawStacked(path, plots)
}

// drawStacked draws plots one above the other, their axes aligned, as a
// PNG file at path, atomically.
func drawStacked(path string, plots []*plot.Plot) error {
	width, height := 8*vg.Inch, 3*vg.Inch*vg.Length(len(plots))
	c := vgimg.New(width, height)
	dc := draw.New(c)
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())
	tiles := draw.Tiles{Rows: len(plots), Cols: 1, PadTop: vg.Points(4), PadBottom: vg.Points(4), PadX: vg.Points(4), PadY: vg.Points(12)}
	grid := make([][]*plot.Plot, len(plots))
	for i, p := range plots {
		grid[i] = []*plot.Plot{p}
	}
	canvases := plot.Align(grid, tiles, dc)
	for i, p := range plots {
		p.Draw(canvases[i][0])
	}
	return atomicfile.Write(path, func(w io.Writer) error { _, err := (vgimg.PngCanvas{Canvas: c}).WriteTo(w); return err })
}

// wholeTicks labels an axis's major ticks as whole numbers (the default
// ticker wrote 50000.00 samples/s).
type wholeTicks struct{}

func (wholeTicks) Ticks(lo, hi float64) []plot.Tick {
	ticks := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ticks {
		if ticks[i].Label != "" {
			ticks[i].Label = strconv.FormatFloat(ticks[i].Value, 'f', 0, 64)
		}
	}
	return ticks
}

// bufferPlots makes drawBuffers' panels, one for each kind of item.
func bufferPlots(series []sample, stages []actors.StageStats) ([]*plot.Plot, error) {
	split := len(stages)
	for i, s := range stages {
		if s.Kind == actors.KindBatch || s.Kind == actors.KindService { // the workers batch for the service stage
			split = i
			break
		}
	}
	panels := []struct {
		title, unit string
		stages      []actors.StageStats
	}{
		{"Items held before the batch stage", "groups of samples", stages[:split]},
		{"Items held from the batch stage on", "batches", stages[split:]},
	}
	var plots []*plot.Plot
	for _, pn := range panels {
		if len(pn.stages) == 0 {
			continue
		}
		p := plot.New()
		p.Title.Text = pn.title
		p.X.Label.Text, p.Y.Label.Text = "seconds", pn.unit
		p.Y.Min = 0
		top := 1.0
		for k, st := range pn.stages {
			xy := make(plotter.XYs, len(series))
			for i, smp := range series {
				xy[i] = plotter.XY{X: smp.at.Seconds(), Y: float64(smp.held[st.Stage])}
				top = max(top, xy[i].Y)
			}
			l, err := plotter.NewLine(xy)
			if err != nil {
				return nil, err
			}
			l.Color = seriesColor(k, len(pn.stages))
			l.Width = vg.Points(1.5)
			p.Add(l)
			p.Legend.Add(st.Stage, l)
		}
		// Room above the data for the legend, one line a stage.
		p.Y.Max = top * (1.15 + 0.12*float64(len(pn.stages)))
		p.Legend.Top, p.Legend.Left = true, true
		plots = append(plots, p)
	}
	return plots, nil
}

// seriesColor is colour k of n, spread around the hue circle so that no two
// series share one.
func seriesColor(k, n int) color.Color {
	h := float64(k) / float64(max(n, 1))
	// HSV with full saturation and a value dark enough to read on white.
	r, g, b := hsv(h, 0.85, 0.8)
	return color.RGBA{R: r, G: g, B: b, A: 255}
}

func hsv(h, s, v float64) (r, g, b uint8) {
	i := int(h * 6)
	f := h*6 - float64(i)
	p, q, t := v*(1-s), v*(1-f*s), v*(1-(1-f)*s)
	var rf, gf, bf float64
	switch i % 6 {
	case 0:
		rf, gf, bf = v, t, p
	case 1:
		rf, gf, bf = q, v, p
	case 2:
		rf, gf, bf = p, v, t
	case 3:
		rf, gf, bf = p, q, v
	case 4:
		rf, gf, bf = t, p, v
	default:
		rf, gf, bf = v, p, q
	}
	return uint8(rf * 255), uint8(gf * 255), uint8(bf * 255)
}

// treeDOT is the pipeline's actor tree in Graphviz: the supervisor and its
// children (solid), and the data flow between them (dashed); with a
// service, each worker is a machine of its own, feeding the service stage
// over the network (dotted).
func treeDOT(stages []actors.StageStats, workers []actors.ServiceWorker) string {
	var b strings.Builder
	b.WriteString("digraph pipeline {\n  rankdir=LR;\n  node [shape=box, fontname=\"Helvetica\"];\n")
	b.WriteString("  supervisor [label=\"supervisor\\n(restart intensity)\"];\n")
	for _, s := range stages {
		fmt.Fprintf(&b, "  %q [label=\"%s\\n%s: %d items, %d restarts\"];\n  supervisor -> %q;\n", s.Stage, s.Stage, s.Kind, s.Items, s.Restarts, s.Stage)
	}
	for _, e := range dataFlow(stages) {
		fmt.Fprintf(&b, "  %q -> %q [style=dashed, color=gray40];\n", e[0], e[1])
	}
	for i, w := range workers {
		fmt.Fprintf(&b, "  subgraph \"cluster_%d\" {\n    label=%q;\n    \"worker %s\" [label=\"%s\\n%s\"];\n  }\n",
			i, w.Addr, w.Addr, actors.WorkerName, workerLabel(w))
	}
	for _, e := range workerFlow(stages, workers) {
		fmt.Fprintf(&b, "  %q -> %q [style=dotted, color=gray40];\n", e[0], e[1])
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
// children in a column on the right, each labelled with its counters, and
// on their right the data flow between them (dashed arrows, as in
// actors.dot); with a service, its workers below, each a machine of its
// own, feeding the service stage over the network (dotted arrows).
func drawTree(path string, stages []actors.StageStats, workers []actors.ServiceWorker) (string, error) {
	rowH := vg.Points(34)
	edges, remote := dataFlow(stages), workerFlow(stages, workers)
	rows := len(stages) + len(remote)
	h := rowH*vg.Length(rows+1) + vg.Points(40)
	w := vg.Points(660) + vg.Points(12)*vg.Length(len(edges)+len(remote))
	c := vgimg.New(w, h)
	dc := draw.New(c)
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())
	text := draw.TextStyle{Color: color.Black, Font: plot.DefaultFont, Handler: plot.DefaultTextHandler}
	text.Font.Size = vg.Points(10)
	line := draw.LineStyle{Color: color.Gray{Y: 90}, Width: vg.Points(1)}
	box := func(x, y, bw vg.Length, fill color.Color, label string) {
		pts := []vg.Point{{X: x, Y: y - 12}, {X: x + bw, Y: y - 12}, {X: x + bw, Y: y + 12}, {X: x, Y: y + 12}, {X: x, Y: y - 12}}
		dc.FillPolygon(fill, pts)
		dc.StrokeLines(line, pts)
		text.YAlign = draw.YCenter
		dc.FillText(text, vg.Point{X: x + 6, Y: y}, label)
	}
	rowY := map[string]vg.Length{}
	supY := h - rowH*vg.Length(len(stages)+1)/2
	box(10, supY, 110, color.Gray{Y: 235}, "supervisor")
	for i, s := range stages {
		y := h - rowH*vg.Length(i+1)
		rowY[s.Stage] = y
		dc.StrokeLines(line, []vg.Point{{X: 120, Y: supY}, {X: 200, Y: y}})
		box(200, y, 420, color.Gray{Y: 235}, fmt.Sprintf("%s   %d items, %d restarts", s.Stage, s.Items, s.Restarts))
	}
	for i, wk := range workers {
		y := h - rowH*vg.Length(len(stages)+i+1)
		rowY["worker "+wk.Addr] = y
		box(200, y, 420, color.RGBA{R: 220, G: 232, B: 250, A: 255},
			fmt.Sprintf("%s on %s   %s", actors.WorkerName, wk.Addr, workerLabel(wk)))
	}
	// Data flow: out of a box on the right, to the stage it feeds, an
	// arrowhead at its box; each arrow a lane of its own.
	flow := draw.LineStyle{Color: color.RGBA{R: 30, G: 90, B: 180, A: 255}, Width: vg.Points(1), Dashes: []vg.Length{vg.Points(4), vg.Points(3)}}
	network := flow
	network.Dashes = []vg.Length{vg.Points(1), vg.Points(2)}
	for k, e := range append(edges, remote...) {
		style := flow
		if k >= len(edges) {
			style = network
		}
		from, to := rowY[e[0]], rowY[e[1]]
		x0, x1 := vg.Points(620), vg.Points(632)+vg.Points(12)*vg.Length(k)
		dc.StrokeLines(style, []vg.Point{{X: x0, Y: from + 4}, {X: x1, Y: from + 4}, {X: x1, Y: to - 4}, {X: x0 + 2, Y: to - 4}})
		head := []vg.Point{{X: x0 + 1, Y: to - 4}, {X: x0 + 7, Y: to - 1}, {X: x0 + 7, Y: to - 7}, {X: x0 + 1, Y: to - 4}}
		dc.FillPolygon(style.Color, head)
	}
	text.YAlign = draw.YBottom
	legend := "solid lines: supervision (the supervisor restarts a failed stage); dashed arrows: the data flow"
	if len(remote) > 0 {
		legend += "; dotted: over the network"
	}
	dc.FillText(text, vg.Point{X: 10, Y: 8}, legend)
	return path, atomicfile.Write(path, func(w io.Writer) error { _, err := (vgimg.PngCanvas{Canvas: c}).WriteTo(w); return err })
}

// workerLabel is a worker's counters and state in the actor tree.
func workerLabel(w actors.ServiceWorker) string {
	return fmt.Sprintf("%d tasks, %d batches, reassigned %d, lost %d, %s", w.Tasks, w.Batches, w.Reassigned, w.Lost, w.State)
}

// workerFlow lists the service's workers feeding its stage.
func workerFlow(stages []actors.StageStats, workers []actors.ServiceWorker) [][2]string {
	var edges [][2]string
	for _, s := range stages {
		if s.Kind != actors.KindService {
			continue
		}
		for _, w := range workers {
			edges = append(edges, [2]string{"worker " + w.Addr, s.Stage})
		}
	}
	return edges
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
	for _, fig := range []struct {
		name   string
		draw   func(benchFigures) (*plot.Plot, error)
		height func(benchFigures) vg.Length
	}{
		{"throughput.png", benchThroughputPlot, func(f benchFigures) vg.Length { return vg.Length(len(benchWhats(f)))*vg.Points(48) + vg.Inch }},
		{"device-waits.png", deviceWaitsPlot, func(benchFigures) vg.Length { return 4 * vg.Inch }},
		{"heap.png", heapPlot, func(benchFigures) vg.Length { return 4 * vg.Inch }},
	} {
		p, err := fig.draw(f)
		if err != nil {
			return nil, err
		}
		path := filepath.Join(dir, fig.name)
		if err := savePlot(p, 8*vg.Inch, fig.height(f), path); err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
		written = append(written, path)
	}
	return written, nil
}

// benchWhats are the pipelines of the throughput figure, in order.
func benchWhats(f benchFigures) []string {
	var whats []string
	for _, b := range f.throughput {
		if !slices.Contains(whats, b.what) {
			whats = append(whats, b.what)
		}
	}
	return whats
}

// benchThroughputPlot has one group of bars per pipeline, one bar per file
// kind.
func benchThroughputPlot(f benchFigures) (*plot.Plot, error) {
	tp := plot.New()
	tp.Title.Text = "Throughput (median)"
	tp.X.Label.Text = "million samples/s"
	tp.X.Min = 0
	whats := benchWhats(f)
	var files []string
	for _, b := range f.throughput {
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
	return tp, nil
}

// deviceWaitsPlot draws the device's waits against its step.
func deviceWaitsPlot(f benchFigures) (*plot.Plot, error) {
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
	return wp, plotutil.AddLines(wp, "wait", waits, "one step", steps)
}

// heapPlot draws the heap after each pass.
func heapPlot(f benchFigures) (*plot.Plot, error) {
	hp := plot.New()
	hp.Title.Text = "Heap in use after GC, after each pass"
	hp.X.Label.Text, hp.Y.Label.Text = "pass", "MB"
	hp.Y.Min = 0
	heap := make(plotter.XYs, len(f.heap))
	for i, h := range f.heap {
		heap[i] = plotter.XY{X: float64(i + 1), Y: float64(h) / 1e6}
	}
	return hp, plotutil.AddLinePoints(hp, "heap", heap)
}
