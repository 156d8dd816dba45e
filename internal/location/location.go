// Package location owns TMS's one notion of "the same file": it turns a
// file location, as Iceberg metadata, a FileIO listing or a policy spells
// it, into a canonical form in which two spellings of one object compare
// equal. Every comparison of two locations in TMS goes through it (orphan
// cleanup matching listed files with references, snapshot expiry deciding
// whether a file only expired snapshots reference is still live, verifiers
// comparing replaced and new files), because comparing raw strings deletes
// live data when writers disagree on spelling.
//
// Writers do disagree: Java's Hadoop Path writes "file:/abs", PyIceberg
// and Spark "file:///abs", a local FileIO lists "/abs", and a hadoop
// catalog reports absolute metadata paths for a table whose location is
// relative; Hadoop's S3 connectors write s3a:// or s3n:// where Trino and
// iceberg-go write s3://, and HDFS HA clusters are reached through several
// namenode authorities. A table that mixed such writers (a file dropped by
// one and added back by another, as add_files does) references one object
// under two spellings.
//
// A Normaliser is built from the policy's equal-schemes and
// equal-authorities maps (Spark's remove_orphan_files options; by default
// s3a and s3n are s3). Canon returns a Canonical: Full is equal for two
// spellings of the same object; Key, the path without scheme and
// authority, is equal for the same path under another scheme or authority
// (what Spark calls a prefix mismatch: possibly the same object, under a
// scheme or authority no equivalence maps). Set keeps locations by
// canonical form.
//
// Canonicalisation errs toward "the same": cleaning an object-store key
// ("a//b", "a/./b", "a/../b", a query or fragment) can make two distinct
// keys compare equal, which keeps a file rather than deleting it, and a
// caller deletes by the spelling it listed or planned, never by the
// canonical form. Windows drive letters are not handled: TMS runs on
// POSIX hosts.
package location

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// ErrUnparsable is wrapped by the error of Parse for a location whose
// object TMS cannot name with certainty. A caller deciding whether a file
// may be deleted treats such a location as possibly live: it keeps it.
var ErrUnparsable = errors.New("location cannot be parsed")

// DefaultEqualSchemes is Spark's remove_orphan_files default: s3a and s3n
// name the same objects as s3. It returns a new map on every call, so a
// caller may add to it.
func DefaultEqualSchemes() map[string]string { return map[string]string{"s3a": "s3", "s3n": "s3"} }

// Options configures a Normaliser.
type Options struct {
	// EqualSchemes maps a scheme to the scheme it is the same as,
	// flattened (one name to its canonical name, as package policy
	// returns them); names are folded to lower case. Nil means
	// DefaultEqualSchemes; an empty map means no scheme equivalences.
	EqualSchemes map[string]string
	// EqualAuthorities maps an authority to the authority it is the same
	// as, e.g. both namenodes of an HA pair to the nameservice. For an
	// ADLS-style container@host authority whose whole spelling is not
	// mapped, its host part is.
	EqualAuthorities map[string]string
	// Dir is the absolute directory relative local paths resolve against;
	// empty means the process working directory, which is what
	// iceberg-go's local FileIO opens relative paths from.
	Dir string
}

// Normaliser turns locations into their canonical form. It is immutable
// once built and safe for concurrent use. Build one with New; the zero
// Normaliser has no equivalences and resolves relative local paths
// against the root directory.
type Normaliser struct {
	schemes     map[string]string
	authorities map[string]string
	cwd         string
}

// New returns a Normaliser for o. It refuses a scheme or authority that
// could not appear in a URI (the canonical form would not parse back to
// itself) and a relative Dir, and fails when Dir is empty and the working
// directory cannot be read.
func New(o Options) (Normaliser, error) {
	schemes := o.EqualSchemes
	if schemes == nil {
		schemes = DefaultEqualSchemes()
	}
	n := Normaliser{schemes: make(map[string]string, len(schemes)), authorities: make(map[string]string, len(o.EqualAuthorities))}
	for _, from := range sortedKeys(schemes) {
		to := strings.ToLower(schemes[from])
		from = strings.ToLower(from)
		if !IsScheme(from) || !IsScheme(to) {
			return Normaliser{}, fmt.Errorf("equal schemes %q → %q: not a URI scheme", from, to)
		}
		if prev, dup := n.schemes[from]; dup && prev != to {
			return Normaliser{}, fmt.Errorf("equal schemes: %q maps to both %q and %q", from, prev, to)
		}
		n.schemes[from] = to
	}
	for from, to := range o.EqualAuthorities {
		if from == "" || to == "" || strings.ContainsAny(from, "/?#") || strings.ContainsAny(to, "/?#") {
			return Normaliser{}, fmt.Errorf("equal authorities %q → %q: not a URI authority", from, to)
		}
		n.authorities[from] = to
	}
	switch {
	case o.Dir == "":
		cwd, err := os.Getwd()
		if err != nil {
			return Normaliser{}, fmt.Errorf("the directory relative paths resolve against: %w", err)
		}
		n.cwd = cwd
	case !filepath.IsAbs(o.Dir):
		return Normaliser{}, fmt.Errorf("the directory relative paths resolve against must be absolute, got %q", o.Dir)
	default:
		n.cwd = filepath.Clean(o.Dir)
	}
	return n, nil
}

// Canonical is the canonical form of a location. Full is equal for two
// spellings of the same object. Key is the path part: for a local file it
// equals Full; for a URI (scheme://authority/path) it is the cleaned path,
// equal for the same path under another scheme or authority.
type Canonical struct {
	Full string
	Key  string
}

// Under reports whether c lies strictly below the folder dir (both
// canonical).
func (c Canonical) Under(dir Canonical) bool {
	prefix := strings.TrimSuffix(dir.Full, "/") + "/"
	return len(c.Full) > len(prefix) && strings.HasPrefix(c.Full, prefix)
}

// Dir returns the folder c lies in: the last element dropped from Full
// and Key. Unlike path.Dir it keeps a URI's "scheme://" (path.Dir cleans
// it to "scheme:/"). The folder of a root ("/", "s3://bucket") is itself.
func (c Canonical) Dir() Canonical {
	return Canonical{Full: dirOf(c.Full), Key: dirOf(c.Key)}
}

func dirOf(p string) string {
	i := strings.LastIndexByte(p, '/')
	switch {
	case i < 0:
		return p
	case i == 0:
		return "/"
	case p[i-1] == '/': // s3://bucket: the authority is not a folder
		return p
	}
	return p[:i]
}

// Canon returns the canonical form of p:
//
//   - a local path (bare, or a file: URI with no authority or "localhost":
//     file:/p, file:///p, file://localhost/p) becomes the absolute,
//     cleaned OS path, a relative one resolved against the Normaliser's
//     directory, the percent escapes of a file: URI decoded as iceberg-go's
//     local FileIO decodes them;
//   - any other URI becomes scheme://authority/path with the scheme in
//     lower case and mapped through the scheme equivalences, the authority
//     mapped through the authority equivalences, and the path cleaned
//     (".", "..", double and trailing slashes; a query or fragment
//     dropped).
//
// Canon always returns a form, also for a location Parse refuses (then
// the form is a best effort); a caller that must not act on a doubtful
// location calls Parse.
func (n Normaliser) Canon(p string) Canonical {
	c, _ := n.Parse(p)
	return c
}

// Parse returns Canon(p) and an error wrapping ErrUnparsable when p does
// not name one object with certainty:
//
//   - p is empty or holds a NUL byte (also percent-encoded in a file: URI),
//     which no file system names;
//   - p is a file: URI that iceberg-go's local FileIO cannot open (its
//     url.Parse fails, e.g. a bad percent escape), or one with a query or
//     fragment, which that FileIO drops and Hadoop's Path keeps in the
//     file name;
//   - p is "scheme:/path" with one slash (a URI without an authority): a
//     URI-based FileIO reads it as that scheme, the local FileIO as a
//     relative file name.
func (n Normaliser) Parse(p string) (Canonical, error) {
	var bad string
	switch {
	case p == "":
		bad = "empty"
	case strings.IndexByte(p, 0) >= 0:
		bad = "holds a NUL byte"
	}
	if strings.HasPrefix(p, "/") {
		k := path.Clean(p)
		return Canonical{Full: k, Key: k}, unparsable(p, bad)
	}
	scheme, rest, ok := splitScheme(p)
	if !ok {
		if i := strings.IndexByte(p, ':'); bad == "" && i > 0 && IsScheme(p[:i]) && strings.HasPrefix(p[i+1:], "/") {
			bad = "is a URI without an authority"
		}
		k := n.local(p)
		return Canonical{Full: k, Key: k}, unparsable(p, bad)
	}
	var auth string
	if r, hasAuth := strings.CutPrefix(rest, "//"); hasAuth {
		i := strings.IndexAny(r, "/?#")
		if i < 0 {
			i = len(r)
		}
		auth, rest = r[:i], r[i:]
	}
	mapped, mappedAuth := n.scheme(scheme), n.authority(auth)
	if (scheme == "file" || mapped == "file") && (localAuthority(auth) || localAuthority(mappedAuth)) {
		if bad == "" {
			if _, err := url.Parse(p); err != nil {
				bad = fmt.Sprintf("is a file: URI iceberg-go cannot open: %v", err)
			} else if strings.ContainsAny(rest, "?#") {
				bad = "is a file: URI with a query or fragment, which iceberg-go drops and Hadoop keeps in the name"
			}
		}
		if strings.Contains(rest, "%") {
			if u, err := url.PathUnescape(rest); err == nil {
				rest = u
			}
			if bad == "" && strings.IndexByte(rest, 0) >= 0 {
				bad = "decodes to a NUL byte"
			}
		}
		k := n.local(rest)
		return Canonical{Full: k, Key: k}, unparsable(p, bad)
	}
	if i := strings.IndexAny(rest, "?#"); i >= 0 {
		rest = rest[:i]
	}
	key := path.Clean("/" + rest)
	return Canonical{Full: mapped + "://" + mappedAuth + key, Key: key}, unparsable(p, bad)
}

// SameObject reports whether a and b name the same object: their
// canonical forms are equal. For a location Parse refuses it compares the
// best-effort form.
func (n Normaliser) SameObject(a, b string) bool {
	return n.Canon(a).Full == n.Canon(b).Full
}

// unparsable is the error of Parse for p, nil when why is empty.
func unparsable(p, why string) error {
	if why == "" {
		return nil
	}
	return fmt.Errorf("%w: %q %s", ErrUnparsable, p, why)
}

// localAuthority reports whether a file: URI with authority a names a
// file on this host.
func localAuthority(a string) bool { return a == "" || strings.EqualFold(a, "localhost") }

// local returns the absolute cleaned form of a local path.
func (n Normaliser) local(p string) string {
	cwd := n.cwd
	if cwd == "" {
		cwd = "/"
	}
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	if p == "" {
		return cwd
	}
	return filepath.Join(cwd, p)
}

// scheme maps a lower-case scheme through the equivalences.
func (n Normaliser) scheme(s string) string {
	if len(n.schemes) == 0 {
		return s
	}
	return resolve(s, func(s string) string {
		if m, ok := n.schemes[s]; ok {
			return m
		}
		return s
	})
}

// authority maps an authority through the equivalences; for an ADLS-style
// container@host authority whose whole spelling is not mapped, its host
// part is.
func (n Normaliser) authority(a string) string {
	if len(n.authorities) == 0 {
		return a
	}
	return resolve(a, func(a string) string {
		if m, ok := n.authorities[a]; ok {
			return m
		}
		if i := strings.LastIndexByte(a, '@'); i >= 0 {
			if m, ok := n.authorities[a[i+1:]]; ok {
				return a[:i+1] + m
			}
		}
		return a
	})
}

// resolve follows step from a to a name step keeps, so that chained
// equivalences ({"a": "b", "b": "c"}) resolve to one name and the
// canonical form of a canonical form is itself. On a cycle ({"a": "b",
// "b": "a"}) it returns the least name on the cycle, which every member
// of the cycle resolves to alike. step only ever returns a or a value of
// a finite map (spliced after a's own "container@" prefix), so the walk
// ends.
func resolve(a string, step func(string) string) string {
	next := step(a)
	if next == a {
		return a
	}
	if step(next) == next {
		return next
	}
	seen := map[string]int{a: 0}
	walk := []string{a}
	for {
		a = next
		if i, ok := seen[a]; ok {
			return slices.Min(walk[i:])
		}
		seen[a] = len(walk)
		walk = append(walk, a)
		if next = step(a); next == a {
			return a
		}
	}
}

// Scheme returns the lower-case URI scheme of p, or "" for a local path
// (bare, or a name such as "part:2024/x" that only looks like a URI).
func Scheme(p string) string {
	s, _, _ := splitScheme(p)
	return s
}

// splitScheme splits "scheme:rest" when p starts with a URI scheme
// (RFC 3986: a letter, then letters, digits, "+", "-", "."), returning the
// scheme in lower case. A name such as "part:2024/x" with no "//" after the
// colon is a URI only for the file scheme: iceberg-go's local FileIO treats
// it as a file name otherwise.
func splitScheme(p string) (scheme, rest string, ok bool) {
	i := strings.IndexByte(p, ':')
	if i <= 0 || !IsScheme(p[:i]) {
		return "", p, false
	}
	scheme, rest = strings.ToLower(p[:i]), p[i+1:]
	if scheme != "file" && !strings.HasPrefix(rest, "//") {
		return "", p, false
	}
	return scheme, rest, true
}

// IsScheme reports whether s is a URI scheme (RFC 3986: a letter, then
// letters, digits, "+", "-", ".").
func IsScheme(s string) bool {
	if s == "" {
		return false
	}
	for j := 0; j < len(s); j++ {
		ch := s[j]
		switch {
		case ch >= 'a' && ch <= 'z', ch >= 'A' && ch <= 'Z':
		case j > 0 && (ch >= '0' && ch <= '9' || ch == '+' || ch == '-' || ch == '.'):
		default:
			return false
		}
	}
	return true
}

// sortedKeys returns m's keys in order, so that New reports the same
// conflict for the same map every time.
func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
