package chain

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/tms-dev/tms/internal/faithful"
	"github.com/tms-dev/tms/internal/partval"
)

// The pre-commit verifier compares the files a rewrite wrote with the files
// they replace from metadata alone: record counts, partition tuples and the
// column statistics of the new files. It does not read a row, so it does not
// share a blind spot with the reader that produced the new files (a reader
// that turned identity-partition values into NULL wrote files whose tuples
// and bounds say so).

// Verification is what the verifier checked before a rewrite committed; the
// compaction detail keeps one per commit.
type Verification struct {
	ReplacedFiles   int   `json:"replaced_files"`
	NewFiles        int   `json:"new_files"`
	ReplacedRecords int64 `json:"replaced_records"`
	NewRecords      int64 `json:"new_records"`
	// Partitions has one entry per partition tuple of the replaced files.
	Partitions []PartitionCheck `json:"partitions"`
	// IdentityBounds counts the (new file, identity column) pairs whose
	// null count and bounds were checked against the partition value.
	IdentityBounds int `json:"identity_bounds"`
	// Deletes is the check of the delete files the commit removes: each
	// names, or for an equality delete covers, only data files the commit
	// removes too.
	Deletes DeleteRemovalCheck `json:"deletes"`
	// ElapsedUs is how long the checks took, in microseconds.
	ElapsedUs int64 `json:"elapsed_us"`
}

// PartitionCheck is the record-count check of one partition tuple.
type PartitionCheck struct {
	// Partition is the tuple, as field=value pairs of the spec the new files
	// are written in (only the fields every replaced file's spec shares).
	Partition       string `json:"partition"`
	ReplacedRecords int64  `json:"replaced_records"`
	NewRecords      int64  `json:"new_records"`
	// Count is "exact" (new = replaced − rows the deletion vectors remove,
	// or = replaced without deletes) or "bounded" (position deletes: new
	// within [replaced − their record count, replaced]; equality deletes:
	// new ≤ replaced), because a delete file's metadata does not say how
	// many of the replaced rows it removes.
	Count string `json:"count"`
	// DeletedAtMost is the most rows the applied delete files can remove:
	// the record count of the position-delete files and deletion vectors;
	// -1 when equality deletes apply (no bound from metadata).
	DeletedAtMost int64 `json:"deleted_at_most"`
}

// errVerify is wrapped by every verifier mismatch.
var errVerify = errors.New("pre-commit verifier")

// verifyRewrite checks added against the files of tasks that they replace.
func verifyRewrite(meta table.Metadata, tasks []table.FileScanTask, added []iceberg.DataFile) (v Verification, err error) {
	start := time.Now()
	defer func() { v.ElapsedUs = time.Since(start).Microseconds() }()
	v = Verification{ReplacedFiles: len(tasks), NewFiles: len(added)}
	specs := map[int32]bool{}
	for _, df := range added {
		specs[df.SpecID()] = true
	}
	if len(specs) > 1 {
		return v, fmt.Errorf("%w: new files are written in %d partition specs, want one", errVerify, len(specs))
	}
	outSpecID := meta.DefaultPartitionSpec()
	for id := range specs {
		outSpecID = int(id)
	}
	out := meta.PartitionSpecByID(outSpecID)
	if out == nil {
		return v, fmt.Errorf("%w: new files' partition spec %d is not in the table metadata", errVerify, outSpecID)
	}
	// The key fields: fields of the output spec that every replaced file's
	// spec has too (same source and transform), so that a replaced file's
	// tuple can be spelled in the output spec.
	var inSpecs []int32
	for _, t := range tasks {
		if id := t.File.SpecID(); !slices.Contains(inSpecs, id) {
			if meta.PartitionSpecByID(int(id)) == nil {
				return v, fmt.Errorf("%w: replaced file %s has partition spec %d, not in the table metadata", errVerify, t.File.FilePath(), id)
			}
			inSpecs = append(inSpecs, id)
		}
	}
	var keyFields []iceberg.PartitionField
	for _, nf := range out.Fields() {
		if !slices.ContainsFunc(inSpecs, func(id int32) bool { return matchField(meta.PartitionSpecByID(int(id)), nf) < 0 }) {
			keyFields = append(keyFields, nf)
		}
	}
	shared := map[int32][]int{} // replaced spec id -> its field id per key field
	for _, id := range inSpecs {
		spec := meta.PartitionSpecByID(int(id))
		ids := make([]int, len(keyFields))
		for i, nf := range keyFields {
			ids[i] = matchField(spec, nf)
		}
		shared[id] = ids
	}

	type part struct {
		name            string
		replaced, added int64
		deletedAtMost   int64
		equality, pos   bool
		seen            map[string]bool
	}
	parts := map[string]*part{}
	var order []string
	for _, t := range tasks {
		p := t.File.Partition()
		vals := make([]any, len(keyFields))
		for i, fid := range shared[t.File.SpecID()] {
			vals[i] = p[fid]
		}
		k := tupleKey(keyFields, vals)
		pt := parts[k]
		if pt == nil {
			pt = &part{name: k, seen: map[string]bool{}}
			parts[k] = pt
			order = append(order, k)
		}
		pt.replaced += t.File.Count()
		v.ReplacedRecords += t.File.Count()
		for _, d := range slices.Concat(t.DeleteFiles, t.DeletionVectorFiles) {
			// By deleteKey: the deletion vectors of many data files share
			// one Puffin file, and each removes its own rows.
			if k := deleteKey(d); !pt.seen[k] {
				pt.seen[k] = true
				pt.deletedAtMost += d.Count()
			}
		}
		pt.pos = pt.pos || len(t.DeleteFiles) > 0
		pt.equality = pt.equality || len(t.EqualityDeleteFiles) > 0
	}
	schema := meta.CurrentSchema()
	for _, df := range added {
		p := df.Partition()
		vals := make([]any, len(keyFields))
		for i, nf := range keyFields {
			vals[i] = p[nf.FieldID]
		}
		k := tupleKey(keyFields, vals)
		pt := parts[k]
		if pt == nil {
			return v, fmt.Errorf("%w: new file %s has partition %s, which none of the %d replaced files has (replaced: %s)",
				errVerify, df.FilePath(), displayKey(k), len(tasks), displayKeys(order))
		}
		pt.added += df.Count()
		v.NewRecords += df.Count()
		n, err := checkIdentityBounds(schema, out, df)
		if err != nil {
			return v, err
		}
		v.IdentityBounds += n
	}
	for _, k := range order {
		pt := parts[k]
		pc := PartitionCheck{Partition: displayKey(k), ReplacedRecords: pt.replaced, NewRecords: pt.added, DeletedAtMost: pt.deletedAtMost, Count: "exact"}
		lo, hi := pt.replaced-pt.deletedAtMost, pt.replaced
		switch {
		case pt.equality:
			pc.Count, pc.DeletedAtMost, lo = "bounded", -1, 0
		case pt.pos:
			pc.Count = "bounded"
		default:
			// No deletes, or deletion vectors only: their cardinality is
			// exactly the rows they remove.
			hi = lo
		}
		v.Partitions = append(v.Partitions, pc)
		if pt.added < lo || pt.added > hi {
			want := fmt.Sprintf("%d", lo)
			if lo != hi {
				want = fmt.Sprintf("between %d and %d", lo, hi)
			}
			return v, fmt.Errorf("%w: partition %s: the new files hold %d records, want %s (replaced files %d records, delete files remove at most %s)",
				errVerify, pc.Partition, pt.added, want, pt.replaced, deletedText(pc.DeletedAtMost))
		}
	}
	return v, nil
}

func deletedText(n int64) string {
	if n < 0 {
		return "an unknown number (equality deletes)"
	}
	return fmt.Sprint(n)
}

// matchField returns the field id of spec's field with nf's source and
// transform, or -1.
func matchField(spec *iceberg.PartitionSpec, nf iceberg.PartitionField) int {
	if spec == nil {
		return -1
	}
	for _, f := range spec.Fields() {
		if slices.Equal(f.SourceIDs, nf.SourceIDs) && f.Transform.String() == nf.Transform.String() {
			return f.FieldID
		}
	}
	return -1
}

// tupleKey spells a partition tuple, typed so that "1" and 1 differ; the
// part after the tab is for people.
func tupleKey(fields []iceberg.PartitionField, vals []any) string {
	var typed, shown []string
	for i, f := range fields {
		typed = append(typed, partval.Key(vals[i]))
		v := "null"
		if vals[i] != nil {
			v = fmt.Sprint(vals[i])
		}
		shown = append(shown, f.Name+"="+v)
	}
	if len(fields) == 0 {
		shown = []string{"(unpartitioned)"}
	}
	return strings.Join(typed, "\x00") + "\t" + strings.Join(shown, "/")
}

func displayKey(k string) string {
	_, shown, _ := strings.Cut(k, "\t")
	return shown
}

func displayKeys(keys []string) string {
	var out []string
	for i, k := range keys {
		if i == 5 {
			out = append(out, fmt.Sprintf("… %d more", len(keys)-5))
			break
		}
		out = append(out, displayKey(k))
	}
	return strings.Join(out, ", ")
}

// checkIdentityBounds checks, for every identity field of spec, that the new
// file df holds only its partition value in the source column: no nulls and
// lower = upper = the value (a truncated string or binary bound: lower a
// prefix of the value, upper at or above it), or only nulls when the value
// is null. It returns the number of columns checked.
func checkIdentityBounds(schema *iceberg.Schema, spec *iceberg.PartitionSpec, df iceberg.DataFile) (int, error) {
	n := 0
	part := df.Partition()
	for _, pf := range spec.Fields() {
		if _, ok := pf.Transform.(iceberg.IdentityTransform); !ok {
			continue
		}
		src := pf.SourceIDs[0]
		field, ok := schema.FindFieldByID(src)
		if !ok {
			continue // the source column was dropped; nothing to compare
		}
		col := fmt.Sprintf("%s (field id %d)", field.Name, src)
		val := part[pf.FieldID]
		nulls, haveNulls := df.NullValueCounts()[src]
		if val == nil {
			if haveNulls && nulls != df.Count() {
				return n, fmt.Errorf("%w: new file %s: partition %s is null but column %s has %d non-null values",
					errVerify, df.FilePath(), pf.Name, col, df.Count()-nulls)
			}
			n++
			continue
		}
		if !haveNulls {
			return n, fmt.Errorf("%w: new file %s has no null count for identity column %s, so it cannot be checked (table metrics mode?)", errVerify, df.FilePath(), col)
		}
		if nulls != 0 {
			return n, fmt.Errorf("%w: new file %s: column %s has %d nulls, but its partition value is %v",
				errVerify, df.FilePath(), col, nulls, val)
		}
		lit, err := faithful.Literal(field.Type, val)
		if err != nil {
			return n, fmt.Errorf("%w: new file %s: %v", errVerify, df.FilePath(), err)
		}
		want, err := lit.MarshalBinary()
		if err != nil {
			return n, fmt.Errorf("%w: new file %s: encode %s: %v", errVerify, df.FilePath(), col, err)
		}
		lower, okL := df.LowerBoundValues()[src]
		upper, okU := df.UpperBoundValues()[src]
		if !okL {
			return n, fmt.Errorf("%w: new file %s has no lower bound for identity column %s, so it cannot be checked (table metrics mode?)", errVerify, df.FilePath(), col)
		}
		if !boundsHold(field.Type, lower, upper, okU, want) {
			return n, fmt.Errorf("%w: new file %s: column %s has bounds [%s, %s], but its partition value is %v",
				errVerify, df.FilePath(), col, showBound(field.Type, lower), showBound(field.Type, upper), val)
		}
		n++
	}
	return n, nil
}

// boundsHold reports whether the bounds lower and upper (upper absent when
// !okU) admit only the encoded value want.
func boundsHold(t iceberg.Type, lower, upper []byte, okU bool, want []byte) bool {
	if bytes.Equal(lower, want) && okU && bytes.Equal(upper, want) {
		return true
	}
	switch t.(type) {
	case iceberg.StringType, iceberg.BinaryType:
		// Metrics mode truncate(N) keeps an N-character prefix as the lower
		// bound and the prefix with its last character incremented (absent
		// when that overflows) as the upper bound.
		return len(lower) < len(want) && bytes.HasPrefix(want, lower) && (!okU || bytes.Compare(upper, want) >= 0)
	}
	return false
}

func showBound(t iceberg.Type, b []byte) string {
	if b == nil {
		return "none"
	}
	lit, err := iceberg.LiteralFromBytes(t, b)
	if err != nil {
		return fmt.Sprintf("%x", b)
	}
	return lit.String()
}
