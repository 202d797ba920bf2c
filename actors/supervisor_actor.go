package actors

import (
	"fmt"
	"slices"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/actorfeed/actorfeed/messages"
	"github.com/actorfeed/actorfeed/supervisor"
)

// supervisorActor owns a pipeline's stages: it spawns them and, through its
// Strategy, restarts a failed one or stops them all past the intensity.
type supervisorActor struct {
	p        *Pipeline
	plan     []spawnable
	strategy *supervisor.Strategy
	byID     map[string]*cell
	spawned  bool
}

func (s *supervisorActor) Receive(ctx actor.Context) {
	switch ctx.Message().(type) {
	case *actor.Started:
		if s.spawned {
			return
		}
		s.spawned = true
		s.byID = map[string]*cell{}
		s.strategy.OnBreach = s.breach
		// Every stage's address is known before any is spawned, so each can be
		// told whom it feeds.
		pids := make([]*actor.PID, len(s.plan))
		var sinks []*actor.PID
		for i, sp := range s.plan {
			pids[i] = actor.NewPID(ctx.ActorSystem().Address(), ctx.Self().Id+"/"+sp.name)
			if sp.sink != nil {
				sinks = append(sinks, pids[i])
				// Before the spawn: its device may consume (and tell its
				// actor so) before SpawnNamed returns.
				sp.sink.mu.Lock()
				sp.sink.self = pids[i]
				sp.sink.mu.Unlock()
			}
		}
		s.link(pids, sinks)
		var prev, deal *actor.PID
		var workers []*actor.PID
		for _, sp := range s.plan {
			up, ws := prev, slices.Clone(workers)
			if sp.dealt {
				up = deal
			}
			props := actor.PropsFromProducer(func() actor.Actor { return sp.producer(up, ws) }, actor.WithDispatcher(s.p.pool))
			pid, err := ctx.SpawnNamed(props, sp.name)
			if err != nil {
				s.p.pipe.fail(fmt.Errorf("actors: spawning %s: %w", sp.name, err))
				return
			}
			s.byID[pid.Id] = sp.cell
			if sp.sink != nil {
				continue
			}
			if sp.workers {
				workers = append(workers, pid)
				continue
			}
			if sp.deal {
				deal = pid
			}
			prev, workers = pid, nil
		}
	case *actor.Stopping:
		s.strategy.Halt() // a failure from now on must not restart a stage told to stop
	case built:
		ctx.Respond(built{})
	}
}

// link tells each planned stage whom it feeds: the next stage that is not a
// file reader, the sinks, or, for a lane's last stage, the merge stage,
// which is told the lanes' last stages.
func (s *supervisorActor) link(pids, sinks []*actor.PID) {
	var merge *actor.PID
	var lasts, firsts []*actor.PID
	for i, sp := range s.plan {
		if sp.lanes != nil {
			merge = pids[i]
		}
		if sp.toMerge {
			lasts = append(lasts, pids[i])
		}
		if sp.dealt {
			firsts = append(firsts, pids[i])
		}
	}
	for i, sp := range s.plan {
		j := i + 1
		for j < len(s.plan) && s.plan[j].workers {
			j++
		}
		switch {
		case sp.lanes != nil:
			sp.lanes(lasts)
			sp.cell.down = []*actor.PID{pids[j]}
		case sp.toMerge:
			sp.cell.down = []*actor.PID{merge}
		case sp.deal:
			sp.cell.down = firsts
		case sp.sink != nil || j == len(s.plan):
		case s.plan[j].sink != nil:
			sp.cell.down = sinks
		default:
			sp.cell.down = []*actor.PID{pids[j]}
		}
	}
}

// breach ends the pipeline when restarts exceed the intensity.
func (s *supervisorActor) breach(child *actor.PID, reason any) {
	c := s.byID[child.Id]
	name := child.Id
	if c != nil {
		name = c.name
	}
	lim := s.p.pipe.opts.Intensity
	err := &StageError{Stage: name, Offset: -1, Record: -1, Class: messages.ErrorClass_ERROR_CLASS_PANIC,
		Err: fmt.Errorf("%w: more than %d restarts within %v; last: %v", supervisor.ErrRestartIntensity, lim.MaxRestarts, lim.Within, reason)}
	if c != nil && c.where != nil {
		err.File, err.Record = c.where()
	}
	s.p.pipe.fail(err)
}
