package chain

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestBadPolicyFailsTypeWithoutTouchingTable(t *testing.T) {
	t.Parallel()
	b := setup(t, "tms.orphans")
	rep := b.run(t, Step{Type: Compaction, Policy: policyJSON(`{"rewriteOptions": {"target-file-size-bytes": -1}}`)},
		Step{Type: SnapshotExpiry, Policy: policyJSON(`{"retain-last": 0}`)})
	require.Equal(t, []Outcome{Failed, Failed}, outcomes(rep))
	require.Contains(t, rep.Types[0].Err, "rewriteOptions.target-file-size-bytes: must be positive, got -1")
	require.Contains(t, rep.Types[1].Err, "retain-last: must be positive, got 0")
}

func TestStepsOutOfOrderRejected(t *testing.T) {
	t.Parallel()
	_, err := Run(t.Context(), nil, nil, []Step{{Type: SnapshotExpiry}, {Type: Compaction}}, Options{})
	require.Error(t, err)
}
