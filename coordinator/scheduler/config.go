package scheduler

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"time"

	"go.uber.org/zap"

	"github.com/tms-dev/tms/internal/invalid"
)

// Defaults of Config.
const (
	DefaultPollInterval          = 10 * time.Second
	DefaultHeartbeatInterval     = 60 * time.Second
	DefaultMissedHeartbeatsLimit = 6
	DefaultShutdownTimeout       = 30 * time.Second
	DefaultThreads               = 4
)

// ErrWatchdog is what Run returns when the node could not write its
// heartbeat for WatchdogTimeout. The node has stopped claiming and cancelled
// its callbacks; the process should exit non-zero and be restarted.
var ErrWatchdog = errors.New("coordinator watchdog: node heartbeat not written in time")

// Handler runs one claimed task. It returns nil on success, after which the
// engine completes the task (deletes a one-shot row, moves a recurring one
// to its next instant) unless the handler already did through x.Complete.
// An error records a failure and retries after the kind's backoff. ctx is
// cancelled when the claim is lost (rescued by another node, cancelled),
// when the watchdog fires, and at the shutdown deadline.
type Handler func(ctx context.Context, x *Execution) error

// Kind is a named task kind: rows of scheduled_tasks with task_name = Name.
type Kind struct {
	// Name is the task_name of the kind's rows. Required, unique.
	Name string
	// Pool is the pool whose threads run the kind. Defaults to Name.
	Pool string
	// Handler runs a claimed task. Required.
	Handler Handler
	// Schedule makes the kind recurring: after a success the row is due
	// again at Schedule.Next(now). Nil means one-shot: the row is deleted.
	Schedule Schedule
	// MaxFailures deletes a one-shot row after that many consecutive
	// failures. Zero retries forever (with backoff). Recurring rows are
	// never deleted by failures.
	MaxFailures int
}

// Config configures an Engine. Zero values take the defaults in each
// field's comment.
type Config struct {
	// NodeID names this node in picked_by and coordinator_node. Defaults to
	// hostname-pid-random, unique per process start.
	NodeID string
	// Pools maps a pool name to its thread count. A pool that a Kind names
	// but that is missing here gets DefaultThreads (4).
	Pools map[string]int
	// PollInterval is how often each pool looks for due rows when nothing
	// wakes it. Defaults to 10s.
	PollInterval time.Duration
	// HeartbeatInterval is how often the node heartbeats its row and its
	// running claims, and runs the rescuer. Defaults to 60s; sub-second
	// values are allowed (tests).
	HeartbeatInterval time.Duration
	// MissedHeartbeatsLimit is how many heartbeats a claim may miss before
	// any node revives it: a claim is stale after HeartbeatInterval ×
	// MissedHeartbeatsLimit. Defaults to 6.
	MissedHeartbeatsLimit int
	// WatchdogTimeout is how long the node may fail to write its heartbeat
	// before it stops and Run returns ErrWatchdog. Defaults to half the
	// stale-claim age, and must be below it, so a node cut off from the
	// database stops before others revive its claims.
	WatchdogTimeout time.Duration
	// ShutdownTimeout is how long Run waits, after its context ends, for
	// running callbacks before it cancels them. Defaults to 30s.
	ShutdownTimeout time.Duration
	// Backoff returns the delay before retry number failures (1, 2, …).
	// Defaults to 10s doubling per failure, at most 1h.
	Backoff func(failures int) time.Duration
	// Clock is the time source. Defaults to RealClock.
	Clock Clock
	// Log receives the engine's logs. Defaults to a no-op logger.
	Log *zap.Logger
	// OnClaim, if set, is called as each claimed run starts, with its kind
	// and lateness: claim time minus the row's execution time (metrics).
	// It must be fast and must not block.
	OnClaim func(kind string, lateness time.Duration)
	// OnExecuted, if set, is called as each run's handler returns, with its
	// kind and outcome (ExecSuccess, ExecFailure, ExecStale, ExecCancelled,
	// ExecPanic). It must be fast and must not block.
	OnExecuted func(kind, outcome string)
	// OnDrained, if set, is called during a graceful shutdown once every
	// callback has returned, while the node still heartbeats its row: the
	// place to wait for work the node started outside the engine (runners
	// of its submitter) and close what it leaves, so that no other node
	// takes the node for dead meanwhile. The watchdog still applies.
	OnDrained func()
}

// staleAfter is the age of a heartbeat after which a claim is revived.
func (c Config) staleAfter() time.Duration {
	return c.HeartbeatInterval * time.Duration(c.MissedHeartbeatsLimit)
}

func (c Config) withDefaults() (Config, error) {
	c.NodeID = cmp.Or(c.NodeID, defaultNodeID())
	c.PollInterval = cmp.Or(c.PollInterval, DefaultPollInterval)
	c.HeartbeatInterval = cmp.Or(c.HeartbeatInterval, DefaultHeartbeatInterval)
	c.MissedHeartbeatsLimit = cmp.Or(c.MissedHeartbeatsLimit, DefaultMissedHeartbeatsLimit)
	c.WatchdogTimeout = cmp.Or(c.WatchdogTimeout, c.staleAfter()/2)
	c.ShutdownTimeout = cmp.Or(c.ShutdownTimeout, DefaultShutdownTimeout)
	if c.Backoff == nil {
		c.Backoff = defaultBackoff
	}
	if c.Clock == nil {
		c.Clock = RealClock{}
	}
	if c.Log == nil {
		c.Log = zap.NewNop()
	}
	switch {
	case c.PollInterval < 0 || c.HeartbeatInterval < 0 || c.WatchdogTimeout < 0 || c.ShutdownTimeout < 0:
		return c, fmt.Errorf("%w: coordinator intervals and timeouts must not be negative", invalid.ErrArgument)
	case c.MissedHeartbeatsLimit < 1:
		return c, fmt.Errorf("%w: missedHeartbeatsLimit must be at least 1, got %d", invalid.ErrArgument, c.MissedHeartbeatsLimit)
	case c.WatchdogTimeout >= c.staleAfter():
		return c, fmt.Errorf("%w: watchdogTimeout %s must be below heartbeatInterval × missedHeartbeatsLimit (%s), or a cut-off node could still act on claims others revived",
			invalid.ErrArgument, c.WatchdogTimeout, c.staleAfter())
	}
	for name, n := range c.Pools {
		if n < 1 {
			return c, fmt.Errorf("%w: pool %q needs at least one thread, got %d", invalid.ErrArgument, name, n)
		}
	}
	return c, nil
}

func defaultBackoff(failures int) time.Duration {
	d := 10 * time.Second
	for i := 1; i < failures && d < time.Hour; i++ {
		d *= 2
	}
	return min(d, time.Hour)
}

func defaultNodeID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "node"
	}
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), rand.Text()[:6])
}
