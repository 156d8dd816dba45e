package scheduler

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"
)

// liveness runs every HeartbeatInterval until ctx ends: it writes the node's
// heartbeat, heartbeats the running claims (cancelling the callbacks of
// claims it lost), and runs the rescuer. It is also the watchdog: when the
// node heartbeat has not been written for WatchdogTimeout it reports
// ErrWatchdog to Run and returns.
//
// A slow database is not a lost one. Rounds start HeartbeatInterval apart,
// counted from the start of the last round, so a write slower than an
// interval is followed at once by the next rather than after a further
// interval; and each write may take what is left of the watchdog's budget
// (WatchdogTimeout since the heartbeat last written), and at least one
// interval. A database that answers every write within half of
// WatchdogTimeout keeps the node alive; a hung one is noticed within
// WatchdogTimeout plus at most one interval.
func (e *Engine) liveness(ctx context.Context) {
	cfg := e.cfg
	lastOK := cfg.Clock.Now()
	next := lastOK.Add(cfg.HeartbeatInterval)
	for {
		wait, stop := cfg.Clock.After(next.Sub(cfg.Clock.Now()))
		select {
		case <-ctx.Done():
			stop()
			return
		case <-wait:
		}
		now := cfg.Clock.Now()
		next = now.Add(cfg.HeartbeatInterval)
		if err := e.heartbeat(ctx, now, max(cfg.HeartbeatInterval, cfg.WatchdogTimeout-now.Sub(lastOK))); err != nil {
			if ctx.Err() != nil {
				return
			}
			since := cfg.Clock.Now().Sub(lastOK)
			e.beatErr.Store(&beatFailure{since: lastOK, err: err})
			e.log.Warn("node heartbeat failed", zap.Duration("sinceLastHeartbeat", since), zap.Error(err))
			if since >= cfg.WatchdogTimeout {
				e.fatal <- fmt.Errorf("%w: last written %s ago (watchdogTimeout %s): %w", ErrWatchdog, since.Round(time.Millisecond), cfg.WatchdogTimeout, err)
				return
			}
			continue
		}
		lastOK = now
		e.beatErr.Store(nil)
		e.rescue(ctx, now)
	}
}

// heartbeat writes the node row and the running claims' heartbeats, within
// budget.
func (e *Engine) heartbeat(ctx context.Context, now time.Time, budget time.Duration) error {
	hctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	if err := e.sch.HeartbeatNode(hctx, e.cfg.NodeID, now); err != nil {
		// A row removed by an operator is recreated; anything else counts
		// as a missed heartbeat.
		if rerr := e.sch.RegisterNode(hctx, e.cfg.NodeID, now); rerr != nil {
			return err
		}
	}
	claims := e.runningClaims()
	if len(claims) == 0 {
		return nil
	}
	lost, err := e.sch.HeartbeatTasks(hctx, e.cfg.NodeID, claims, now)
	if err != nil {
		e.log.Warn("claim heartbeat failed", zap.Error(err))
		return nil // the node row was written; the claims retry next interval
	}
	e.dropClaims(lost)
	return nil
}

// rescue revives claims whose holder stopped heartbeating and wakes the
// pools that run them. Every node runs it; the store makes concurrent
// rescues revive each row once.
func (e *Engine) rescue(ctx context.Context, now time.Time) {
	rctx, cancel := context.WithTimeout(ctx, e.cfg.HeartbeatInterval)
	defer cancel()
	revived, err := e.sch.RescueTasks(rctx, now.Add(-e.cfg.staleAfter()))
	if err != nil {
		e.log.Warn("rescue failed", zap.Error(err))
		return
	}
	e.stats.rescued.Add(int64(len(revived)))
	for _, t := range revived {
		e.log.Warn("revived a claim whose holder stopped heartbeating",
			zap.Stringer("task", t.TaskKey), zap.Int64("version", t.Version))
		e.wake(t.Name)
	}
}
