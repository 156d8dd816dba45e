package drift_test

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/catalogs"
	"github.com/tms-dev/tms/drift"
)

var (
	ident  = table.Identifier{"ns", "t"}
	schema = iceberg.NewSchema(0, iceberg.NestedField{ID: 1, Name: "id", Type: iceberg.PrimitiveTypes.Int64, Required: true})
)

type bundle struct {
	ctx context.Context
	cat catalog.Catalog
	tbl *table.Table
}

// setup opens a fresh local catalog holding an empty table ns.t.
func setup(t *testing.T) *bundle {
	t.Helper()
	ctx := context.Background()
	cat, err := catalogs.OpenLocal(ctx, t.TempDir(), true)
	require.NoError(t, err)
	require.NoError(t, cat.CreateNamespace(ctx, table.Identifier{"ns"}, nil))
	tbl, err := cat.CreateTable(ctx, ident, schema, catalog.WithProperties(iceberg.Properties{"format-version": "2"}))
	require.NoError(t, err)
	return &bundle{ctx: ctx, cat: cat, tbl: tbl}
}

// commit appends one row and returns the new snapshot id.
func (b *bundle) commit(t *testing.T) int64 {
	t.Helper()
	sc, err := table.SchemaToArrowSchema(schema, nil, true, false)
	require.NoError(t, err)
	at, err := array.TableFromJSON(memory.DefaultAllocator, sc, []string{`[{"id": 1}]`})
	require.NoError(t, err)
	defer at.Release()
	b.tbl, err = b.tbl.AppendTable(b.ctx, at, 1024, nil)
	require.NoError(t, err)
	return b.tbl.CurrentSnapshot().SnapshotID
}

func (b *bundle) check(t *testing.T, base drift.Base) drift.Result {
	t.Helper()
	res, err := drift.Check(b.ctx, b.cat, base)
	require.NoError(t, err)
	return res
}

func TestUnchanged(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s1 := b.commit(t)
	base := drift.BaseOf(b.tbl)
	require.Equal(t, s1, base.SnapshotID)
	require.Equal(t, ident, base.Ident)

	// A metadata-only change is not drift.
	tx := b.tbl.NewTransaction()
	require.NoError(t, tx.SetProperties(iceberg.Properties{"owner": "tms"}))
	_, err := tx.Commit(b.ctx)
	require.NoError(t, err)

	res := b.check(t, base)
	require.Equal(t, drift.Unchanged, res.Kind)
	require.Equal(t, s1, res.HeadSnapshotID)
	require.True(t, res.Kind.MayCommit())
}

func TestMoved(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.commit(t)
	base := drift.BaseOf(b.tbl)
	b.commit(t)
	head := b.commit(t)

	res := b.check(t, base)
	require.Equal(t, drift.Moved, res.Kind)
	require.Equal(t, head, res.HeadSnapshotID)
	require.Equal(t, 2, res.NewSnapshots)
	require.False(t, res.Kind.MayCommit())
	require.Contains(t, res.Reason, "2 new snapshots")
}

func TestEmptyTable(t *testing.T) {
	t.Parallel()
	b := setup(t)
	base := drift.BaseOf(b.tbl)
	require.Zero(t, base.SnapshotID)
	require.Equal(t, drift.Unchanged, b.check(t, base).Kind)

	head := b.commit(t)
	res := b.check(t, base)
	require.Equal(t, drift.Moved, res.Kind)
	require.Equal(t, head, res.HeadSnapshotID)
	require.Equal(t, 1, res.NewSnapshots)
}

func TestRewoundByRollback(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s1 := b.commit(t)
	b.commit(t)
	base := drift.BaseOf(b.tbl)

	tx := b.tbl.NewTransaction()
	require.NoError(t, tx.RollbackToSnapshot(s1))
	var err error
	b.tbl, err = tx.Commit(b.ctx)
	require.NoError(t, err)

	res := b.check(t, base)
	require.Equal(t, drift.Rewound, res.Kind)
	require.Equal(t, s1, res.HeadSnapshotID)
	require.False(t, res.Kind.MayCommit())

	// New work on top of the rolled-back head is still not on top of S0.
	head := b.commit(t)
	res = b.check(t, base)
	require.Equal(t, drift.Rewound, res.Kind)
	require.Equal(t, head, res.HeadSnapshotID)
}

func (b *bundle) expireAllBut(t *testing.T, keep int) {
	t.Helper()
	tx := b.tbl.NewTransaction()
	require.NoError(t, tx.ExpireSnapshots(table.WithOlderThan(0), table.WithRetainLast(keep), table.WithPostCommit(false)))
	var err error
	b.tbl, err = tx.Commit(b.ctx)
	require.NoError(t, err)
	require.Len(t, b.tbl.Metadata().Snapshots(), keep)
}

// TestExpiredBase covers S0 expired while HEAD descends from it: the parent
// id recorded in S0's child still proves descent.
func TestExpiredBase(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s1 := b.commit(t)
	base := drift.BaseOf(b.tbl)
	b.commit(t)
	head := b.commit(t)
	b.expireAllBut(t, 2)
	require.Nil(t, b.tbl.SnapshotByID(s1))

	res := b.check(t, base)
	require.Equal(t, drift.Moved, res.Kind)
	require.Equal(t, head, res.HeadSnapshotID)
	require.Equal(t, 2, res.NewSnapshots)
}

// TestBrokenAncestry covers history expired past S0's child: whether HEAD
// descends from S0 can no longer be known, which is treated as Rewound.
func TestBrokenAncestry(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.commit(t)
	base := drift.BaseOf(b.tbl)
	s2 := b.commit(t)
	b.commit(t)
	b.commit(t)
	b.expireAllBut(t, 2)

	res := b.check(t, base)
	require.Equal(t, drift.Rewound, res.Kind)
	require.Contains(t, res.Reason, "unknown")
	require.Contains(t, res.Reason, itoa(s2))
}

func TestDropped(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.commit(t)
	base := drift.BaseOf(b.tbl)
	require.NoError(t, b.cat.DropTable(b.ctx, ident))

	res := b.check(t, base)
	require.Equal(t, drift.Dropped, res.Kind)
	require.Zero(t, res.HeadSnapshotID)
	require.Contains(t, res.Reason, "ns.t")
	require.False(t, res.Kind.MayCommit())
}

func TestRecreated(t *testing.T) {
	t.Parallel()
	b := setup(t)
	base := drift.BaseOf(b.tbl) // empty at S0, like the new table
	require.NoError(t, b.cat.DropTable(b.ctx, ident))
	tbl, err := b.cat.CreateTable(b.ctx, ident, schema)
	require.NoError(t, err)

	res := b.check(t, base)
	require.Equal(t, drift.Recreated, res.Kind)
	require.Equal(t, tbl.Metadata().TableUUID().String(), res.TableUUID)
	require.NotEqual(t, base.TableUUID, res.TableUUID)
	require.False(t, res.Kind.MayCommit())
}

func TestCheckNeedsIdent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, err := drift.Check(b.ctx, b.cat, drift.Base{})
	require.ErrorIs(t, err, drift.ErrInvalidArgument)
}

func TestKindNames(t *testing.T) {
	t.Parallel()
	want := map[drift.Kind]string{
		drift.Unchanged: "unchanged", drift.Moved: "moved", drift.Rewound: "rewound",
		drift.Dropped: "dropped", drift.Recreated: "recreated",
	}
	for k, name := range want {
		require.Equal(t, name, k.String())
		raw, err := json.Marshal(k)
		require.NoError(t, err)
		require.JSONEq(t, `"`+name+`"`, string(raw))
		var back drift.Kind
		require.NoError(t, json.Unmarshal(raw, &back))
		require.Equal(t, k, back)
		require.Equal(t, k == drift.Unchanged, k.MayCommit())
	}
	require.Equal(t, "kind(42)", drift.Kind(42).String())
	var k drift.Kind
	require.ErrorIs(t, k.UnmarshalText([]byte("sideways")), drift.ErrInvalidArgument)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
