package storetest

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/store"
)

// exercisePolicies runs the conformance suite of store.Policies (policies,
// their versions and attachments) against the stores open returns, under
// the same contract as Exercise.
func exercisePolicies(t *testing.T, open func(t *testing.T) store.Store) {
	t.Helper()
	setup := func(t *testing.T) *policyBundle {
		t.Helper()
		s := open(t)
		return &policyBundle{s: s, p: s, ctx: t.Context()}
	}
	for name, fn := range map[string]func(*testing.T, *policyBundle){
		"CreateAndGet":             exerciseCreatePolicy,
		"InvalidArguments":         exercisePolicyInvalidArguments,
		"AlterAddsVersions":        exerciseAlterPolicy,
		"EnableDisable":            exerciseEnablePolicy,
		"DeleteFreesName":          exerciseDeletePolicy,
		"AttachDetach":             exerciseAttachDetach,
		"EffectiveNearestWins":     exerciseEffectivePolicies,
		"TablesForPolicyBatches":   exerciseTablesForPolicy,
		"TablesForPolicySparse":    exerciseTablesForPolicySparse,
		"ConcurrentNameOnce":       exerciseConcurrentCreate,
		"ConcurrentAttachOnce":     exerciseConcurrentAttach,
		"ConcurrentAlterVersions":  exerciseConcurrentAlter,
		"ConcurrentDeleteOrAttach": exerciseConcurrentDeleteAttach,
		"EnqueueTablesForPolicy":   exerciseEnqueueTablesForPolicy,
		"CompleteExpand":           exerciseCompleteExpand,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			fn(t, setup(t))
		})
	}
}

// Policy types used by the suite (the store treats them as opaque text).
const (
	typeCompaction = "system_iceberg_compaction"
	typeExpiry     = "system_iceberg_snapshot_expiration"
)

type policyBundle struct {
	s   store.Store
	p   store.Policies
	ctx context.Context
}

func (b *policyBundle) create(t *testing.T, name, typ, content string) store.Policy {
	t.Helper()
	p, err := b.p.CreatePolicy(b.ctx, store.NewPolicy{Name: name, Type: typ, Enabled: true, Content: json.RawMessage(content)})
	require.NoError(t, err)
	return p
}

func (b *policyBundle) attach(t *testing.T, name string, obj store.PolicyObject) store.Attachment {
	t.Helper()
	a, created, err := b.p.Attach(b.ctx, name, obj)
	require.NoError(t, err)
	require.True(t, created)
	return a
}

func (b *policyBundle) register(t *testing.T, catalog, namespace, name string) store.Table {
	t.Helper()
	tbl, err := b.s.RegisterTable(b.ctx, store.TableRef{Catalog: catalog, Namespace: namespace, Name: name, UUID: rand.Text()})
	require.NoError(t, err)
	return tbl
}

// effective returns policy type -> winning policy name for a table.
func (b *policyBundle) effective(t *testing.T, catalog, namespace, table string) map[string]string {
	t.Helper()
	eps, err := b.p.EffectivePolicies(b.ctx, catalog, namespace, table)
	require.NoError(t, err)
	got := map[string]string{}
	for i, ep := range eps {
		if i > 0 {
			require.Less(t, eps[i-1].Policy.Type, ep.Policy.Type, "ordered by type, one per type")
		}
		require.Equal(t, ep.Policy.ID, ep.Attachment.PolicyID)
		require.Equal(t, ep.Policy.Name, ep.Attachment.PolicyName)
		got[ep.Policy.Type] = ep.Policy.Name
	}
	return got
}

// walk collects every table of a policy in batches of size n, following
// the cursor TablesForPolicy returns, and counts the calls and the empty
// batches that still had a next cursor.
func (b *policyBundle) walk(t *testing.T, policyID int64, n int) []store.Table {
	t.Helper()
	all, _, _ := b.walkCounting(t, policyID, n)
	return all
}

func (b *policyBundle) walkCounting(t *testing.T, policyID int64, n int) (all []store.Table, calls, emptyButMore int) {
	t.Helper()
	after := int64(0)
	for {
		batch, next, err := b.p.TablesForPolicy(b.ctx, policyID, after, n)
		require.NoError(t, err)
		calls++
		require.LessOrEqual(t, len(batch), n)
		for _, tbl := range batch {
			require.Greater(t, tbl.ID, after, "ascending ids after the cursor")
			after = tbl.ID
		}
		all = append(all, batch...)
		if next == 0 {
			return all, calls, emptyButMore
		}
		if len(batch) == 0 {
			emptyButMore++
		}
		require.GreaterOrEqual(t, next, after, "the cursor never goes back")
		after = next
		require.Less(t, calls, 100000, "the walk ends")
	}
}

func catalogObj(c string) store.PolicyObject {
	return store.PolicyObject{Level: store.LevelCatalog, Catalog: c}
}

func namespaceObj(c, ns string) store.PolicyObject {
	return store.PolicyObject{Level: store.LevelNamespace, Catalog: c, Namespace: ns}
}

func tableObj(c, ns, tbl string) store.PolicyObject {
	return store.PolicyObject{Level: store.LevelTable, Catalog: c, Namespace: ns, Table: tbl}
}

func exerciseCreatePolicy(t *testing.T, b *policyBundle) {
	content := `{"schedule": {"crontab": "@hourly"}, "minDataFileMse": 1000}`
	p, err := b.p.CreatePolicy(b.ctx, store.NewPolicy{
		Name: "nightly", Comment: "compact nightly", Type: typeCompaction, Enabled: true, Content: json.RawMessage(content),
	})
	require.NoError(t, err)
	require.Positive(t, p.ID)
	require.Equal(t, "nightly", p.Name)
	require.Equal(t, "compact nightly", p.Comment)
	require.Equal(t, typeCompaction, p.Type)
	require.True(t, p.Enabled)
	require.Equal(t, 1, p.Version)
	require.JSONEq(t, content, string(p.Content))
	require.Equal(t, time.UTC, p.CreatedAt.Location())
	require.WithinDuration(t, time.Now(), p.CreatedAt, time.Minute)
	require.Equal(t, p.CreatedAt, p.UpdatedAt)
	require.False(t, p.Deleted())

	got, err := b.p.GetPolicy(b.ctx, "nightly")
	require.NoError(t, err)
	require.Equal(t, p, got)
	byID, err := b.p.GetPolicyByID(b.ctx, p.ID)
	require.NoError(t, err)
	require.Equal(t, p, byID)
	v1, err := b.p.GetPolicyVersion(b.ctx, p.ID, 1)
	require.NoError(t, err)
	require.JSONEq(t, content, string(v1.Content))
	require.Equal(t, p.CreatedAt, v1.CreatedAt)

	off, err := b.p.CreatePolicy(b.ctx, store.NewPolicy{Name: "a-off", Type: typeExpiry, Content: json.RawMessage(`{}`)})
	require.NoError(t, err)
	require.False(t, off.Enabled, "the zero NewPolicy is disabled")

	list, err := b.p.ListPolicies(b.ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"a-off", "nightly"}, policyNames(list), "by name")

	_, err = b.p.CreatePolicy(b.ctx, store.NewPolicy{Name: "nightly", Type: typeExpiry, Content: json.RawMessage(`{}`)})
	require.ErrorIs(t, err, store.ErrConflict)
	require.ErrorContains(t, err, `"nightly"`)

	_, err = b.p.GetPolicy(b.ctx, "nope")
	require.ErrorIs(t, err, store.ErrNotFound)
	require.ErrorContains(t, err, `"nope"`)
	_, err = b.p.GetPolicyByID(b.ctx, p.ID+1000)
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = b.p.GetPolicyVersion(b.ctx, p.ID, 2)
	require.ErrorIs(t, err, store.ErrNotFound)
}

func policyNames(ps []store.Policy) []string {
	names := make([]string, len(ps))
	for i, p := range ps {
		names[i] = p.Name
	}
	return names
}

func exercisePolicyInvalidArguments(t *testing.T, b *policyBundle) {
	for name, np := range map[string]store.NewPolicy{
		"empty name":     {Type: typeCompaction, Content: json.RawMessage(`{}`)},
		"padded name":    {Name: " x", Type: typeCompaction, Content: json.RawMessage(`{}`)},
		"empty type":     {Name: "x", Content: json.RawMessage(`{}`)},
		"no content":     {Name: "x", Type: typeCompaction},
		"array content":  {Name: "x", Type: typeCompaction, Content: json.RawMessage(`[1]`)},
		"broken content": {Name: "x", Type: typeCompaction, Content: json.RawMessage(`{"a":`)},
	} {
		_, err := b.p.CreatePolicy(b.ctx, np)
		require.ErrorIs(t, err, store.ErrInvalidArgument, name)
	}
	list, err := b.p.ListPolicies(b.ctx)
	require.NoError(t, err)
	require.Empty(t, list, "nothing was written")

	b.create(t, "p", typeCompaction, `{}`)
	_, err = b.p.AlterPolicy(b.ctx, "p", store.PolicyChange{})
	require.ErrorIs(t, err, store.ErrInvalidArgument, "nothing to change")
	_, err = b.p.AlterPolicy(b.ctx, "p", store.PolicyChange{Content: json.RawMessage(`"x"`)})
	require.ErrorIs(t, err, store.ErrInvalidArgument)

	for name, obj := range map[string]store.PolicyObject{
		"no catalog":           {Level: store.LevelCatalog},
		"catalog with ns":      {Level: store.LevelCatalog, Catalog: "c", Namespace: "n"},
		"namespace without ns": {Level: store.LevelNamespace, Catalog: "c"},
		"namespace with table": {Level: store.LevelNamespace, Catalog: "c", Namespace: "n", Table: "t"},
		"table without name":   {Level: store.LevelTable, Catalog: "c", Namespace: "n"},
		"empty ns level":       {Level: store.LevelNamespace, Catalog: "c", Namespace: "a..b"},
		"unknown level":        {Level: "schema", Catalog: "c", Namespace: "n"},
	} {
		_, _, err := b.p.Attach(b.ctx, "p", obj)
		require.ErrorIs(t, err, store.ErrInvalidArgument, name)
	}
	_, _, err = b.p.TablesForPolicy(b.ctx, 1, 0, 0)
	require.ErrorIs(t, err, store.ErrInvalidArgument)
}

func exerciseAlterPolicy(t *testing.T, b *policyBundle) {
	p := b.create(t, "p", typeCompaction, `{"minDataFileMse": 1}`)

	p2, err := b.p.AlterPolicy(b.ctx, "p", store.PolicyChange{Content: json.RawMessage(`{"minDataFileMse": 2}`)})
	require.NoError(t, err)
	require.Equal(t, p.ID, p2.ID)
	require.Equal(t, 2, p2.Version)
	require.JSONEq(t, `{"minDataFileMse": 2}`, string(p2.Content))
	require.Equal(t, p.Comment, p2.Comment)
	require.False(t, p2.UpdatedAt.Before(p.UpdatedAt))

	comment := "now with a comment"
	p3, err := b.p.AlterPolicy(b.ctx, "p", store.PolicyChange{Comment: &comment})
	require.NoError(t, err)
	require.Equal(t, 2, p3.Version, "a comment is not a new version")
	require.Equal(t, comment, p3.Comment)
	require.JSONEq(t, `{"minDataFileMse": 2}`, string(p3.Content))

	old, err := b.p.GetPolicyVersion(b.ctx, p.ID, 1)
	require.NoError(t, err)
	require.JSONEq(t, `{"minDataFileMse": 1}`, string(old.Content), "old versions stay as they were")
	got, err := b.p.GetPolicy(b.ctx, "p")
	require.NoError(t, err)
	require.Equal(t, p3, got)

	_, err = b.p.AlterPolicy(b.ctx, "nope", store.PolicyChange{Content: json.RawMessage(`{}`)})
	require.ErrorIs(t, err, store.ErrNotFound)
	require.ErrorContains(t, err, `"nope"`)
}

func exerciseEnablePolicy(t *testing.T, b *policyBundle) {
	p := b.create(t, "p", typeCompaction, `{}`)
	same, changed, err := b.p.SetPolicyEnabled(b.ctx, "p", true)
	require.NoError(t, err)
	require.False(t, changed)
	require.Equal(t, p, same, "nothing written")

	off, changed, err := b.p.SetPolicyEnabled(b.ctx, "p", false)
	require.NoError(t, err)
	require.True(t, changed)
	require.False(t, off.Enabled)
	require.Equal(t, p.Version, off.Version)
	got, err := b.p.GetPolicy(b.ctx, "p")
	require.NoError(t, err)
	require.False(t, got.Enabled)

	on, changed, err := b.p.SetPolicyEnabled(b.ctx, "p", true)
	require.NoError(t, err)
	require.True(t, changed)
	require.True(t, on.Enabled)

	_, _, err = b.p.SetPolicyEnabled(b.ctx, "nope", true)
	require.ErrorIs(t, err, store.ErrNotFound)
}

func exerciseDeletePolicy(t *testing.T, b *policyBundle) {
	p := b.create(t, "p", typeCompaction, `{"v": 1}`)
	b.attach(t, "p", catalogObj("cat"))
	b.attach(t, "p", tableObj("cat", "db", "t1"))
	b.register(t, "cat", "db", "t1")

	del, err := b.p.DeletePolicy(b.ctx, "p")
	require.NoError(t, err)
	require.Equal(t, p.ID, del.ID)
	require.True(t, del.Deleted())
	require.Equal(t, time.UTC, del.DeletedAt.Location())

	_, err = b.p.GetPolicy(b.ctx, "p")
	require.ErrorIs(t, err, store.ErrNotFound)
	byID, err := b.p.GetPolicyByID(b.ctx, p.ID)
	require.NoError(t, err, "ledger rows may still refer to it")
	require.True(t, byID.Deleted())
	v1, err := b.p.GetPolicyVersion(b.ctx, p.ID, 1)
	require.NoError(t, err)
	require.JSONEq(t, `{"v": 1}`, string(v1.Content))
	list, err := b.p.ListPolicies(b.ctx)
	require.NoError(t, err)
	require.Empty(t, list)
	as, err := b.p.ListAttachments(b.ctx, p.ID)
	require.NoError(t, err)
	require.Empty(t, as)
	require.Empty(t, b.effective(t, "cat", "db", "t1"))
	require.Empty(t, b.walk(t, p.ID, 10))

	_, err = b.p.DeletePolicy(b.ctx, "p")
	require.ErrorIs(t, err, store.ErrNotFound)
	_, _, err = b.p.Attach(b.ctx, "p", catalogObj("cat"))
	require.ErrorIs(t, err, store.ErrNotFound)

	// The name is free again, and the deleted policy's attachments do not
	// block the new one's.
	again := b.create(t, "p", typeCompaction, `{"v": 2}`)
	require.NotEqual(t, p.ID, again.ID)
	require.Equal(t, 1, again.Version)
	b.attach(t, "p", catalogObj("cat"))
	require.Equal(t, map[string]string{typeCompaction: "p"}, b.effective(t, "cat", "db", "t1"))
}

func exerciseAttachDetach(t *testing.T, b *policyBundle) {
	p := b.create(t, "p", typeCompaction, `{}`)
	b.create(t, "q", typeCompaction, `{}`)
	b.create(t, "e", typeExpiry, `{}`)

	obj := namespaceObj("cat", "db.sales")
	a := b.attach(t, "p", obj)
	require.Equal(t, store.Attachment{PolicyID: p.ID, PolicyName: "p", PolicyType: typeCompaction, Object: obj, CreatedAt: a.CreatedAt}, a)
	require.Equal(t, time.UTC, a.CreatedAt.Location())
	require.Equal(t, "cat.db.sales", a.Object.String())

	again, created, err := b.p.Attach(b.ctx, "p", obj)
	require.NoError(t, err)
	require.False(t, created, "attaching twice is a no-op")
	require.Equal(t, a, again)

	_, _, err = b.p.Attach(b.ctx, "q", obj)
	require.ErrorIs(t, err, store.ErrConflict, "one policy of a type per object")
	require.ErrorContains(t, err, `"p"`)
	require.ErrorContains(t, err, "cat.db.sales")

	b.attach(t, "e", obj) // another type on the same object is fine
	b.attach(t, "q", catalogObj("cat"))
	b.attach(t, "p", tableObj("cat", "db.sales", "orders"))
	b.attach(t, "p", catalogObj("other"))

	as, err := b.p.ListAttachments(b.ctx, p.ID)
	require.NoError(t, err)
	var objs []string
	for _, a := range as {
		require.Equal(t, p.ID, a.PolicyID)
		objs = append(objs, string(a.Object.Level)+":"+a.Object.String())
	}
	require.Equal(t, []string{"namespace:cat.db.sales", "table:cat.db.sales.orders", "catalog:other"}, objs)

	gone, err := b.p.Detach(b.ctx, "p", obj)
	require.NoError(t, err)
	require.Equal(t, a, gone)
	_, err = b.p.Detach(b.ctx, "p", obj)
	require.ErrorIs(t, err, store.ErrNotFound)
	require.ErrorContains(t, err, "cat.db.sales")
	_, err = b.p.Detach(b.ctx, "nope", obj)
	require.ErrorIs(t, err, store.ErrNotFound)
	b.attach(t, "q", obj) // the object is free for another compaction policy now
	as, err = b.p.ListAttachments(b.ctx, p.ID)
	require.NoError(t, err)
	require.Len(t, as, 2)

	none, err := b.p.ListAttachments(b.ctx, 424242)
	require.NoError(t, err)
	require.Empty(t, none)
}

func exerciseEffectivePolicies(t *testing.T, b *policyBundle) {
	b.create(t, "cat-wide", typeCompaction, `{}`)
	b.create(t, "db", typeCompaction, `{}`)
	b.create(t, "sales", typeCompaction, `{}`)
	table := b.create(t, "orders-only", typeCompaction, `{"x": 1}`)
	b.create(t, "expire", typeExpiry, `{}`)
	b.create(t, "underscore", typeExpiry, `{}`)

	b.attach(t, "cat-wide", catalogObj("cat"))
	b.attach(t, "db", namespaceObj("cat", "db"))
	b.attach(t, "sales", namespaceObj("cat", "db.sales"))
	orders := b.attach(t, "orders-only", tableObj("cat", "db.sales", "orders"))
	b.attach(t, "expire", catalogObj("cat"))
	b.attach(t, "underscore", namespaceObj("cat", "d_b"))

	for _, tc := range []struct {
		ns, table string
		want      map[string]string
	}{
		{"db.sales", "orders", map[string]string{typeCompaction: "orders-only", typeExpiry: "expire"}},
		{"db.sales", "items", map[string]string{typeCompaction: "sales", typeExpiry: "expire"}},
		{"db.sales.eu", "items", map[string]string{typeCompaction: "sales", typeExpiry: "expire"}},
		{"db", "orders", map[string]string{typeCompaction: "db", typeExpiry: "expire"}},
		{"db.other", "orders", map[string]string{typeCompaction: "db", typeExpiry: "expire"}},
		{"dbx", "orders", map[string]string{typeCompaction: "cat-wide", typeExpiry: "expire"}},
		{"d_b", "t", map[string]string{typeCompaction: "cat-wide", typeExpiry: "underscore"}},
		{"dxb", "t", map[string]string{typeCompaction: "cat-wide", typeExpiry: "expire"}}, // '_' is no wildcard
	} {
		require.Equal(t, tc.want, b.effective(t, "cat", tc.ns, tc.table), "cat.%s.%s", tc.ns, tc.table)
	}
	require.Empty(t, b.effective(t, "elsewhere", "db.sales", "orders"))

	eps, err := b.p.EffectivePolicies(b.ctx, "cat", "db.sales", "orders")
	require.NoError(t, err)
	require.Len(t, eps, 2)
	require.Equal(t, table, eps[0].Policy, "the winner comes with its current content")
	require.Equal(t, orders, eps[0].Attachment, "and the attachment it wins through")

	// A disabled winner still wins: it switches compaction off for the table
	// rather than letting the namespace policy through.
	_, _, err = b.p.SetPolicyEnabled(b.ctx, "orders-only", false)
	require.NoError(t, err)
	eps, err = b.p.EffectivePolicies(b.ctx, "cat", "db.sales", "orders")
	require.NoError(t, err)
	require.Equal(t, "orders-only", eps[0].Policy.Name)
	require.False(t, eps[0].Policy.Enabled)

	// Detaching hands the table to the next nearest policy.
	_, err = b.p.Detach(b.ctx, "orders-only", tableObj("cat", "db.sales", "orders"))
	require.NoError(t, err)
	require.Equal(t, "sales", b.effective(t, "cat", "db.sales", "orders")[typeCompaction])
}

func exerciseTablesForPolicy(t *testing.T, b *policyBundle) {
	wide := b.create(t, "cat-wide", typeCompaction, `{}`)
	sales := b.create(t, "sales", typeCompaction, `{}`)
	pinned := b.create(t, "pinned", typeCompaction, `{}`)
	expire := b.create(t, "expire", typeExpiry, `{}`)
	b.attach(t, "cat-wide", catalogObj("cat"))
	b.attach(t, "sales", namespaceObj("cat", "db.sales"))
	b.attach(t, "pinned", tableObj("cat", "db.sales", "t2"))
	b.attach(t, "expire", namespaceObj("cat", "db"))
	// cat-wide is also attached to a namespace below sales: the nearest of
	// its own attachments counts.
	b.attach(t, "cat-wide", namespaceObj("cat", "db.sales.eu"))

	want := map[int64][]string{}
	add := func(tbl store.Table, policies ...store.Policy) {
		for _, p := range policies {
			want[p.ID] = append(want[p.ID], fmt.Sprintf("%d:%s.%s", tbl.ID, tbl.Namespace, tbl.Name))
		}
	}
	for i := range 5 {
		add(b.register(t, "cat", "db.sales", fmt.Sprintf("s%d", i)), sales, expire)
	}
	add(b.register(t, "cat", "db.sales", "t2"), pinned, expire)
	add(b.register(t, "cat", "db.sales.eu", "e1"), wide, expire)
	add(b.register(t, "cat", "db", "d1"), wide, expire)
	add(b.register(t, "cat", "other", "o1"), wide)
	b.register(t, "elsewhere", "db.sales", "x1") // no policy covers it
	// A dropped and recreated table: only the newest incarnation counts.
	b.register(t, "cat", "other", "again")
	add(b.register(t, "cat", "other", "again"), wide)
	for i := range 3 {
		add(b.register(t, "cat", "zz", fmt.Sprintf("z%d", i)), wide)
	}

	for _, p := range []store.Policy{wide, sales, pinned, expire} {
		for _, n := range []int{1, 2, 100} {
			var got []string
			for _, tbl := range b.walk(t, p.ID, n) {
				got = append(got, fmt.Sprintf("%d:%s.%s", tbl.ID, tbl.Namespace, tbl.Name))
			}
			w := append([]string(nil), want[p.ID]...)
			sort.Slice(w, func(i, j int) bool { return idOf(w[i]) < idOf(w[j]) })
			require.Equal(t, w, got, "policy %s, batches of %d", p.Name, n)
		}
	}

	// The cursor resumes strictly after the id given; a full batch's
	// cursor is its last id, and a walk that reached the end says so.
	all := b.walk(t, wide.ID, 100)
	rest, next, err := b.p.TablesForPolicy(b.ctx, wide.ID, all[2].ID, 100)
	require.NoError(t, err)
	require.Equal(t, all[3:], rest)
	require.Zero(t, next)
	first, next, err := b.p.TablesForPolicy(b.ctx, wide.ID, 0, 2)
	require.NoError(t, err)
	require.Equal(t, all[:2], first)
	require.Equal(t, all[1].ID, next)

	none, next, err := b.p.TablesForPolicy(b.ctx, 987654, 0, 10)
	require.NoError(t, err)
	require.Empty(t, none)
	require.Zero(t, next)
}

func exerciseTablesForPolicySparse(t *testing.T, b *policyBundle) {
	// A policy covering 3 tables among hundreds: each call examines a
	// bounded window of rows, so the walk goes on through empty batches
	// instead of one call scanning every table.
	narrow := b.create(t, "narrow", typeCompaction, `{}`)
	b.attach(t, "narrow", namespaceObj("cat", "narrow"))
	var want []int64
	w := store.TablesScanWindow(1)
	for i := range 6 * w {
		if i%(2*w) == w/2 {
			want = append(want, b.register(t, "cat", "narrow", fmt.Sprintf("n%d", i)).ID)
			continue
		}
		b.register(t, "cat", "bulk", fmt.Sprintf("b%d", i))
	}
	got, calls, emptyButMore := b.walkCounting(t, narrow.ID, 1)
	var ids []int64
	for _, tbl := range got {
		ids = append(ids, tbl.ID)
	}
	require.Equal(t, want, ids)
	require.Positive(t, emptyButMore, "some windows held none of its tables")
	require.LessOrEqual(t, calls, 6+3+1, "about one call per window or per table found")
}

func idOf(s string) int64 {
	var id int64
	_, _ = fmt.Sscanf(s, "%d:", &id)
	return id
}

func exerciseConcurrentCreate(t *testing.T, b *policyBundle) {
	const n = 8
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			_, errs[i] = b.p.CreatePolicy(b.ctx, store.NewPolicy{Name: "same", Type: typeCompaction, Enabled: true,
				Content: json.RawMessage(fmt.Sprintf(`{"who": %d}`, i))})
		})
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		if err == nil {
			won++
			continue
		}
		require.ErrorIs(t, err, store.ErrConflict)
	}
	require.Equal(t, 1, won)
	list, err := b.p.ListPolicies(b.ctx)
	require.NoError(t, err)
	require.Len(t, list, 1)
}

func exerciseConcurrentAttach(t *testing.T, b *policyBundle) {
	const n = 6
	for i := range n {
		b.create(t, fmt.Sprintf("p%d", i), typeCompaction, `{}`)
	}
	obj := tableObj("cat", "db", "t")
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { _, _, errs[i] = b.p.Attach(b.ctx, fmt.Sprintf("p%d", i), obj) })
	}
	wg.Wait()
	winner := ""
	for i, err := range errs {
		if err == nil {
			require.Empty(t, winner, "only one policy of a type per object")
			winner = fmt.Sprintf("p%d", i)
			continue
		}
		require.ErrorIs(t, err, store.ErrConflict)
	}
	require.NotEmpty(t, winner)
	require.Equal(t, map[string]string{typeCompaction: winner}, b.effective(t, "cat", "db", "t"))
}

func exerciseConcurrentAlter(t *testing.T, b *policyBundle) {
	p := b.create(t, "p", typeCompaction, `{"n": 0}`)
	const n = 10
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			_, errs[i] = b.p.AlterPolicy(b.ctx, "p", store.PolicyChange{Content: json.RawMessage(fmt.Sprintf(`{"n": %d}`, i+1))})
		})
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	got, err := b.p.GetPolicy(b.ctx, "p")
	require.NoError(t, err)
	require.Equal(t, n+1, got.Version, "every alter made its own version")
	seen := map[string]bool{}
	for v := 1; v <= n+1; v++ {
		pv, err := b.p.GetPolicyVersion(b.ctx, p.ID, v)
		require.NoError(t, err)
		seen[string(pv.Content)] = true
	}
	require.Len(t, seen, n+1, "no version overwrote another")
}

func exerciseConcurrentDeleteAttach(t *testing.T, b *policyBundle) {
	// Whatever order a delete and attaches land in, a deleted policy keeps
	// no attachment.
	for round := range 5 {
		name := fmt.Sprintf("p%d", round)
		b.create(t, name, typeCompaction, `{}`)
		var (
			wg        sync.WaitGroup
			attachErr [4]error
			deleteErr error
		)
		for i := range 4 {
			wg.Go(func() {
				_, _, attachErr[i] = b.p.Attach(b.ctx, name, namespaceObj("cat", fmt.Sprintf("ns%d_%d", round, i)))
			})
		}
		wg.Go(func() { _, deleteErr = b.p.DeletePolicy(b.ctx, name) })
		wg.Wait()
		require.NoError(t, deleteErr)
		for _, err := range attachErr {
			if err != nil {
				require.ErrorIs(t, err, store.ErrNotFound, "an attach after the delete finds no policy")
			}
		}
		for i := range 4 {
			require.Empty(t, b.effective(t, "cat", fmt.Sprintf("ns%d_%d", round, i), "t"))
		}
		// The store's own listing hides a deleted policy's rows, so look
		// for leftovers through a new policy on the same objects: a stale
		// attachment of p would collide with it.
		q := fmt.Sprintf("q%d", round)
		b.create(t, q, typeCompaction, `{}`)
		for i := range 4 {
			b.attach(t, q, namespaceObj("cat", fmt.Sprintf("ns%d_%d", round, i)))
		}
	}
}
