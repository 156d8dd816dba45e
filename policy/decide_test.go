package policy_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/policy"
	"github.com/tms-dev/tms/sampler"
)

func TestDecide(t *testing.T) {
	t.Parallel()
	hour := int64(time.Hour / time.Millisecond)
	for _, tc := range []struct {
		name    string
		typ     policy.Type
		content string
		m       sampler.Metrics
		work    bool
		reason  string
	}{
		{"compaction: no data files", policy.Compaction, `{}`, sampler.Metrics{}, false, "table has no data files"},
		{"compaction: mse over", policy.Compaction, `{"minDataFileMse": 100}`,
			sampler.Metrics{DataFileNumber: 3, DataFileMSE: 250}, true, "data-file-mse 250 ≥ minDataFileMse 100"},
		{"compaction: deletes over", policy.Compaction, `{"minDataFileMse": 1e30, "minDeleteFileNumber": 2}`,
			sampler.Metrics{DataFileNumber: 3, DataFileMSE: 250, DeleteFileNumber: 2}, true, "delete-file-number 2 ≥ minDeleteFileNumber 2"},
		{"compaction: below", policy.Compaction, `{"minDataFileMse": 1e30}`,
			sampler.Metrics{DataFileNumber: 3, DataFileMSE: 250}, false, "below thresholds: data-file-mse 250 < minDataFileMse 1e+30"},
		{"manifests: many", policy.ManifestRewrite, `{"maxManifestNumber": 10}`,
			sampler.Metrics{ManifestNumber: 10, AvgManifestSize: 1 << 30}, true, "manifest-number 10 ≥ maxManifestNumber 10"},
		{"manifests: few", policy.ManifestRewrite, `{}`,
			sampler.Metrics{ManifestNumber: 1, AvgManifestSize: 5000}, false, "below thresholds: manifest-number 1"},
		{"expiry: none", policy.SnapshotExpiry, `{}`, sampler.Metrics{}, false, "table has no snapshot"},
		{"expiry: too young", policy.SnapshotExpiry, `{"rewriteOptions": {"older-than-ms": 86400000}}`,
			sampler.Metrics{SnapshotNumber: 9, OldestSnapshotAgeMs: hour}, false, "oldest snapshot is 1h0m0s old, younger than older-than 24h0m0s"},
		{"expiry: old enough", policy.SnapshotExpiry, `{"rewriteOptions": {"older-than-ms": 3600000}}`,
			sampler.Metrics{SnapshotNumber: 9, OldestSnapshotAgeMs: 2 * hour}, true, "9 snapshots, the oldest 2h0m0s old ≥ older-than 1h0m0s"},
		{"expiry: table retention", policy.SnapshotExpiry, `{}`,
			sampler.Metrics{SnapshotNumber: 9, OldestSnapshotAgeMs: hour}, true, "the retention is the table's history.expire.* properties"},
		{"orphans", policy.OrphanCleanup, `{}`, sampler.Metrics{}, true, "the runner lists the table location"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := policy.Decide(tc.typ, json.RawMessage(tc.content), tc.m)
			require.NoError(t, err)
			require.Equal(t, tc.work, v.Work, v.Reason)
			require.Contains(t, v.Reason, tc.reason)
		})
	}
	_, err := policy.Decide(policy.Compaction, json.RawMessage(`{"minDataFileMse": "x"}`), sampler.Metrics{})
	require.ErrorContains(t, err, "minDataFileMse")
	_, err = policy.Decide("vacuum", nil, sampler.Metrics{})
	require.ErrorContains(t, err, `unknown maintenance type "vacuum"`)
}

func TestFewCandidates(t *testing.T) {
	t.Parallel()
	p, err := policy.ParseCompaction(json.RawMessage(`{"rewriteOptions": {"min-input-files": 3}}`))
	require.NoError(t, err)
	why, few := p.FewCandidates(sampler.Metrics{DataFileNumber: 2, SmallFileNumber: 2})
	require.True(t, few)
	require.Equal(t, "no file group likely qualifies: 2 small data files and no delete files, and a group needs min-input-files 3 candidates in one partition", why)
	_, few = p.FewCandidates(sampler.Metrics{DataFileNumber: 3, SmallFileNumber: 3})
	require.False(t, few, "enough small files")
	_, few = p.FewCandidates(sampler.Metrics{DataFileNumber: 1, SmallFileNumber: 1, DeleteFileNumber: 1})
	require.False(t, few, "delete files make candidates the metrics cannot count")
	why, few = policy.CompactionOptions{}.FewCandidates(sampler.Metrics{SmallFileNumber: 4})
	require.True(t, few)
	require.Contains(t, why, "min-input-files 5", "iceberg-go's default")

	// Enough small files in the table, but spread over partitions.
	why, few = p.FewCandidates(sampler.Metrics{DataFileNumber: 7, SmallFileNumber: 7, PartitionNumber: 7, MaxPartitionSmallFileNumber: 1})
	require.True(t, few)
	require.Equal(t, "no file group likely qualifies: 7 small data files in 7 partitions, at most 1 in one, and no delete files, and a group needs min-input-files 3 candidates in one partition", why)
	_, few = p.FewCandidates(sampler.Metrics{DataFileNumber: 7, SmallFileNumber: 7, PartitionNumber: 3, MaxPartitionSmallFileNumber: 3})
	require.False(t, few, "one partition holds enough")
	_, few = p.FewCandidates(sampler.Metrics{DataFileNumber: 7, SmallFileNumber: 7, PartitionNumber: 7})
	require.False(t, few, "a row sampled before the per-partition count: the table's count decides")
}
