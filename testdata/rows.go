package testdata

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
)

// Field ids of the recipe schema.
const (
	fieldID       = 1
	fieldCategory = 2
	fieldAmount   = 3
	fieldTS       = 4
	fieldNote     = 5
)

// epoch is the first day of the ts column, 2024-01-01 UTC: row id i falls on day
// epoch + (i mod Recipe.Days), at a random time of that day.
var epoch = time.Date(2024, time.January, 1, 0, 0, 0, 0, time.UTC)

// categories are the values of the category column.
var categories = []string{"books", "games", "garden", "music", "outdoor", "pets", "tools", "toys"}

// Schema returns the Iceberg schema every recipe uses:
// id long required (the identifier field, unique across the table),
// category string, amount double, ts timestamptz, note string (10 % null).
func Schema() *iceberg.Schema {
	return iceberg.NewSchemaWithIdentifiers(0, []int{fieldID},
		iceberg.NestedField{ID: fieldID, Name: "id", Type: iceberg.PrimitiveTypes.Int64, Required: true},
		iceberg.NestedField{ID: fieldCategory, Name: "category", Type: iceberg.PrimitiveTypes.String},
		iceberg.NestedField{ID: fieldAmount, Name: "amount", Type: iceberg.PrimitiveTypes.Float64},
		iceberg.NestedField{ID: fieldTS, Name: "ts", Type: iceberg.PrimitiveTypes.TimestampTz},
		iceberg.NestedField{ID: fieldNote, Name: "note", Type: iceberg.PrimitiveTypes.String},
	)
}

// Row is one generated row, as a full scan returns it.
type Row struct {
	ID       int64
	Category string
	Amount   float64
	TS       time.Time // UTC, microsecond precision
	Note     *string
}

// String renders the row for diffs in test failures.
func (r Row) String() string {
	note := "<null>"
	if r.Note != nil {
		note = *r.Note
	}
	return fmt.Sprintf("%d|%s|%.2f|%s|%s", r.ID, r.Category, r.Amount, r.TS.Format(time.RFC3339Nano), note)
}

// seed derives the recipe's fixed PCG seed from its name, so that adding or
// reordering recipes never changes another recipe's content.
func seed(name string, stream uint64) *rand.Rand {
	h := fnv.New64a()
	_, _ = h.Write([]byte(name))
	return rand.New(rand.NewPCG(h.Sum64(), 0x7e57da7a^stream))
}

// generator yields a recipe's rows in id order.
type generator struct {
	rng  *rand.Rand
	days int
	next int64
}

func newGenerator(r Recipe) *generator {
	return &generator{rng: seed(r.Name, 1), days: r.Days}
}

// rows returns the next n rows.
func (g *generator) rows(n int) []Row {
	out := make([]Row, n)
	for i := range out {
		id := g.next
		g.next++
		day := int(id % int64(g.days))
		ts := epoch.AddDate(0, 0, day).Add(time.Duration(g.rng.Int64N(int64(24*time.Hour/time.Microsecond))) * time.Microsecond)
		row := Row{
			ID:       id,
			Category: categories[g.rng.IntN(len(categories))],
			Amount:   float64(g.rng.IntN(100_000)) / 100,
			TS:       ts,
		}
		if g.rng.IntN(10) != 0 {
			note := fmt.Sprintf("note-%08x", g.rng.Uint32())
			row.Note = &note
		}
		out[i] = row
	}
	return out
}

// arrowSchema is the Arrow form of Schema with field ids, as iceberg-go
// writes it.
func arrowSchema() (*arrow.Schema, error) {
	return table.SchemaToArrowSchema(Schema(), nil, true, false)
}

// record turns rows into one Arrow record batch of schema sc.
func record(mem memory.Allocator, sc *arrow.Schema, rows []Row) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, sc)
	defer b.Release()
	ids := b.Field(0).(*array.Int64Builder)
	cats := b.Field(1).(*array.StringBuilder)
	amounts := b.Field(2).(*array.Float64Builder)
	tss := b.Field(3).(*array.TimestampBuilder)
	notes := b.Field(4).(*array.StringBuilder)
	for _, r := range rows {
		ids.Append(r.ID)
		cats.Append(r.Category)
		amounts.Append(r.Amount)
		tss.Append(arrow.Timestamp(r.TS.UnixMicro()))
		if r.Note == nil {
			notes.AppendNull()
		} else {
			notes.Append(*r.Note)
		}
	}
	return b.NewRecordBatch()
}

// RecordBatch turns rows into one Arrow record batch in the Arrow form of
// Schema (with field ids), as a test writes them into a table of its own.
// The caller releases it.
func RecordBatch(rows []Row) (arrow.RecordBatch, error) {
	sc, err := arrowSchema()
	if err != nil {
		return nil, err
	}
	return record(memory.DefaultAllocator, sc, rows), nil
}

// deletePlan holds the ids each delete commit removes, in commit order.
type deletePlan struct {
	position [][]int64
	equality [][]int64
}

// removed returns every deleted id.
func (p deletePlan) removed() map[int64]struct{} {
	out := map[int64]struct{}{}
	for _, ids := range slices.Concat(p.position, p.equality) {
		for _, id := range ids {
			out[id] = struct{}{}
		}
	}
	return out
}

// planDeletes picks, from its own seeded stream, distinct ids among the
// total rows the appends wrote for each delete commit of r at scale.
func planDeletes(r Recipe, scale int) deletePlan {
	total := int64(r.Appends*scale) * int64(r.RowsPerAppend)
	rng := seed(r.Name, 2)
	used := map[int64]struct{}{}
	pick := func(commits int) [][]int64 {
		var out [][]int64
		for range commits * scale {
			n := min(int64(r.RowsPerDelete), total-int64(len(used)))
			ids := make([]int64, 0, n)
			for int64(len(ids)) < n {
				id := rng.Int64N(total)
				if _, dup := used[id]; dup {
					continue
				}
				used[id] = struct{}{}
				ids = append(ids, id)
			}
			slices.Sort(ids)
			out = append(out, ids)
		}
		return out
	}
	p := deletePlan{}
	p.position = pick(r.PositionDeletes)
	p.equality = pick(r.EqualityDeletes)
	return p
}

// ExpectedRows returns the live rows of recipe name built at scale, sorted by
// id: every generated row minus the deleted ones. A full scan of the built
// table returns exactly these rows.
func ExpectedRows(name string, scale int) ([]Row, error) {
	r, err := Lookup(name)
	if err != nil {
		return nil, err
	}
	if scale < 1 {
		return nil, fmt.Errorf("scale %d: must be at least 1", scale)
	}
	rows := newGenerator(r).rows(r.Appends * scale * r.RowsPerAppend)
	removed := planDeletes(r, scale).removed()
	return slices.DeleteFunc(rows, func(row Row) bool {
		_, gone := removed[row.ID]
		return gone
	}), nil
}
