package actors

import (
	"github.com/actorfeed/actorfeed/messages"
)

// multiPassLogic is create_multi_pass_reader: downstream pass q is upstream
// passes q*passes .. q*passes+passes-1 read one after the other, so every
// upstream pass (and its shuffle seed) is distinct across re-inits.
type multiPassLogic struct {
	passes   int
	pass     uint32
	upstream uint32
}

func (l *multiPassLogic) start(pass uint32) {
	l.pass, l.upstream = pass, pass*uint32(l.passes)
}

func (l *multiPassLogic) upstreamPass(pass uint32) uint32 { return pass * uint32(l.passes) }

func (l *multiPassLogic) take(b *messages.Batch) ([]*messages.Batch, error) {
	return []*messages.Batch{{Pass: l.pass, Slots: b.Slots, Parts: b.Parts, Rows: b.Rows, Ids: b.Ids}}, nil
}

func (l *multiPassLogic) finish() ([]*messages.Batch, uint32, bool, error) {
	if int(l.upstream-l.pass*uint32(l.passes))+1 < l.passes {
		l.upstream++
		return nil, l.upstream, true, nil
	}
	return nil, 0, false, nil
}
