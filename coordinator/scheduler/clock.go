package scheduler

import (
	"sync"
	"time"
)

// Clock is the engine's source of time: what is due, when heartbeats are
// stale, when to poll. Tests pass a ManualClock and move it themselves.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// After returns a channel that receives once d has passed, and a stop
	// function that releases it early.
	After(d time.Duration) (<-chan time.Time, func())
}

// RealClock is the wall clock.
type RealClock struct{}

// Now returns time.Now().
func (RealClock) Now() time.Time { return time.Now() }

// After starts a real timer.
func (RealClock) After(d time.Duration) (<-chan time.Time, func()) {
	t := time.NewTimer(d)
	return t.C, func() { t.Stop() }
}

// ManualClock is a Clock that moves only when Advance or Set is called.
// Timers fire when the clock passes their deadline. It is safe for
// concurrent use.
type ManualClock struct {
	mu      sync.Mutex
	now     time.Time
	timers  map[*manualTimer]struct{}
	waiters chan struct{} // closed and replaced when a timer is added
}

type manualTimer struct {
	at time.Time
	c  chan time.Time
}

// NewManualClock returns a ManualClock reading start.
func NewManualClock(start time.Time) *ManualClock {
	return &ManualClock{now: start, timers: map[*manualTimer]struct{}{}, waiters: make(chan struct{})}
}

// Now returns the clock's time.
func (c *ManualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// After registers a timer that fires when the clock reaches now+d.
func (c *ManualClock) After(d time.Duration) (<-chan time.Time, func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &manualTimer{at: c.now.Add(d), c: make(chan time.Time, 1)}
	if d <= 0 {
		t.c <- c.now
		return t.c, func() {}
	}
	c.timers[t] = struct{}{}
	close(c.waiters)
	c.waiters = make(chan struct{})
	return t.c, func() {
		c.mu.Lock()
		delete(c.timers, t)
		c.mu.Unlock()
	}
}

// Advance moves the clock forward by d and fires due timers.
func (c *ManualClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	for t := range c.timers {
		if !t.at.After(c.now) {
			t.c <- c.now
			delete(c.timers, t)
		}
	}
}

// WaitForTimers blocks until at least n timers are pending, so a test can
// wait until the engine's loops are parked before it advances the clock.
func (c *ManualClock) WaitForTimers(n int) {
	for {
		c.mu.Lock()
		if len(c.timers) >= n {
			c.mu.Unlock()
			return
		}
		ch := c.waiters
		c.mu.Unlock()
		<-ch
	}
}
