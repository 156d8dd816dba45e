package scheduler

import (
	"fmt"
	"time"
)

// beatFailure is a node heartbeat that could not be written.
type beatFailure struct {
	since time.Time // the last heartbeat written
	err   error
}

// Healthy reports the node's liveness for readiness probes: nil while Run
// is claiming and the node heartbeat is being written; an error wrapping
// ErrWatchdog once the watchdog stopped the node; another error while
// heartbeats fail (the watchdog fires if they keep failing for
// WatchdogTimeout) or before Run is ready.
func (e *Engine) Healthy() error {
	select {
	case <-e.ready:
	default:
		return fmt.Errorf("coordinator engine not started")
	}
	if e.dead.Load() {
		return fmt.Errorf("%w: the node stopped claiming", ErrWatchdog)
	}
	if f := e.beatErr.Load(); f != nil {
		return fmt.Errorf("node heartbeat failing since %s (watchdog after %s): %w",
			f.since.UTC().Format(time.RFC3339), e.cfg.WatchdogTimeout, f.err)
	}
	return nil
}
