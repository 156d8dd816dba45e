package chain

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/apache/iceberg-go/table"
)

// ErrInvalidPolicy is wrapped by every policy validation error and by
// ParseTypes errors, so callers can tell bad input from a failed run.
var ErrInvalidPolicy = errors.New("invalid policy")

// Gravitino's compaction defaults (org.apache.gravitino.policy.
// IcebergCompactionContent), kept so a policy written for Gravitino triggers
// the same way here.
const (
	// DefaultMinDataFileMse is Gravitino's DEFAULT_MIN_DATA_FILE_MSE: about
	// (512 MiB − 492 MiB)², i.e. data files on average ~20 MiB short of the
	// 512 MiB target.
	DefaultMinDataFileMse = 405323966463344
	// DefaultMinDeleteFileNumber is Gravitino's DEFAULT_MIN_DELETE_FILE_NUMBER:
	// one live delete file triggers compaction.
	DefaultMinDeleteFileNumber = 1
	// DefaultMaxPartitionNum is Gravitino's DEFAULT_MAX_PARTITION_NUM.
	DefaultMaxPartitionNum = 50
	// DefaultMaxConcurrentGroups mirrors Iceberg's
	// max-concurrent-file-group-rewrites default.
	DefaultMaxConcurrentGroups = 5
	// DefaultMaxCommits mirrors Iceberg's partial-progress.max-commits.
	DefaultMaxCommits = 10
)

// Manifest rewrite defaults.
const (
	DefaultMinManifestNumber       = 100
	DefaultMaxAvgManifestSizeBytes = 8 << 20
	DefaultMaxManifestNumber       = 500
)

// Orphan cleanup ages: the default, and the floor below which a policy is
// rejected because a writer may still be about to commit such a file.
const (
	DefaultOrphanOlderThan = 72 * time.Hour
	MinOrphanOlderThan     = time.Hour
)

// compactionPolicy is the parsed content of a compaction policy.
type compactionPolicy struct {
	minDataFileMse         float64
	minDeleteFileNumber    int64
	dataFileMseWeight      int64
	deleteFileNumberWeight int64
	maxPartitionNum        int64
	targetFileSize         int64 // 0: the table's write.target-file-size-bytes
	minInputFiles          int64 // 0: iceberg-go's default (5)
	partialProgress        bool
	maxCommits             int64
	maxConcurrent          int64
	deleteFileThreshold    int64 // 0: iceberg-go's default (5)
	where                  string
}

// manifestPolicy is the parsed content of a manifest-rewrite policy.
type manifestPolicy struct {
	minManifestNumber       int64
	maxAvgManifestSizeBytes int64
	maxManifestNumber       int64
	targetManifestSize      int64 // 0: the table's commit.manifest.target-size-bytes
}

// expiryPolicy is the parsed content of a snapshot-expiry policy. Zero
// values mean "use the table's history.expire.* property".
type expiryPolicy struct {
	olderThan  time.Duration
	hasOlder   bool
	retainLast int64
	cleanFiles bool
}

// orphanPolicy is the parsed content of an orphan-cleanup policy.
type orphanPolicy struct {
	olderThan time.Duration
	// equalSchemes and equalAuthorities are flattened (one name → its
	// canonical name); equalSchemes includes Spark's s3a,s3n → s3 unless
	// the policy maps those names elsewhere.
	equalSchemes     map[string]string
	equalAuthorities map[string]string
	mismatch         table.PrefixMismatchMode
}

// content is a policy content object split into top-level fields and
// rewriteOptions, with each key consumed at most once so that unknown keys
// can be reported.
type content struct {
	top map[string]json.RawMessage
	rw  map[string]json.RawMessage
}

// topLevelIgnored are Gravitino content keys that concern the coordinator,
// not the runner; they are accepted and ignored.
var topLevelIgnored = []string{"schedule", "minIntervalMs", "jobOptions", "strategy.type", "job.template-name", "trigger-expr", "score-expr"}

func parseContent(raw json.RawMessage) (*content, error) {
	c := &content{top: map[string]json.RawMessage{}, rw: map[string]json.RawMessage{}}
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return c, nil
	}
	if err := json.Unmarshal(raw, &c.top); err != nil {
		return nil, fmt.Errorf("%w: content: not a JSON object: %v", ErrInvalidPolicy, err)
	}
	if r, ok := c.top["rewriteOptions"]; ok {
		delete(c.top, "rewriteOptions")
		if string(bytes.TrimSpace(r)) != "null" {
			if err := json.Unmarshal(r, &c.rw); err != nil {
				return nil, fmt.Errorf("%w: rewriteOptions: not a JSON object: %v", ErrInvalidPolicy, err)
			}
		}
	}
	for _, k := range topLevelIgnored {
		delete(c.top, k)
	}
	return c, nil
}

// take removes and returns the first present key among names, looking in
// the top level for names without a rewriteOptions prefix and in
// rewriteOptions for "rewriteOptions.x". field is the name used in errors.
func (c *content) take(names ...string) (raw json.RawMessage, field string, ok bool) {
	for _, n := range names {
		if k, isRW := strings.CutPrefix(n, "rewriteOptions."); isRW {
			if v, found := c.rw[k]; found {
				delete(c.rw, k)
				return v, n, true
			}
			continue
		}
		if v, found := c.top[n]; found {
			delete(c.top, n)
			return v, n, true
		}
	}
	return nil, "", false
}

// leftover reports the first unknown key, so typos are not silently ignored.
func (c *content) leftover() error {
	var keys []string
	for k := range c.top {
		keys = append(keys, k)
	}
	for k := range c.rw {
		keys = append(keys, "rewriteOptions."+k)
	}
	if len(keys) == 0 {
		return nil
	}
	slices.Sort(keys)
	return fieldErr(keys[0], "unknown option")
}

func fieldErr(field, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalidPolicy, field, fmt.Sprintf(format, args...))
}

// scalar returns the textual value of a JSON scalar: Gravitino stores
// rewriteOptions as strings, so "5" and 5 are both accepted.
func scalar(raw json.RawMessage, field string) (string, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return strings.TrimSpace(s), nil
	}
	var n json.Number
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&n); err == nil {
		return n.String(), nil
	}
	var b bool
	if err := json.Unmarshal(raw, &b); err == nil {
		return strconv.FormatBool(b), nil
	}
	return "", fieldErr(field, "want a string, number or boolean, got %s", raw)
}

func (c *content) int(def int64, check func(int64) string, names ...string) (int64, error) {
	raw, field, ok := c.take(names...)
	if !ok {
		return def, nil
	}
	s, err := scalar(raw, field)
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		f, ferr := strconv.ParseFloat(s, 64)
		if ferr != nil || f != math.Trunc(f) || math.Abs(f) > 1<<62 {
			return 0, fieldErr(field, "want an integer, got %q", s)
		}
		v = int64(f)
	}
	if check != nil {
		if msg := check(v); msg != "" {
			return 0, fieldErr(field, "%s, got %d", msg, v)
		}
	}
	return v, nil
}

func (c *content) float(def float64, names ...string) (float64, error) {
	raw, field, ok := c.take(names...)
	if !ok {
		return def, nil
	}
	s, err := scalar(raw, field)
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fieldErr(field, "want a number, got %q", s)
	}
	if v < 0 {
		return 0, fieldErr(field, "must be >= 0, got %g", v)
	}
	return v, nil
}

func (c *content) bool(def bool, names ...string) (bool, error) {
	raw, field, ok := c.take(names...)
	if !ok {
		return def, nil
	}
	s, err := scalar(raw, field)
	if err != nil {
		return false, err
	}
	v, err := strconv.ParseBool(s)
	if err != nil {
		return false, fieldErr(field, "want true or false, got %q", s)
	}
	return v, nil
}

func (c *content) string(names ...string) (string, string, error) {
	raw, field, ok := c.take(names...)
	if !ok {
		return "", "", nil
	}
	s, err := scalar(raw, field)
	return s, field, err
}

// duration reads an age given either as a duration string ("120h", "5d",
// "90m") under durNames or as integer milliseconds under msNames.
func (c *content) duration(durNames, msNames []string) (time.Duration, string, bool, error) {
	if s, field, err := c.string(durNames...); err != nil {
		return 0, field, false, err
	} else if field != "" {
		d, err := parseDuration(s)
		if err != nil {
			return 0, field, false, fieldErr(field, "%v", err)
		}
		if d < 0 {
			return 0, field, false, fieldErr(field, "must not be negative, got %s", s)
		}
		return d, field, true, nil
	}
	raw, field, ok := c.take(msNames...)
	if !ok {
		return 0, "", false, nil
	}
	ms, err := (&content{top: map[string]json.RawMessage{field: raw}}).int(0, nonNegative, field)
	if err != nil {
		return 0, field, false, err
	}
	return time.Duration(ms) * time.Millisecond, field, true, nil
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

func positive(v int64) string {
	if v <= 0 {
		return "must be positive"
	}
	return ""
}

func nonNegative(v int64) string {
	if v < 0 {
		return "must be >= 0"
	}
	return ""
}

func parseCompaction(raw json.RawMessage) (p compactionPolicy, err error) {
	c, err := parseContent(raw)
	if err != nil {
		return p, err
	}
	steps := []func() error{
		func() (err error) { p.minDataFileMse, err = c.float(DefaultMinDataFileMse, "minDataFileMse"); return },
		func() (err error) {
			p.minDeleteFileNumber, err = c.int(DefaultMinDeleteFileNumber, nonNegative, "minDeleteFileNumber")
			return
		},
		func() (err error) { p.dataFileMseWeight, err = c.int(1, nonNegative, "dataFileMseWeight"); return },
		func() (err error) {
			p.deleteFileNumberWeight, err = c.int(100, nonNegative, "deleteFileNumberWeight")
			return
		},
		func() (err error) {
			p.maxPartitionNum, err = c.int(DefaultMaxPartitionNum, positive, "maxPartitionNum", "max-partition-num")
			return
		},
		func() (err error) {
			p.targetFileSize, err = c.int(0, positive, "rewriteOptions.target-file-size-bytes")
			return
		},
		func() (err error) {
			p.minInputFiles, err = c.int(0, positive, "rewriteOptions.min-input-files")
			return
		},
		func() (err error) {
			p.partialProgress, err = c.bool(false, "rewriteOptions.partial-progress.enabled")
			return
		},
		func() (err error) {
			p.maxCommits, err = c.int(DefaultMaxCommits, positive, "rewriteOptions.partial-progress.max-commits")
			return
		},
		func() (err error) {
			p.maxConcurrent, err = c.int(DefaultMaxConcurrentGroups, positive, "rewriteOptions.max-concurrent-file-group-rewrites")
			return
		},
		func() (err error) {
			p.deleteFileThreshold, err = c.int(0, positive, "rewriteOptions.delete-file-threshold")
			return
		},
		func() (err error) {
			var field string
			p.where, field, err = c.string("rewriteOptions.where")
			if err == nil && field != "" {
				_, err = parseWhere(p.where)
				if err != nil {
					err = fieldErr(field, "%v", err)
				}
			}
			return
		},
	}
	for _, s := range steps {
		if err := s(); err != nil {
			return p, err
		}
	}
	return p, c.leftover()
}

func parseManifests(raw json.RawMessage) (p manifestPolicy, err error) {
	c, err := parseContent(raw)
	if err != nil {
		return p, err
	}
	if p.minManifestNumber, err = c.int(DefaultMinManifestNumber, positive, "minManifestNumber"); err != nil {
		return p, err
	}
	if p.maxAvgManifestSizeBytes, err = c.int(DefaultMaxAvgManifestSizeBytes, positive, "maxAvgManifestSizeBytes"); err != nil {
		return p, err
	}
	if p.maxManifestNumber, err = c.int(DefaultMaxManifestNumber, positive, "maxManifestNumber"); err != nil {
		return p, err
	}
	if p.targetManifestSize, err = c.int(0, positive, "rewriteOptions.target-manifest-size-bytes"); err != nil {
		return p, err
	}
	return p, c.leftover()
}

func parseExpiry(raw json.RawMessage) (p expiryPolicy, err error) {
	c, err := parseContent(raw)
	if err != nil {
		return p, err
	}
	p.olderThan, _, p.hasOlder, err = c.duration(
		[]string{"rewriteOptions.older-than", "older-than", "olderThan"},
		[]string{"rewriteOptions.older-than-ms", "olderThanMs", "older-than-ms"})
	if err != nil {
		return p, err
	}
	if p.retainLast, err = c.int(0, positive, "rewriteOptions.retain-last", "retain-last", "retainLast"); err != nil {
		return p, err
	}
	if p.cleanFiles, err = c.bool(true, "rewriteOptions.clean-expired-files", "cleanExpiredFiles"); err != nil {
		return p, err
	}
	return p, c.leftover()
}

func parseOrphans(raw json.RawMessage) (p orphanPolicy, err error) {
	c, err := parseContent(raw)
	if err != nil {
		return p, err
	}
	d, field, ok, err := c.duration(
		[]string{"rewriteOptions.older-than", "older-than", "olderThan"},
		[]string{"rewriteOptions.older-than-ms", "olderThanMs", "older-than-ms"})
	if err != nil {
		return p, err
	}
	p.olderThan = DefaultOrphanOlderThan
	if ok {
		if d < MinOrphanOlderThan {
			return p, fieldErr(field, "must be at least %s (files younger than that may belong to a commit in flight), got %s", MinOrphanOlderThan, d)
		}
		p.olderThan = d
	}
	schemes, err := c.equivalences(true, "rewriteOptions.equal-schemes", "equal-schemes", "equalSchemes")
	if err != nil {
		return p, err
	}
	p.equalSchemes = maps.Clone(defaultEqualSchemes)
	maps.Copy(p.equalSchemes, schemes)
	if p.equalAuthorities, err = c.equivalences(false, "rewriteOptions.equal-authorities", "equal-authorities", "equalAuthorities"); err != nil {
		return p, err
	}
	mode, field, err := c.string("rewriteOptions.prefix-mismatch-mode", "prefix-mismatch-mode", "prefixMismatchMode")
	if err != nil {
		return p, err
	}
	switch strings.ToLower(mode) {
	case "", "error":
		p.mismatch = table.PrefixMismatchError
	case "ignore":
		p.mismatch = table.PrefixMismatchIgnore
	case "delete":
		p.mismatch = table.PrefixMismatchDelete
	default:
		return p, fieldErr(field, "want error, ignore or delete, got %q", mode)
	}
	return p, c.leftover()
}

// equivalences reads a Spark-style equivalence map, a JSON object (or a
// string holding one, as Gravitino stores rewriteOptions) from
// comma-separated names to the canonical name, e.g. {"s3a,s3n": "s3"}, and
// returns it flattened. schemes selects scheme syntax (folded to lower
// case) over authority syntax.
func (c *content) equivalences(schemes bool, names ...string) (map[string]string, error) {
	raw, field, ok := c.take(names...)
	if !ok {
		return map[string]string{}, nil
	}
	what, example := "authorities", `{"host-a:8020,host-b:8020": "nameservice1"}`
	if schemes {
		what, example = "schemes", `{"s3a,s3n": "s3"}`
	}
	bad := func(format string, args ...any) error {
		return fieldErr(field, "want a JSON object mapping comma-separated %s to one, e.g. %s: %s", what, example, fmt.Sprintf(format, args...))
	}
	obj := raw
	var s string
	if json.Unmarshal(raw, &s) == nil {
		obj = json.RawMessage(s)
	}
	var groups map[string]string
	if err := json.Unmarshal(obj, &groups); err != nil || groups == nil {
		return nil, bad("got %s", raw)
	}
	flat, err := flattenEquivalences(groups, schemes)
	if err != nil {
		return nil, bad("%v", err)
	}
	for from, to := range flat {
		for _, n := range []string{from, to} {
			if schemes {
				if _, rest, ok := splitScheme(n + "://"); !ok || rest != "//" {
					return nil, bad("%q is not a URI scheme", n)
				}
			} else if strings.ContainsAny(n, "/?# ") {
				return nil, bad("%q is not a URI authority", n)
			}
		}
	}
	return flat, nil
}

func validatePolicy(t Type, raw json.RawMessage) error {
	var err error
	switch t {
	case Compaction:
		_, err = parseCompaction(raw)
	case ManifestRewrite:
		_, err = parseManifests(raw)
	case SnapshotExpiry:
		_, err = parseExpiry(raw)
	case OrphanCleanup:
		_, err = parseOrphans(raw)
	default:
		err = fmt.Errorf("%w: unknown maintenance type %q (want one of %s)", ErrInvalidPolicy, t, typeList())
	}
	return err
}
