package actors

import "fmt"

// Dump prints the pipeline's cells (debugging aid).
func Dump(p *Pipeline) {
	for _, c := range p.cells {
		fmt.Printf("cell %s restarts=%d received=%d\n", c.name, c.restarts, c.received)
	}
	for _, s := range p.sinks {
		s.mu.Lock()
		fmt.Printf("sink %s queue=%d consumed=%d end=%v in=%+v\n", s.name, len(s.queue), s.consumed, s.end, s.in)
		s.mu.Unlock()
	}
	for _, x := range p.dbg {
		fmt.Println(x())
	}
}
