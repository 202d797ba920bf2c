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
		tp, up := plot.New(), plot.New()
		tp.Title.Text = fmt.Sprintf("Throughput, seed %d", r.Seed)
		tp.X.Label.Text, tp.Y.Label.Text = "seconds", "samples/s"
		up.Title.Text = "Device utilisation, mean over the devices"
		up.X.Label.Text, up.Y.Label.Text = "seconds", "busy fraction"
		tp.Y.Min, up.Y.Min, up.Y.Max = 0, 0, 1
		tp.Y.Tick.Marker = wholeTicks{}
		if res.Baseline != nil && r.Faults {
			if err := addCurves(tp, up, res.Baseline.Series, color.Gray{Y: 170}); err != nil {
				return written, err
			}
		}
		if err := addCurves(tp, up, r.Series, seriesColor(0, 1)); err != nil {
			return written, err
		}
		ymax := max(tp.Y.Max, 1)
		for _, w := range r.Windows {
			until := w.Until
			if until == 0 {
				until = r.Elapsed
			}
			for _, p := range []*plot.Plot{tp, up} {
				if err := shade(p, w.From.Seconds(), until.Seconds(), map[*plot.Plot]float64{tp: ymax, up: 1}[p]); err != nil {
					return written, err
				}
			}
		}
		path := filepath.Join(dir, name)
		if err := drawStacked(path, []*plot.Plot{tp, up}); err != nil {
			return written, err
		}
		written = append(written, path)
	}
	return written, nil
}

// addCurves adds a run's throughput and mean utilisation, between
// consecutive points of its series.
func addCurves(tp, up *plot.Plot, series []sim.Point, c color.Color) error {
	rate, busy := plotter.XYs{}, plotter.XYs{}
	for i := 1; i < len(series); i++ {
		a, b := series[i-1], series[i]
		dt := (b.At - a.At).Seconds()
		if dt <= 0 {
			continue
		}
		rate = append(rate, plotter.XY{X: b.At.Seconds(), Y: float64(b.Samples-a.Samples) / dt})
		sum := 0.0
		for d := range b.Busy {
			sum += (b.Busy[d] - a.Busy[d]).Seconds() / dt
		}
		busy = append(busy, plotter.XY{X: b.At.Seconds(), Y: min(sum/float64(max(len(b.Busy), 1)), 1)})
	}
	if len(rate) < 2 {
		return nil // too short to draw: the table has the figures
	}
	for _, pair := range []struct {
		p   *plot.Plot
		xys plotter.XYs
	}{{tp, rate}, {up, busy}} {
		l, err := plotter.NewLine(pair.xys)
		if err != nil {
			return err
		}
		l.Color = c
		pair.p.Add(l)
	}
	return nil
}

// shade adds a translucent band from x0 to x1, up to height.
func shade(p *plot.Plot, x0, x1, height float64) error {
	poly, err := plotter.NewPolygon(plotter.XYs{{X: x0, Y: 0}, {X: x1, Y: 0}, {X: x1, Y: height}, {X: x0, Y: height}})
	if err != nil {
		return err
	}
	poly.Color = color.NRGBA{R: 230, G: 80, B: 60, A: 40}
	poly.LineStyle.Width = 0
	p.Add(poly)
	return nil
}
