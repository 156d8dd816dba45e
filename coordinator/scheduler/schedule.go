package scheduler

import "time"

// Schedule gives a recurring task its next execution time (a parsed
// crontab, policy.ParseCron, is one).
type Schedule interface {
	// Next returns the first instant strictly after t.
	Next(t time.Time) time.Time
}
