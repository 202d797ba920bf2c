package main

import (
	"fmt"
	"image/color"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"

	"github.com/actorfeed/actorfeed/sim"
)

// drawWhatIf draws each run of a what-if into dir as run-SEED.png (and
// the baseline as baseline.png): throughput and the devices' mean
// utilisation over time, with the faults' windows and stalls shaded, and
// the baseline's curves in grey behind. It returns the files written.
func drawWhatIf(dir string, res *sim.WhatIfResult) ([]string, error) {
	var written []string
	runs := res.Runs
	if res.Baseline != nil {
		runs = append([]sim.RunReport{*res.Baseline}, runs...)
	}
	for _, r := range runs {
		name := fmt.Sprintf("run-%d.png", r.Seed)
		if !r.Faults {
			name = "baseline.png"
		}
		pic, err := runPlots(r, res.Baseline)
		if err != nil {
			return written, err
		}
		if pic == nil {
			continue
		}
		path := filepath.Join(dir, name)
		if err := drawStacked(path, pic.plots); err != nil {
			return written, err
		}
		written = append(written, path)
	}
	return written, nil
}

// runPicture is a run's plots, and what its legend names.
type runPicture struct {
	plots  []*plot.Plot
	legend []string
}

// runPlots are run r's pictures: its throughput, over the baseline's when
// there is one, and its devices' utilisation, the faults' windows shaded,
// with a legend. A run too short to draw (one that failed at once) gets
// none (nil): empty axes said nothing, and the table has its row.
func runPlots(r sim.RunReport, baseline *sim.RunReport) (*runPicture, error) {
	tp, up := plot.New(), plot.New()
	tp.Title.Text = fmt.Sprintf("Throughput, seed %d", r.Seed)
	if r.Err != nil {
		tp.Title.Text += fmt.Sprintf(", ended in an error after %v", short(r.Elapsed))
	}
	tp.X.Label.Text, tp.Y.Label.Text = "seconds", "samples/s"
	up.Title.Text = "Device utilisation, mean over the devices"
	up.X.Label.Text, up.Y.Label.Text = "seconds", "busy fraction"
	tp.Y.Min, up.Y.Min, up.Y.Max = 0, 0, 1
	tp.Y.Tick.Marker = wholeTicks{}
	drawn, err := addCurves(tp, up, r.Series, seriesColor(0, 1))
	if err != nil || drawn == nil {
		return nil, err
	}
	legend := []legendEntry{{"this run", drawn}}
	if baseline != nil && r.Faults {
		base, err := addCurves(tp, up, baseline.Series, color.Gray{Y: 170})
		if err != nil {
			return nil, err
		}
		if base != nil {
			legend = append(legend, legendEntry{"baseline (no faults)", base})
		}
	}
	ymax := max(tp.Y.Max, 1)
	for i, w := range r.Windows {
		until := w.Until
		if until == 0 {
			until = r.Elapsed
		}
		for _, p := range []*plot.Plot{tp, up} {
			band, err := shade(p, w.From.Seconds(), until.Seconds(), map[*plot.Plot]float64{tp: ymax, up: 1}[p])
			if err != nil {
				return nil, err
			}
			if i == 0 && p == tp {
				legend = append(legend, legendEntry{"a fault's window", band})
			}
		}
	}
	pic := &runPicture{plots: []*plot.Plot{tp, up}}
	for _, e := range legend {
		tp.Legend.Add(e.name, e.thumb)
		pic.legend = append(pic.legend, e.name)
	}
	tp.Legend.Top = true
	return pic, nil
}

// legendEntry is a line of a picture's legend.
type legendEntry struct {
	name  string
	thumb plot.Thumbnailer
}

// addCurves adds a run's throughput and mean utilisation, between
// consecutive points of its series, and returns the throughput's line
// (nil when the series is too short to draw).
func addCurves(tp, up *plot.Plot, series []sim.Point, c color.Color) (plot.Thumbnailer, error) {
	rate, busy := plotter.XYs{}, plotter.XYs{}
	for i := 1; i < len(series); i++ {
		a, b := series[i-1], series[i]
		dt := (b.At - a.At).Seconds()
		if dt <= 0 {
			continue
		}
		// Steps: each interval's rate held across it, so that a run of
		// one interval is drawn too.
		r := float64(b.Samples-a.Samples) / dt
		rate = append(rate, plotter.XY{X: a.At.Seconds(), Y: r}, plotter.XY{X: b.At.Seconds(), Y: r})
		sum := 0.0
		for d := range b.Busy {
			sum += (b.Busy[d] - a.Busy[d]).Seconds() / dt
		}
		u := min(sum/float64(max(len(b.Busy), 1)), 1)
		busy = append(busy, plotter.XY{X: a.At.Seconds(), Y: u}, plotter.XY{X: b.At.Seconds(), Y: u})
	}
	if len(rate) == 0 {
		return nil, nil // no interval: nothing to draw, the table has the figures
	}
	var first plot.Thumbnailer
	for _, pair := range []struct {
		p   *plot.Plot
		xys plotter.XYs
	}{{tp, rate}, {up, busy}} {
		l, err := plotter.NewLine(pair.xys)
		if err != nil {
			return nil, err
		}
		l.Color = c
		pair.p.Add(l)
		if first == nil {
			first = l
		}
	}
	return first, nil
}

// shade adds a translucent band from x0 to x1, up to height, and returns
// it.
func shade(p *plot.Plot, x0, x1, height float64) (plot.Thumbnailer, error) {
	poly, err := plotter.NewPolygon(plotter.XYs{{X: x0, Y: 0}, {X: x1, Y: 0}, {X: x1, Y: height}, {X: x0, Y: height}})
	if err != nil {
		return nil, err
	}
	poly.Color = color.NRGBA{R: 230, G: 80, B: 60, A: 40}
	poly.LineStyle.Width = 0
	p.Add(poly)
	return poly, nil
}
