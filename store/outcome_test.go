package store_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/store"
)

// TestOutcomeSpelling: Outcome writes the outcomes column's keys as the
// runner always wrote them (zero ids, reason and error absent,
// duration_ms always), and DecodeOutcomes reads rows with and without a
// duration, NULL, and a column that is not a list of objects.
func TestOutcomeSpelling(t *testing.T) {
	t.Parallel()
	ms := int64(1500)
	zero := int64(0)
	b, err := json.Marshal([]store.Outcome{
		{Type: "compaction", Outcome: "done", Reason: "mse above threshold", BeforeSnapshotID: 101, AfterSnapshotID: 102, DurationMs: &ms},
		{Type: "snapshot-expiry", Outcome: "failed", Reason: "not run: the job could not start", Error: "boom", DurationMs: &zero},
	})
	require.NoError(t, err)
	require.Equal(t, `[{"type":"compaction","outcome":"done","reason":"mse above threshold","before_snapshot_id":101,"after_snapshot_id":102,"duration_ms":1500},`+
		`{"type":"snapshot-expiry","outcome":"failed","reason":"not run: the job could not start","error":"boom","duration_ms":0}]`, string(b))

	got, err := store.Job{Outcomes: b}.DecodeOutcomes()
	require.NoError(t, err)
	require.Len(t, got, 2)
	require.Equal(t, int64(102), got[0].AfterSnapshotID)
	require.Equal(t, &ms, got[0].DurationMs)

	got, err = store.Job{Outcomes: json.RawMessage(`[{"type":"compaction","outcome":"done"}]`)}.DecodeOutcomes()
	require.NoError(t, err)
	require.Equal(t, []store.Outcome{{Type: "compaction", Outcome: "done"}}, got, "no duration recorded: nil")

	got, err = store.Job{}.DecodeOutcomes()
	require.NoError(t, err)
	require.Nil(t, got, "NULL")

	_, err = store.Job{Outcomes: json.RawMessage(`["odd"]`)}.DecodeOutcomes()
	require.Error(t, err)
}
