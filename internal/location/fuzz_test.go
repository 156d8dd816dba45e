package location_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/tms-dev/tms/internal/location"
)

// FuzzCanon: for any input and any of three normalisers (defaults, chained
// and cyclic equivalences with container@host authorities, the zero value)
// canonicalisation never panics, is idempotent (the canonical form of a
// canonical form is itself, Full and Key), keeps Key a suffix of Full,
// refuses only with ErrUnparsable, and a Set finds a member under both
// its spelling and its canonical form. The checked-in corpus under
// testdata/fuzz/FuzzCanon runs as an ordinary test.
func FuzzCanon(f *testing.F) {
	for _, p := range []string{
		"/abs/x.parquet", "rel/./x/../y", "file:/a/b", "file:///a/b", "file://localhost/a", "file:a%20b", "file:///a%zz",
		"s3a://b/k//x", "S3N://b", "hdfs://nn1:8020/a", "abfss://c@h1/x", "part:2024/x", "s3:/b/k", "", "file:///a?b#c",
		"gs://b/k?x#y", "a://h1/k", "./file:/x", "local:///k",
	} {
		f.Add(p)
	}
	defaults, err := location.New(location.Options{Dir: "/work/dir"})
	if err != nil {
		f.Fatal(err)
	}
	tangled, err := location.New(location.Options{
		EqualSchemes:     map[string]string{"a": "b", "b": "c", "x": "y", "y": "x", "local": "file", "s3a": "s3"},
		EqualAuthorities: map[string]string{"h1": "c@h2", "h2": "h3", "c@h3": "d@h1", "p": "q", "q": "p", "nn1:8020": "localhost"},
		Dir:              "/work/dir",
	})
	if err != nil {
		f.Fatal(err)
	}
	normalisers := []location.Normaliser{defaults, tangled, {}}
	f.Fuzz(func(t *testing.T, p string) {
		for i, n := range normalisers {
			c, err := n.Parse(p)
			if err != nil && !errors.Is(err, location.ErrUnparsable) {
				t.Fatalf("normaliser %d: Parse(%q): %v does not wrap ErrUnparsable", i, p, err)
			}
			if got := n.Canon(p); got != c {
				t.Fatalf("normaliser %d: Canon(%q) = %+v, Parse gave %+v", i, p, got, c)
			}
			again, err2 := n.Parse(c.Full)
			if again != c {
				t.Fatalf("normaliser %d: not idempotent: %q → %+v → %+v", i, p, c, again)
			}
			if err == nil && err2 != nil {
				t.Fatalf("normaliser %d: %q parses but its canonical form %q does not: %v", i, p, c.Full, err2)
			}
			if !strings.HasSuffix(c.Full, c.Key) {
				t.Fatalf("normaliser %d: %q: key %q is not a suffix of %q", i, p, c.Key, c.Full)
			}
			if c.Under(c) {
				t.Fatalf("normaliser %d: %q lies under itself", i, p)
			}
			if p == "" {
				continue
			}
			s := n.NewSet()
			s.Add(p)
			if !s.Has(p) || !s.Has(c.Full) || !n.SameObject(p, c.Full) {
				t.Fatalf("normaliser %d: a set holding %q does not find it as %q", i, p, c.Full)
			}
			if _, ok := s.LookupPath(p); !ok {
				t.Fatalf("normaliser %d: LookupPath(%q) misses the member itself", i, p)
			}
		}
	})
}
