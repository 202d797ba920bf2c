package actors

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"
)

func TestDebugScenario(t *testing.T) {
	paths := os.Getenv("DBG_PATHS")
	if paths == "" {
		t.Skip()
	}
	var ps []string
	fmt.Sscan(paths, &ps)
}

func dumpPipeline(p *Pipeline) {
	for _, c := range p.cells {
		fmt.Printf("cell %s restarts=%d received=%d\n", c.name, c.restarts, c.received)
	}
}

var _ = context.Background
var _ = time.Second
