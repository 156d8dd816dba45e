package policy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/apache/iceberg-go/table"

	"github.com/tms-dev/tms/internal/location"
)

// This file parses each type's options, the part of a content the runner
// acts on, from the field descriptions in fields.go. Unknown keys are
// errors, so a typo does not silently fall back to a default; the common
// fields (schedule, minIntervalMs, jobOptions) and Gravitino's own keys are
// skipped here and checked by ParseContent. Errors are *Error with the field
// relative to the content.

// CompactionOptions is the parsed content of a compaction policy. A zero
// integer marked "0:" below means the table's property or iceberg-go's
// default applies.
type CompactionOptions struct {
	MinDataFileMse         float64
	MinDeleteFileNumber    int64
	DataFileMseWeight      int64
	DeleteFileNumberWeight int64
	MaxPartitionNum        int64
	TargetFileSize         int64 // 0: the table's write.target-file-size-bytes
	MinInputFiles          int64 // 0: iceberg-go's default (5)
	PartialProgress        bool
	MaxCommits             int64
	MaxConcurrent          int64
	DeleteFileThreshold    int64 // 0: iceberg-go's default (5)
	DeleteRatioThreshold   float64
	RemoveDanglingDeletes  bool
	// Where is the filter as written (checked by ParseWhere); "" for all.
	Where string
}

// DeleteRewriteOptions is the parsed content of a delete-rewrite policy.
type DeleteRewriteOptions struct {
	MinPositionDeleteFileNumber int64
}

// DefaultMinPositionDeleteFileNumber is delete-rewrite's
// minPositionDeleteFileNumber: Spark's min-input-files of
// rewrite_position_delete_files.
const DefaultMinPositionDeleteFileNumber = 5

// ParseDeleteRewrite parses a delete-rewrite content.
func ParseDeleteRewrite(content json.RawMessage) (DeleteRewriteOptions, error) {
	r := read(content)
	p := DeleteRewriteOptions{MinPositionDeleteFileNumber: r.int(fMinPositionDeleteFileNumber)}
	return p, r.done()
}

// ManifestOptions is the parsed content of a manifest-rewrite policy.
type ManifestOptions struct {
	MinManifestNumber       int64
	MaxAvgManifestSizeBytes int64
	MaxManifestNumber       int64
	TargetManifestSize      int64 // 0: the table's commit.manifest.target-size-bytes
}

// ExpiryOptions is the parsed content of a snapshot-expiry policy. Zero
// retention values mean "use the table's history.expire.* property".
type ExpiryOptions struct {
	OlderThan time.Duration
	// HasOlderThan says the policy set an age (OlderThan may be 0).
	HasOlderThan      bool
	RetainLast        int64
	CleanExpiredFiles bool
	// EqualSchemes, EqualAuthorities and PrefixMismatch are read as
	// orphan cleanup reads them (see OrphanOptions): an expiry deletes
	// a file only the expired snapshots reference, and must know when a
	// retained snapshot names the same object under another spelling.
	EqualSchemes     map[string]string
	EqualAuthorities map[string]string
	PrefixMismatch   table.PrefixMismatchMode
}

// OrphanOptions is the parsed content of an orphan-cleanup policy.
type OrphanOptions struct {
	OlderThan time.Duration
	// EqualSchemes and EqualAuthorities are flattened (one name → its
	// canonical name); EqualSchemes includes Spark's s3a,s3n → s3 unless
	// the policy maps those names elsewhere, and is lower case.
	EqualSchemes     map[string]string
	EqualAuthorities map[string]string
	PrefixMismatch   table.PrefixMismatchMode
	// Scope is OrphanScopeTablePaths or OrphanScopeLocation: what the
	// cleanup lists.
	Scope string
}

// The orphan-cleanup scopes. table-paths is the default because a table's
// location may hold other tables and non-Iceberg data (a table created with
// LOCATION inside another, a table at the warehouse root), which listing the
// whole location would delete as orphans.
const (
	OrphanScopeTablePaths = "table-paths"
	OrphanScopeLocation   = "location"
)

// DefaultEqualSchemes is Spark's remove_orphan_files default: s3a and s3n
// name the same objects as s3 (package internal/location's default, which
// compares the locations).
func DefaultEqualSchemes() map[string]string { return location.DefaultEqualSchemes() }

// ValidateOptions checks the options of a content for maintenance type t
// without touching any table (the runner's check; ParseContent does this
// and more). Errors name the field relative to the content, e.g.
// "rewriteOptions.target-file-size-bytes: must be positive, got -1".
func ValidateOptions(t Type, content json.RawMessage) error {
	var err error
	switch t {
	case Compaction:
		_, err = ParseCompaction(content)
	case DeleteRewrite:
		_, err = ParseDeleteRewrite(content)
	case ManifestRewrite:
		_, err = ParseManifests(content)
	case SnapshotExpiry:
		_, err = ParseExpiry(content)
	case OrphanCleanup:
		_, err = ParseOrphans(content)
	default:
		err = fmt.Errorf("%w: unknown maintenance type %q (want one of %s)", ErrInvalid, t, TypeList())
	}
	return err
}

// ParseCompaction parses a compaction content; nil or null means the
// defaults.
func ParseCompaction(content json.RawMessage) (CompactionOptions, error) {
	r := read(content)
	p := CompactionOptions{
		MinDataFileMse:         r.float(fMinDataFileMse),
		MinDeleteFileNumber:    r.int(fMinDeleteFileNumber),
		DataFileMseWeight:      r.int(fDataFileMseWeight),
		DeleteFileNumberWeight: r.int(fDeleteFileNumberWeight),
		MaxPartitionNum:        r.int(fMaxPartitionNum),
		TargetFileSize:         r.int(fTargetFileSize),
		MinInputFiles:          r.int(fMinInputFiles),
		PartialProgress:        r.bool(fPartialProgress),
		MaxCommits:             r.int(fMaxCommits),
		MaxConcurrent:          r.int(fMaxConcurrent),
		DeleteFileThreshold:    r.int(fDeleteFileThreshold),
		DeleteRatioThreshold:   r.float(fDeleteRatioThreshold),
		RemoveDanglingDeletes:  r.bool(fRemoveDangling),
		Where:                  r.where(fWhere),
	}
	return p, r.done()
}

// ParseManifests parses a manifest-rewrite content.
func ParseManifests(content json.RawMessage) (ManifestOptions, error) {
	r := read(content)
	p := ManifestOptions{
		MinManifestNumber:       r.int(fMinManifestNumber),
		MaxAvgManifestSizeBytes: r.int(fMaxAvgManifestSize),
		MaxManifestNumber:       r.int(fMaxManifestNumber),
		TargetManifestSize:      r.int(fTargetManifestSize),
	}
	return p, r.done()
}

// ParseExpiry parses a snapshot-expiry content.
func ParseExpiry(content json.RawMessage) (ExpiryOptions, error) {
	r := read(content)
	older := r.age(fExpireOlderThan, fExpireOlderThanMs)
	p := ExpiryOptions{
		OlderThan:         older.d,
		HasOlderThan:      older.set,
		RetainLast:        r.int(fRetainLast),
		CleanExpiredFiles: r.bool(fCleanExpiredFiles),
	}
	p.EqualSchemes, p.EqualAuthorities, p.PrefixMismatch = r.spellings(fExpiryPrefixMismatch)
	return p, r.done()
}

// ParseOrphans parses an orphan-cleanup content.
func ParseOrphans(content json.RawMessage) (OrphanOptions, error) {
	r := read(content)
	p := OrphanOptions{
		OlderThan: r.age(fOrphanOlderThan, fOrphanOlderThanMs).orDefault(DefaultOrphanOlderThan),
	}
	p.EqualSchemes, p.EqualAuthorities, p.PrefixMismatch = r.spellings(fPrefixMismatch)
	scope, _ := r.string(fOrphanScope)
	switch scope = strings.ToLower(strings.TrimSpace(scope)); scope {
	case "", OrphanScopeTablePaths:
		p.Scope = OrphanScopeTablePaths
	case OrphanScopeLocation:
		p.Scope = OrphanScopeLocation
	default:
		r.fail(r.found, "want %s or %s, got %q", OrphanScopeTablePaths, OrphanScopeLocation, scope)
	}
	return p, r.done()
}

// spellings reads the equal-schemes, equal-authorities and (under mode's
// spellings) prefix-mismatch-mode fields, which orphan cleanup and snapshot
// expiry share: the scheme equivalences on top of Spark's default, the
// authority equivalences, and the mode (error when absent, as in Spark and
// iceberg-go).
func (r *reader) spellings(mode Field) (schemes, authorities map[string]string, m table.PrefixMismatchMode) {
	schemes = DefaultEqualSchemes()
	maps.Copy(schemes, r.equivalences(fEqualSchemes, true))
	authorities = r.equivalences(fEqualAuthorities, false)
	s, _ := r.string(mode)
	switch s = strings.ToLower(s); s {
	case "", "error":
		m = table.PrefixMismatchError
	case "ignore":
		m = table.PrefixMismatchIgnore
	case "delete":
		m = table.PrefixMismatchDelete
	default:
		r.fail(r.found, "want error, ignore or delete, got %q", s)
	}
	return schemes, authorities, m
}

// reader reads fields out of a content, each key at most once so the
// leftovers can be reported, and keeps the first error.
type reader struct {
	top, rw map[string]json.RawMessage
	err     error
	// found is the spelling of the field last taken.
	found string
}

func read(raw json.RawMessage) *reader {
	r := &reader{top: map[string]json.RawMessage{}, rw: map[string]json.RawMessage{}}
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return r
	}
	if err := json.Unmarshal(raw, &r.top); err != nil {
		r.fail("content", "not a JSON object: %v", err)
		return r
	}
	if rw, ok := r.top["rewriteOptions"]; ok {
		delete(r.top, "rewriteOptions")
		if string(bytes.TrimSpace(rw)) != "null" {
			if err := json.Unmarshal(rw, &r.rw); err != nil {
				r.fail("rewriteOptions", "not a JSON object: %v", err)
				return r
			}
		}
	}
	for _, f := range slices.Concat(commonFields, gravitinoIgnored) {
		root, _, _ := strings.Cut(f.Name, ".")
		if f.Kind == KindAny {
			root = f.Name
		}
		delete(r.top, root)
	}
	return r
}

// fail records the first error.
func (r *reader) fail(field, format string, args ...any) {
	if r.err == nil {
		r.err = errf(field, format, args...)
	}
}

// take removes and returns the first present spelling of f: names under
// "rewriteOptions." are looked for in rewriteOptions, the others at the top
// level.
func (r *reader) take(f Field) (json.RawMessage, bool) {
	if r.err != nil {
		return nil, false
	}
	for _, n := range f.names() {
		if k, isRW := strings.CutPrefix(n, "rewriteOptions."); isRW {
			if v, found := r.rw[k]; found {
				delete(r.rw, k)
				r.found = n
				return v, true
			}
			continue
		}
		if v, found := r.top[n]; found {
			delete(r.top, n)
			r.found = n
			return v, true
		}
	}
	return nil, false
}

// text returns f's value as text: given, else its default; ok is false when
// neither (or after an error).
func (r *reader) text(f Field) (s string, given, ok bool) {
	raw, given := r.take(f)
	if !given {
		return f.Default, false, f.Default != ""
	}
	s, err := scalar(raw)
	if err != nil {
		r.fail(r.found, "want a string, number or boolean, got %s", raw)
		return "", true, false
	}
	return s, true, true
}

// scalar returns the textual value of a JSON scalar, strings trimmed.
func scalar(raw json.RawMessage) (string, error) {
	s, ok := scalarText(raw)
	if !ok {
		return "", fmt.Errorf("not a scalar")
	}
	var str string
	if json.Unmarshal(raw, &str) == nil {
		return strings.TrimSpace(str), nil
	}
	return s, nil
}

func (r *reader) int(f Field) int64 {
	s, given, ok := r.text(f)
	if !ok {
		return 0
	}
	if !given {
		return r.integer(s, AnyValue)
	}
	return r.integer(s, f.Range)
}

// integer parses s, given for the field last taken, and checks it against
// rng.
func (r *reader) integer(s string, rng Range) int64 {
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		fl, ferr := strconv.ParseFloat(s, 64)
		if ferr != nil || fl != math.Trunc(fl) || math.Abs(fl) > 1<<62 {
			r.fail(r.found, "want an integer, got %q", s)
			return 0
		}
		v = int64(fl)
	}
	if msg := rng.check(v); msg != "" {
		r.fail(r.found, "%s, got %d", msg, v)
		return 0
	}
	return v
}

func (r *reader) float(f Field) float64 {
	s, _, ok := r.text(f)
	if !ok {
		return 0
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		r.fail(r.found, "want a number, got %q", s)
		return 0
	}
	if v < 0 {
		r.fail(r.found, "must be >= 0, got %g", v)
		return 0
	}
	if f.Range == Fraction && v > 1 {
		r.fail(r.found, "must be between 0 and 1, got %g", v)
		return 0
	}
	return v
}

func (r *reader) bool(f Field) bool {
	s, _, ok := r.text(f)
	if !ok {
		return false
	}
	v, err := strconv.ParseBool(s)
	if err != nil {
		r.fail(r.found, "want true or false, got %q", s)
	}
	return v
}

// string returns f's value as given, or "" and false (defaults are the
// caller's).
func (r *reader) string(f Field) (string, bool) {
	raw, given := r.take(f)
	if !given {
		return "", false
	}
	s, err := scalar(raw)
	if err != nil {
		r.fail(r.found, "want a string, number or boolean, got %s", raw)
	}
	return s, true
}

// where returns the compaction filter, checked.
func (r *reader) where(f Field) string {
	s, given := r.string(f)
	if given && r.err == nil {
		if _, err := ParseWhere(s); err != nil {
			r.fail(r.found, "%v", err)
		}
	}
	return s
}

// age is an age read from a policy: set says the policy gave one.
type age struct {
	d   time.Duration
	set bool
}

func (a age) orDefault(d time.Duration) time.Duration {
	if a.set {
		return a.d
	}
	return d
}

// age reads an age given either as a duration ("120h", "5d", "90m") under
// dur's spellings or as integer milliseconds under ms's; a policy that gives
// both has the milliseconds reported as an unknown option. dur.Min, when
// set, is the shortest age accepted.
func (r *reader) age(dur, ms Field) age {
	var a age
	if raw, given := r.take(dur); given {
		s, err := scalar(raw)
		if err != nil {
			r.fail(r.found, "want a string, number or boolean, got %s", raw)
			return age{}
		}
		d, err := parseDuration(s)
		switch {
		case err != nil:
			r.fail(r.found, "%v", err)
		case d < 0:
			r.fail(r.found, "must not be negative, got %s", s)
		}
		a = age{d, true}
	} else if raw, given := r.take(ms); given {
		s, err := scalar(raw)
		if err != nil {
			r.fail(r.found, "want a string, number or boolean, got %s", raw)
			return age{}
		}
		a = age{time.Duration(r.integer(s, NonNegative)) * time.Millisecond, true}
	}
	if r.err == nil && a.set && a.d < dur.Min {
		r.fail(r.found, "must be at least %s (files younger than that may belong to a commit in flight), got %s", dur.Min, a.d)
	}
	return a
}

// parseDuration accepts Go durations plus a whole-day suffix "d".
func parseDuration(s string) (time.Duration, error) {
	if n, ok := strings.CutSuffix(s, "d"); ok {
		days, err := strconv.ParseFloat(n, 64)
		if err != nil {
			return 0, fmt.Errorf("want a duration such as 72h or 3d, got %q", s)
		}
		return time.Duration(days * float64(24*time.Hour)), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("want a duration such as 72h or 3d, got %q", s)
	}
	return d, nil
}

// equivalences reads a Spark-style equivalence map, a JSON object (or a
// string holding one, as Gravitino stores rewriteOptions) from
// comma-separated names to the canonical name, e.g. {"s3a,s3n": "s3"}, and
// returns it flattened. schemes selects scheme syntax (folded to lower
// case) over authority syntax. Absent is an empty map.
func (r *reader) equivalences(f Field, schemes bool) map[string]string {
	raw, given := r.take(f)
	if !given {
		return map[string]string{}
	}
	what, example := "authorities", `{"host-a:8020,host-b:8020": "nameservice1"}`
	if schemes {
		what, example = "schemes", `{"s3a,s3n": "s3"}`
	}
	bad := func(format string, args ...any) map[string]string {
		r.fail(r.found, "want a JSON object mapping comma-separated %s to one, e.g. %s: %s", what, example, fmt.Sprintf(format, args...))
		return nil
	}
	obj := raw
	var s string
	if json.Unmarshal(raw, &s) == nil {
		obj = json.RawMessage(s)
	}
	var groups map[string]string
	if err := json.Unmarshal(obj, &groups); err != nil || groups == nil {
		return bad("got %s", raw)
	}
	flat, err := flattenEquivalences(groups, schemes)
	if err != nil {
		return bad("%v", err)
	}
	for from, to := range flat {
		for _, n := range []string{from, to} {
			if schemes && !location.IsScheme(n) {
				return bad("%q is not a URI scheme", n)
			}
			if !schemes && strings.ContainsAny(n, "/?# ") {
				return bad("%q is not a URI authority", n)
			}
		}
	}
	return flat
}

// flattenEquivalences expands {"a,b": "c"} to {"a": "c", "b": "c"}; lower
// folds names and targets (schemes). A name mapped to two different targets
// is an error.
func flattenEquivalences(groups map[string]string, lower bool) (map[string]string, error) {
	out := map[string]string{}
	keys := slices.Sorted(maps.Keys(groups))
	for _, k := range keys {
		to := strings.TrimSpace(groups[k])
		if lower {
			to = strings.ToLower(to)
		}
		if to == "" {
			return nil, fmt.Errorf("%q maps to an empty name", k)
		}
		for _, n := range strings.Split(k, ",") {
			n = strings.TrimSpace(n)
			if lower {
				n = strings.ToLower(n)
			}
			if n == "" {
				return nil, fmt.Errorf("%q holds an empty name", k)
			}
			if prev, dup := out[n]; dup && prev != to {
				return nil, fmt.Errorf("%q maps to both %q and %q", n, prev, to)
			}
			out[n] = to
		}
	}
	return out, nil
}

// done returns the first error, else the first key nothing took (sorted),
// so typos are reported.
func (r *reader) done() error {
	if r.err != nil {
		return r.err
	}
	keys := slices.Collect(maps.Keys(r.top))
	for k := range r.rw {
		keys = append(keys, "rewriteOptions."+k)
	}
	if len(keys) == 0 {
		return nil
	}
	slices.Sort(keys)
	return errf(keys[0], "unknown option")
}
