package chain

import (
	"net/url"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/tms-dev/tms/policy"

	"github.com/apache/iceberg-go"
)

// Orphan cleanup compares a listed file with the files the table references
// by canonical path, because the two come from different writers that spell
// one file differently: a hadoop catalog reports absolute metadata paths for
// a table whose location (and so its listing) is relative; Java's Hadoop
// Path writes "file:/abs", PyIceberg and Spark "file:///abs", and a local
// FileIO lists "/abs"; Hadoop S3 connectors write s3a:// or s3n:// where
// others write s3://.

// defaultEqualSchemes is Spark's remove_orphan_files default: s3a and s3n
// name the same objects as s3.
var defaultEqualSchemes = policy.DefaultEqualSchemes()

// pathCanon turns a path into its canonical form for comparison.
type pathCanon struct {
	// schemes and authorities map a name to its canonical name (flattened
	// from the policy's comma-separated groups; schemes lower case).
	schemes     map[string]string
	authorities map[string]string
	// cwd is the directory relative local paths resolve from: the process
	// working directory, which is what iceberg-go's local FileIO opens them
	// from.
	cwd string
}

// canonPath is a canonical path: full compares files, key finds the same
// path under another scheme or authority (a prefix mismatch).
type canonPath struct {
	full string
	key  string
}

// canon returns the canonical form of p:
//
//   - a local path (bare, or a file: URI with no authority or "localhost":
//     file:/p, file:///p, file://localhost/p) becomes the absolute, cleaned
//     OS path, a relative one resolved against the working directory, the
//     percent escapes of a file: URI decoded as the local FileIO decodes
//     them;
//   - any other URI becomes scheme://authority/path with the scheme lower
//     case and mapped through the scheme equivalences, the authority mapped
//     through the authority equivalences, and the path cleaned (".", "..",
//     double and trailing slashes).
//
// Cleaning an object-store key can only make two distinct keys compare
// equal, which keeps a file rather than deleting it; deletion always uses
// the listed spelling.
func (c pathCanon) canon(p string) canonPath {
	if strings.HasPrefix(p, "/") {
		k := path.Clean(p)
		return canonPath{full: k, key: k}
	}
	scheme, rest, ok := splitScheme(p)
	if !ok {
		k := c.local(p)
		return canonPath{full: k, key: k}
	}
	var auth string
	if r, hasAuth := strings.CutPrefix(rest, "//"); hasAuth {
		i := strings.IndexAny(r, "/?#")
		if i < 0 {
			i = len(r)
		}
		auth, rest = r[:i], r[i:]
	}
	if scheme == "file" && (auth == "" || strings.EqualFold(auth, "localhost")) {
		if strings.Contains(rest, "%") {
			if u, err := url.PathUnescape(rest); err == nil {
				rest = u
			}
		}
		k := c.local(rest)
		return canonPath{full: k, key: k}
	}
	if i := strings.IndexAny(rest, "?#"); i >= 0 {
		rest = rest[:i]
	}
	if s, ok := c.schemes[scheme]; ok {
		scheme = s
	}
	auth = c.authority(auth)
	key := path.Clean("/" + rest)
	return canonPath{full: scheme + "://" + auth + key, key: key}
}

// local returns the absolute cleaned form of a local path.
func (c pathCanon) local(p string) string {
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	if p == "" {
		return c.cwd
	}
	return filepath.Join(c.cwd, p)
}

// authority maps an authority through the equivalences; for an ADLS-style
// container@host authority whose whole spelling is not mapped, its host
// part is.
func (c pathCanon) authority(a string) string {
	if m, ok := c.authorities[a]; ok {
		return m
	}
	if i := strings.LastIndexByte(a, '@'); i >= 0 {
		if m, ok := c.authorities[a[i+1:]]; ok {
			return a[:i+1] + m
		}
	}
	return a
}

// splitScheme splits "scheme:rest" when p starts with a URI scheme
// (RFC 3986: a letter, then letters, digits, "+", "-", "."), returning the
// scheme in lower case. A name such as "part:2024/x" with no "//" after the
// colon is a URI only for the file scheme: iceberg-go's local FileIO treats
// it as a file name otherwise.
func splitScheme(p string) (scheme, rest string, ok bool) {
	i := strings.IndexByte(p, ':')
	if i <= 0 {
		return "", p, false
	}
	for j := 0; j < i; j++ {
		ch := p[j]
		switch {
		case ch >= 'a' && ch <= 'z', ch >= 'A' && ch <= 'Z':
		case j > 0 && (ch >= '0' && ch <= '9' || ch == '+' || ch == '-' || ch == '.'):
		default:
			return "", p, false
		}
	}
	scheme, rest = strings.ToLower(p[:i]), p[i+1:]
	if scheme != "file" && !strings.HasPrefix(rest, "//") {
		return "", p, false
	}
	return scheme, rest, true
}

// under reports whether c lies strictly under the directory dir (both
// canonical).
func (c canonPath) under(dir canonPath) bool {
	return strings.HasPrefix(c.full, strings.TrimSuffix(dir.full, "/")+"/")
}

// hiddenFilter is Iceberg Java's PartitionAwareHiddenPathFilter as
// DeleteOrphanFiles applies it to every file and folder under the table
// location: a name starting with "_" or "." is hidden (Hadoop's _SUCCESS,
// _temporary/, .crc sidecars) unless it starts with "<field>=" for a
// partition field, of any of the table's specs, whose name itself starts
// with "_" or ".". A hidden folder hides everything below it.
type hiddenFilter struct {
	partitionPrefixes []string
}

// newHiddenFilter collects the partition names of every spec.
func newHiddenFilter(specs []iceberg.PartitionSpec) hiddenFilter {
	var h hiddenFilter
	for _, spec := range specs {
		for _, f := range spec.Fields() {
			if strings.HasPrefix(f.Name, "_") || strings.HasPrefix(f.Name, ".") {
				p := f.Name + "="
				if !slices.Contains(h.partitionPrefixes, p) {
					h.partitionPrefixes = append(h.partitionPrefixes, p)
				}
			}
		}
	}
	return h
}

// hiddenName reports whether one path segment is hidden.
func (h hiddenFilter) hiddenName(name string) bool {
	if !strings.HasPrefix(name, "_") && !strings.HasPrefix(name, ".") {
		return false
	}
	for _, p := range h.partitionPrefixes {
		if strings.HasPrefix(name, p) {
			return false
		}
	}
	return true
}

// hiddenRel reports whether a slash-separated path relative to the table
// location has a hidden segment.
func (h hiddenFilter) hiddenRel(rel string) bool {
	for seg := range strings.SplitSeq(rel, "/") {
		if h.hiddenName(seg) {
			return true
		}
	}
	return false
}
