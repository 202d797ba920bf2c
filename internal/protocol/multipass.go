package protocol

import (
	"github.com/actorfeed/actorfeed/messages"
)

// MultiPassLogic is create_multi_pass_reader: downstream pass q is upstream
// passes q*passes .. q*passes+passes-1 read one after the other, so every
// upstream pass (and its shuffle seed) is distinct across re-inits.
type MultiPassLogic struct {
	PassSplit
	pass     uint32
	upstream uint32
}

// PassSplit is how a multi-pass stage maps its passes to its upstream's:
// passes each, the first skip of them left out of pass 0. A pipeline
// resumed in the order part way through a multi-pass pass (an epoch not
// the first of its pass) starts there: its pass 0 is the rest of that pass,
// so that its passes end where the uninterrupted run's do.
type PassSplit struct{ Passes, Skip int }

// First and last are the upstream passes pass reads.
func (s PassSplit) First(pass uint32) uint32 {
	if pass == 0 {
		return 0
	}
	return pass*uint32(s.Passes) - uint32(s.Skip)
}

func (s PassSplit) Last(pass uint32) uint32 { return (pass+1)*uint32(s.Passes) - uint32(s.Skip) - 1 }

func (l *MultiPassLogic) Start(pass uint32) {
	l.pass, l.upstream = pass, l.First(pass)
}

func (l *MultiPassLogic) UpstreamPass(pass uint32) uint32 { return l.First(pass) }

func (l *MultiPassLogic) Take(b *messages.Batch) ([]*messages.Batch, error) {
	o := &messages.Batch{Pass: l.pass, Slots: b.Slots, Parts: b.Parts, Rows: b.Rows, Ids: b.Ids}
	KeepPlace(o, b)
	return []*messages.Batch{o}, nil
}

func (l *MultiPassLogic) Finish() ([]*messages.Batch, uint32, bool, error) {
	if l.upstream < l.Last(l.pass) {
		l.upstream++
		return nil, l.upstream, true, nil
	}
	return nil, 0, false, nil
}
