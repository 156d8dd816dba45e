package store_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/tms-dev/tms/store"
)

// A database at version 9 has metrics rows but no table_latest_metrics;
// 0010 fills it with each table's newest row, by recorded_at, then policy
// id, then snapshot id, and the store keeps it from then on.
func TestMigration10BackfillsLatestMetrics(t *testing.T) {
	t.Parallel()
	for _, h := range harnesses() {
		t.Run(h.name, func(t *testing.T) {
			t.Parallel()
			ctx, dbURL := t.Context(), h.newURL(t)
			h.migrateTo(t, dbURL, 9)
			h.exec(t, dbURL, `INSERT INTO maintained_table (id, catalog, namespace, name, table_uuid) VALUES
				(1, 'c', 'ns', 'a', 'u1'), (2, 'c', 'ns', 'b', 'u2'), (3, 'c', 'ns', 'c', 'u3')`)
			ts := func(hour int) string { return fmt.Sprintf("'2030-01-01T%02d:00:00.000000Z'", hour) }
			h.exec(t, dbURL, `INSERT INTO table_snapshot_metrics (table_id, policy_id, snapshot_id, metrics_value, recorded_at) VALUES
				(1, 1, 10, '{"small-file-number": 1}', `+ts(1)+`),
				(1, 1, 12, '{"small-file-number": 3}', `+ts(3)+`),
				(1, 2, 11, '{"small-file-number": 2}', `+ts(2)+`),
				(2, 5, 20, '{"small-file-number": 40}', `+ts(4)+`),
				(2, 7, 19, '{"small-file-number": 50}', `+ts(4)+`),
				(2, 7, 18, '{"small-file-number": 60}', `+ts(4)+`),
				(2, 0, 21, '{"small-file-number": 70}', `+ts(1)+`)`)
			applied, err := store.Migrate(ctx, dbURL, zaptest.NewLogger(t))
			require.NoError(t, err)
			require.Equal(t, versionsFrom(10), applied)
			require.Equal(t, []int64{12, 19}, h.ints(t, dbURL, `SELECT snapshot_id FROM table_latest_metrics ORDER BY table_id`),
				"table 1: the newest; table 2: at one instant the highest policy, then snapshot id; table 3: none")

			s, err := store.Open(ctx, dbURL, nil)
			require.NoError(t, err)
			defer s.Close()
			page, err := s.ListTableHealth(ctx, store.TableHealthQuery{Limit: 10})
			require.NoError(t, err)
			require.Equal(t, 3, page.Total)
			var order []int64
			for _, th := range page.Tables {
				order = append(order, th.ID)
			}
			require.Equal(t, []int64{2, 1, 3}, order, "50 small files, then 3, then no metrics")
			require.JSONEq(t, `{"small-file-number": 50}`, string(page.Tables[0].Metrics.Value))
			require.Equal(t, time.Date(2030, 1, 1, 4, 0, 0, 0, time.UTC), page.Tables[0].Metrics.RecordedAt)
			require.Nil(t, page.Tables[2].Metrics)

			// From here on the store keeps it: newer metrics move table 1
			// to the top, older ones of table 2 change nothing.
			require.NoError(t, s.UpsertSnapshotMetrics(ctx, store.SnapshotMetrics{TableID: 1, PolicyID: 1, SnapshotID: 13,
				Value: []byte(`{"small-file-number": 99}`), RecordedAt: time.Date(2030, 1, 1, 5, 0, 0, 0, time.UTC)}))
			require.NoError(t, s.UpsertSnapshotMetrics(ctx, store.SnapshotMetrics{TableID: 2, PolicyID: 9, SnapshotID: 17,
				Value: []byte(`{"small-file-number": 999}`), RecordedAt: time.Date(2030, 1, 1, 3, 0, 0, 0, time.UTC)}))
			require.Equal(t, []int64{13, 19}, h.ints(t, dbURL, `SELECT snapshot_id FROM table_latest_metrics ORDER BY table_id`))
		})
	}
}
