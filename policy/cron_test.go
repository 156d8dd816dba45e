package policy_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/policy"
)

func TestParseCronTimeZone(t *testing.T) {
	t.Parallel()
	daily, err := policy.ParseCron("0 3 * * *", "Europe/Berlin")
	require.NoError(t, err)
	// 03:00 in Berlin is 02:00 UTC in winter and 01:00 UTC in summer.
	require.Equal(t, time.Date(2031, 1, 10, 2, 0, 0, 0, time.UTC),
		daily.Next(time.Date(2031, 1, 9, 12, 0, 0, 0, time.UTC)).UTC())
	require.Equal(t, time.Date(2031, 7, 10, 1, 0, 0, 0, time.UTC),
		daily.Next(time.Date(2031, 7, 9, 12, 0, 0, 0, time.UTC)).UTC())

	every, err := policy.ParseCron("*/10 * * * * *", "")
	require.NoError(t, err)
	require.Equal(t, time.Date(2031, 1, 1, 0, 0, 10, 0, time.UTC), every.Next(time.Date(2031, 1, 1, 0, 0, 3, 0, time.UTC)))

	for _, bad := range [][2]string{{"61 * * * *", ""}, {"* * *", ""}, {"0 3 * * *", "Mars/Base"}, {"CRON_TZ=UTC 0 3 * * *", ""}} {
		_, err := policy.ParseCron(bad[0], bad[1])
		require.Error(t, err, "%q in %q", bad[0], bad[1])
	}
}
