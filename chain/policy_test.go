package chain

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseTypes(t *testing.T) {
	t.Parallel()
	got, err := ParseTypes("orphan-cleanup, compaction,snapshot-expiry,compaction")
	require.NoError(t, err)
	require.Equal(t, []Type{Compaction, SnapshotExpiry, OrphanCleanup}, got)
	_, err = ParseTypes("compaction,vacuum")
	require.ErrorIs(t, err, ErrInvalidPolicy)
	require.ErrorContains(t, err, `"vacuum"`)
	_, err = ParseTypes("")
	require.Error(t, err)
}

func TestValidatePolicyNamesField(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		t       Type
		content string
		want    string
	}{
		{Compaction, `{"rewriteOptions": {"target-file-size-bytes": -1}}`, "rewriteOptions.target-file-size-bytes: must be positive, got -1"},
		{Compaction, `{"rewriteOptions": {"target-file-size-bytes": "abc"}}`, "rewriteOptions.target-file-size-bytes: want an integer"},
		{Compaction, `{"minDataFileMse": -3}`, "minDataFileMse: must be >= 0"},
		{Compaction, `{"maxPartitionNum": 0}`, "maxPartitionNum: must be positive"},
		{Compaction, `{"rewriteOptions": {"partial-progress.enabled": "maybe"}}`, "rewriteOptions.partial-progress.enabled: want true or false"},
		{Compaction, `{"rewriteOptions": {"where": "ts >="}}`, "rewriteOptions.where:"},
		{Compaction, `{"rewriteOptions": {"where": "a = 1 OR b = 2"}}`, "rewriteOptions.where: want AND"},
		{Compaction, `{"rewriteOptions": {"target-file-size": 5}}`, "rewriteOptions.target-file-size: unknown option"},
		{ManifestRewrite, `{"rewriteOptions": {"target-manifest-size-bytes": 0}}`, "rewriteOptions.target-manifest-size-bytes: must be positive"},
		{SnapshotExpiry, `{"rewriteOptions": {"retain-last": 0}}`, "rewriteOptions.retain-last: must be positive, got 0"},
		{SnapshotExpiry, `{"olderThanMs": -5}`, "olderThanMs: must be >= 0"},
		{SnapshotExpiry, `{"rewriteOptions": {"older-than": "soon"}}`, "rewriteOptions.older-than: want a duration"},
		{OrphanCleanup, `{"older-than": "10m"}`, "older-than: must be at least 1h0m0s"},
		{OrphanCleanup, `[1]`, "content: not a JSON object"},
		{Type("vacuum"), `{}`, `unknown maintenance type "vacuum"`},
	} {
		err := ValidatePolicy(tc.t, json.RawMessage(tc.content))
		require.ErrorIs(t, err, ErrInvalidPolicy, tc.content)
		require.ErrorContains(t, err, tc.want, tc.content)
	}
	for _, ok := range []struct {
		t       Type
		content string
	}{
		{Compaction, ``},
		{Compaction, `{"minDataFileMse": 1e5, "schedule": {"onCommit": true}, "minIntervalMs": 60000, "jobOptions": {"x": "y"},
			"rewriteOptions": {"target-file-size-bytes": "134217728", "min-input-files": 2, "partial-progress.enabled": true,
			"where": "category = 'books' AND id >= 10"}}`},
		{SnapshotExpiry, `{"olderThanMs": 3600000, "retainLast": 3}`},
		{OrphanCleanup, `{"rewriteOptions": {"older-than": "3d"}}`},
	} {
		require.NoError(t, ValidatePolicy(ok.t, json.RawMessage(ok.content)), ok.content)
	}
}

func TestBadPolicyFailsTypeWithoutTouchingTable(t *testing.T) {
	t.Parallel()
	b := setup(t, "tms.orphans")
	rep := b.run(t, Step{Type: Compaction, Policy: policy(`{"rewriteOptions": {"target-file-size-bytes": -1}}`)},
		Step{Type: SnapshotExpiry, Policy: policy(`{"retain-last": 0}`)})
	require.Equal(t, []Outcome{Failed, Failed}, outcomes(rep))
	require.Contains(t, rep.Types[0].Err, "rewriteOptions.target-file-size-bytes: must be positive, got -1")
	require.Contains(t, rep.Types[1].Err, "retain-last: must be positive, got 0")
}

func TestStepsOutOfOrderRejected(t *testing.T) {
	t.Parallel()
	_, err := Run(t.Context(), nil, nil, []Step{{Type: SnapshotExpiry}, {Type: Compaction}}, Options{})
	require.Error(t, err)
}
