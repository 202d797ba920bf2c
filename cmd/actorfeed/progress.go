package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// progress shows a running session: a live bar on a terminal, plain lines
// at a fixed interval otherwise (logs, CI).
type progress struct {
	w        io.Writer
	every    time.Duration
	terminal bool
	total    int64 // samples in all passes, -1 when unknown

	stopc chan struct{}
	wg    sync.WaitGroup
}

// newProgress writes to w; it draws a bar when w is a terminal.
func newProgress(w io.Writer, every time.Duration, total int64) *progress {
	f, ok := w.(*os.File)
	return &progress{w: w, every: every, total: total, terminal: ok && term.IsTerminal(int(f.Fd()))}
}

func (p *progress) start(s *session) {
	p.stopc = make(chan struct{})
	var bar *progressbar.ProgressBar
	every := p.every
	if p.terminal {
		every = 200 * time.Millisecond
		bar = progressbar.NewOptions64(p.total, progressbar.OptionSetWriter(p.w), progressbar.OptionSetWidth(30),
			progressbar.OptionShowCount(), progressbar.OptionSetItsString("samples"), progressbar.OptionShowIts(),
			progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionClearOnFinish())
	}
	p.wg.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-p.stopc:
				if bar != nil {
					bar.Finish()
				}
				return
			case <-t.C:
				line := p.line(s)
				if bar != nil {
					bar.Describe(line.short)
					bar.Set64(int64(line.samples))
				} else {
					fmt.Fprintln(p.w, line.long)
				}
			}
		}
	})
}

func (p *progress) stop() {
	close(p.stopc)
	p.wg.Wait()
}

type progressLine struct {
	samples     int
	short, long string
}

// line describes the session now: pass, samples, throughput and how busy
// each device is.
func (p *progress) line(s *session) progressLine {
	st := s.p.Stats()
	el := time.Since(s.start)
	n := 0
	var busy []string
	for _, d := range st.Devices {
		n += d.Instances
		busy = append(busy, fmt.Sprintf("dev%d %.0f%%", d.Device, 100*d.Busy.Seconds()/el.Seconds()))
	}
	rate := float64(n) / el.Seconds()
	short := fmt.Sprintf("pass %d/%d  %s", s.p.Pass()+1, s.passes, strings.Join(busy, " "))
	long := fmt.Sprintf("progress: pass %d/%d, %d samples, %.0f samples/s, busy %s, restarts %d",
		s.p.Pass()+1, s.passes, n, rate, strings.Join(busy, " "), st.Restarts)
	return progressLine{samples: n, short: short, long: long}
}
