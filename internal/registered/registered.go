// Package registered lists the actors alive in an actor system, for the
// checks after a pipeline is shut down (tests and the simulator): it must
// leave none of its actors behind.
package registered

import (
	"slices"

	"github.com/asynkron/protoactor-go/actor"
)

// Actors lists the ids of the actors alive in sys, other than the
// system's own (deadletter, eventstream). After a pipeline is shut down it
// must hold none of the pipeline's.
func Actors(sys *actor.ActorSystem) []string {
	var ids []string
	for _, bucket := range sys.ProcessRegistry.LocalPIDs.LocalPIDs {
		bucket.IterCb(func(id string, _ any) {
			if id != "deadletter" && id != "eventstream" {
				ids = append(ids, id)
			}
		})
	}
	slices.Sort(ids)
	return ids
}
