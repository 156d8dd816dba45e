package chain

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/stretchr/testify/require"
)

// casRaceCatalog simulates losing the narrow race inside the SQL catalog's
// CommitTable (between its requirement check and its compare-and-swap):
// on the first commit it lets a concurrent writer commit, then reports the
// lost race the way the SQL catalog does, wrapping table.ErrCommitFailed.
type casRaceCatalog struct {
	catalog.Catalog
	once   sync.Once
	writer func()
}

func (c *casRaceCatalog) CommitTable(ctx context.Context, ident table.Identifier, reqs []table.Requirement, ups []table.Update) (table.Metadata, string, error) {
	raced := false
	c.once.Do(func() { c.writer(); raced = true })
	if raced {
		return nil, "", fmt.Errorf("%w: table metadata-location moved underneath us (simulated)", table.ErrCommitFailed)
	}
	return c.Catalog.CommitTable(ctx, ident, reqs, ups)
}

// A commit that lost the compare-and-swap: with commit.retry.num-retries >
// 0 iceberg-go refreshes, validates and replays it; with 0 the chain
// classifies the snapshot that won and rebuilds the rewrite on it (see
// commitRewrite). Either way a concurrent append is kept and the compaction
// lands on top of it; a concurrent delete of rows in the rewritten files
// ends the type conflict.
func TestCompactionLostCASRace(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		retries  string
		write    func(t *testing.T, b bundle)
		outcome  Outcome
		wantRows int64
	}{
		{"append/retries=0", "0", func(t *testing.T, b bundle) { b.appendRows(t, 1_000_000, 300) }, Done, smallRows + 300},
		{"delete/retries=0", "0", func(t *testing.T, b bundle) { b.deleteRows(t, 700) }, Conflict, smallRows - 700},
		{"append/retries=3", "3", func(t *testing.T, b bundle) { b.appendRows(t, 1_000_000, 300) }, Done, smallRows + 300},
		{"delete/retries=3", "3", func(t *testing.T, b bundle) { b.deleteRows(t, 700) }, Conflict, smallRows - 700},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, "tms.small_files")
			b.setProps(t, iceberg.Properties{table.CommitNumRetriesKey: tc.retries, table.CommitMinRetryWaitMsKey: "1"})
			var intended string
			b.cat = &casRaceCatalog{Catalog: b.cat, writer: func() {
				tc.write(t, b)
				intended = b.sum(t).Checksum
			}}
			rep := b.run(t, Step{Type: Compaction})
			tr := rep.Types[0]
			require.Equal(t, tc.outcome, tr.Outcome, tr.Reason)
			got := b.sum(t)
			require.Equal(t, tc.wantRows, got.Rows)
			require.Equal(t, intended, got.Checksum)
			require.Empty(t, b.strayFiles(t))
			if tc.outcome == Done {
				require.EqualValues(t, 2, tr.MetricsAfter.DataFileNumber, "the compacted file plus the appended one")
			}
		})
	}
}
