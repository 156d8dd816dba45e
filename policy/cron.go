package policy

import (
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// Cron gives a crontab's next instant. The scheduler's recurring tasks take
// any value with this method.
type Cron interface {
	// Next returns the first instant strictly after t (zero when the crontab
	// never fires again).
	Next(t time.Time) time.Time
}

// cronParser accepts standard five-field crontabs, an optional leading
// seconds field, and descriptors such as @hourly and @every 5m.
var cronParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// ParseCron parses a crontab evaluated in the IANA time zone tz ("" means
// UTC): "0 3 * * *" with tz "Europe/Berlin" fires at 03:00 Berlin time, DST
// included. A six-field spec starts with seconds ("*/1 * * * * *").
func ParseCron(spec, tz string) (Cron, error) {
	loc := time.UTC
	if tz != "" {
		var err error
		if loc, err = time.LoadLocation(tz); err != nil {
			return nil, fmt.Errorf("crontab time zone %q: %w", tz, err)
		}
	}
	if strings.HasPrefix(strings.TrimSpace(spec), "CRON_TZ=") || strings.HasPrefix(strings.TrimSpace(spec), "TZ=") {
		return nil, fmt.Errorf("crontab %q: give the time zone separately, not as a prefix", spec)
	}
	s, err := cronParser.Parse(spec)
	if err != nil {
		return nil, fmt.Errorf("crontab %q: %w", spec, err)
	}
	if ss, ok := s.(*cron.SpecSchedule); ok {
		ss.Location = loc
	}
	return s, nil
}
