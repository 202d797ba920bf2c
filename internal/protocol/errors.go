package protocol

import "errors"

// ErrProtocol is wrapped when a message breaks docs/protocol.md: demand
// <= 0, a subscription from a place that cannot be served, an item the
// receiver never asked for. Package actors gives it as actors.ErrProtocol.
var ErrProtocol = errors.New("actors: protocol error")
