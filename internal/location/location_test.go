package location_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/internal/location"
)

func mustNew(t testing.TB, o location.Options) location.Normaliser {
	t.Helper()
	n, err := location.New(o)
	require.NoError(t, err)
	return n
}

// testNormaliser is the normaliser most tests use: Spark's default scheme
// equivalences, the S3 virtual-host and ADLS blob/dfs authorities of one
// bucket and one account, relative paths under /work/dir.
func testNormaliser(t testing.TB) location.Normaliser {
	return mustNew(t, location.Options{
		EqualAuthorities: map[string]string{
			"bucket.s3.amazonaws.com": "bucket", "bucket.s3.us-east-1.amazonaws.com": "bucket",
			"acct.blob.core.windows.net": "acct.dfs.core.windows.net",
		},
		Dir: "/work/dir",
	})
}

// Every spelling in a group names the same object; no two groups do.
func TestSameObjectGroups(t *testing.T) {
	t.Parallel()
	n := testNormaliser(t)
	groups := []struct {
		what      string
		spellings []string
	}{
		{"one local file in every spelling", []string{
			"/work/dir/data/x.parquet", "file:/work/dir/data/x.parquet", "file:///work/dir/data/x.parquet",
			"file://localhost/work/dir/data/x.parquet", "file://LOCALHOST/work/dir/data/x.parquet", "FILE:///work/dir/data/x.parquet",
		}},
		{"relative local paths against the directory", []string{
			"/work/dir/data/y.parquet", "data/y.parquet", "./data/y.parquet", "../dir/data/y.parquet", "file:data/y.parquet",
		}},
		{"duplicate slashes", []string{"/work/dir/data/z.parquet", "/work//dir/data//z.parquet", "file:////work/dir/data/z.parquet", "data//z.parquet"}},
		{"dot and dot-dot", []string{"/work/dir/data/w.parquet", "/work/dir/./data/w.parquet", "/work/dir/data/sub/../w.parquet", "data/sub/../w.parquet", "file:///work/tmp/../dir/data/w.parquet"}},
		{"percent escapes of a file: URI", []string{
			"/work/dir/data/a b.parquet", "file:/work/dir/data/a%20b.parquet", "file:///work/dir/data/a%20b.parquet", "file:data/a%20b.parquet",
			"file:///work/dir/data/a%20b%2Eparquet",
		}},
		{"a percent in a bare path is literal", []string{"/work/dir/data/a%20b.parquet", "file:///work/dir/data/a%2520b.parquet"}},
		{"a folder with and without a trailing slash", []string{"/work/dir/data", "/work/dir/data/", "data/", "file:///work/dir/data/", "file:/work/dir/data//"}},
		{"s3, s3a and s3n (Spark's default)", []string{
			"s3://bucket/wh/t/data/x.parquet", "s3a://bucket/wh/t/data/x.parquet", "s3n://bucket/wh/t/data/x.parquet",
			"S3A://bucket/wh/t/data/x.parquet", "s3://bucket/wh/t//data/x.parquet", "s3://bucket/wh/t/data/./x.parquet",
			"s3://bucket/wh/t/tmp/../data/x.parquet",
		}},
		{"equal authorities", []string{
			"s3://bucket/wh/t/data/v.parquet", "s3://bucket.s3.amazonaws.com/wh/t/data/v.parquet",
			"s3a://bucket.s3.us-east-1.amazonaws.com/wh/t/data/v.parquet",
		}},
		{"an ADLS container@host maps its host", []string{
			"abfss://c@acct.dfs.core.windows.net/t/x.parquet", "abfss://c@acct.blob.core.windows.net/t/x.parquet",
			"abfss://c@acct.dfs.core.windows.net/t/x.parquet/",
		}},
		{"a query or fragment of an object URI is dropped", []string{"gs://bucket/t/q.parquet", "gs://bucket/t/q.parquet?generation=1", "gs://bucket/t/q.parquet#f"}},
		{"a colon in a file name is not a scheme", []string{"part:2024/x.parquet", "/work/dir/part:2024/x.parquet"}},
		{"another bucket", []string{"s3://other/wh/t/data/x.parquet"}},
		{"another scheme", []string{"gs://bucket/wh/t/data/x.parquet"}},
		{"another local folder", []string{"/other/dir/data/x.parquet", "file:/other/dir/data/x.parquet"}},
		{"one namenode", []string{"hdfs://nn1:8020/wh/t/x.parquet"}},
		{"another namenode", []string{"hdfs://nn2:8020/wh/t/x.parquet"}},
		{"a file: URI of another host", []string{"file://otherhost/work/dir/data/x.parquet"}},
		{"escapes of an object key are literal", []string{"s3://bucket/wh/t/data/x%2Eparquet"}},
	}
	seen := map[string]string{}
	for _, g := range groups {
		want := n.Canon(g.spellings[0])
		for _, p := range g.spellings {
			require.Equal(t, want, n.Canon(p), "%s: %s", g.what, p)
			require.True(t, n.SameObject(g.spellings[0], p), "%s: %s", g.what, p)
		}
		if other, dup := seen[want.Full]; dup {
			t.Fatalf("%s and %s have the same canonical form %s", g.what, other, want.Full)
		}
		seen[want.Full] = g.what
	}
}

func TestCanonicalForms(t *testing.T) {
	t.Parallel()
	n := testNormaliser(t)
	for _, tc := range []struct {
		in        string
		full, key string
	}{
		{"data/x.parquet", "/work/dir/data/x.parquet", "/work/dir/data/x.parquet"},
		{"file://localhost/a/./b/../c", "/a/c", "/a/c"},
		{"", "/work/dir", "/work/dir"},
		{"s3a://bucket.s3.amazonaws.com/wh/t/data/x.parquet", "s3://bucket/wh/t/data/x.parquet", "/wh/t/data/x.parquet"},
		{"S3N://bucket", "s3://bucket/", "/"},
		{"hdfs://nn1:8020/wh//t/", "hdfs://nn1:8020/wh/t", "/wh/t"},
		{"file://otherhost/x", "file://otherhost/x", "/x"},
		{"s3:/bucket/x", "/work/dir/s3:/bucket/x", "/work/dir/s3:/bucket/x"},
	} {
		require.Equal(t, location.Canonical{Full: tc.full, Key: tc.key}, n.Canon(tc.in), tc.in)
	}
	// The same key under two namenodes is the same path, not the same object.
	a, b := n.Canon("hdfs://nn1:8020/wh/t/x.parquet"), n.Canon("hdfs://nn2:8020/wh/t/x.parquet")
	require.Equal(t, a.Key, b.Key)
	require.NotEqual(t, a.Full, b.Full)
}

// The s3a/s3 twin that mixed Spark and Trino writers produce is one
// object by default, and two when the policy maps the schemes elsewhere.
func TestS3TwinSpellings(t *testing.T) {
	t.Parallel()
	const trino, spark = "s3://lake/wh/db/t/data/00000-0-x.parquet", "s3a://lake/wh/db/t/data/00000-0-x.parquet"
	n := mustNew(t, location.Options{Dir: "/"})
	require.True(t, n.SameObject(trino, spark))
	set := n.NewSet()
	set.Add(trino)
	got, ok := set.Lookup(spark)
	require.True(t, ok)
	require.Equal(t, trino, got, "the spelling added is the one reported")

	none := mustNew(t, location.Options{EqualSchemes: map[string]string{}, Dir: "/"})
	require.False(t, none.SameObject(trino, spark), "without equivalences s3a is another scheme")
	set = none.NewSet()
	set.Add(trino)
	require.False(t, set.Has(spark))
	got, ok = set.LookupPath(spark)
	require.True(t, ok, "but the same path")
	require.Equal(t, trino, got)

	custom := mustNew(t, location.Options{EqualSchemes: map[string]string{"S3A": "S3", "oss": "s3"}, Dir: "/"})
	require.True(t, custom.SameObject(trino, spark), "names fold to lower case")
	require.True(t, custom.SameObject(trino, "oss://lake/wh/db/t/data/00000-0-x.parquet"))
	require.False(t, custom.SameObject(trino, "s3n://lake/wh/db/t/data/00000-0-x.parquet"), "a given map replaces the default")
}

// Chained and cyclic equivalences resolve to one name, so that the
// canonical form of a canonical form is itself.
func TestChainedEquivalences(t *testing.T) {
	t.Parallel()
	n := mustNew(t, location.Options{
		EqualSchemes:     map[string]string{"a": "b", "b": "c", "x": "y", "y": "x", "local": "file"},
		EqualAuthorities: map[string]string{"h1": "h2", "h2": "h3", "n1": "c@h1", "p": "q", "q": "p"},
		Dir:              "/",
	})
	for _, tc := range []struct{ in, full string }{
		{"a://h/k", "c://h/k"},
		{"b://h/k", "c://h/k"},
		{"x://h/k", "x://h/k"},
		{"y://h/k", "x://h/k"},
		{"s3://h1/k", "s3://h3/k"},
		{"s3://n1/k", "s3://c@h3/k"},
		{"s3://d@h2/k", "s3://d@h3/k"},
		{"s3://q/k", "s3://p/k"},
		{"local:///k", "/k"},
		{"local://localhost/k", "/k"},
		{"local://h/k", "file://h/k"},
	} {
		c := n.Canon(tc.in)
		require.Equal(t, tc.full, c.Full, tc.in)
		require.Equal(t, c, n.Canon(c.Full), "idempotent: %s", tc.in)
	}
}

func TestParseRefusesDoubtfulLocations(t *testing.T) {
	t.Parallel()
	n := testNormaliser(t)
	for _, p := range []string{
		"",
		"/work/dir/data/x\x00.parquet",
		"file:///work/dir/data/x%zz.parquet",
		"file:/work/dir/data/x%2.parquet",
		"file:///work/dir/data/x.parquet?v=1",
		"file:///work/dir/data/x.parquet#frag",
		"file:///work/dir/data/x\x7f.parquet",
		"s3:/bucket/x.parquet",
		"hdfs:/wh/t/x.parquet",
	} {
		c, err := n.Parse(p)
		require.ErrorIs(t, err, location.ErrUnparsable, "%q", p)
		require.Equal(t, n.Canon(p), c, "Parse returns the best-effort form too: %q", p)
	}
	for _, p := range []string{
		"/work/dir/data/x.parquet", "data/x.parquet", "part:2024/x.parquet", "file:/a%20b", "file:a/b",
		"s3://bucket/x%zz.parquet", "s3://bucket/x.parquet?versionId=3", "hdfs:///wh/t/x.parquet",
		"/work/dir/data/x?.parquet",
	} {
		_, err := n.Parse(p)
		require.NoError(t, err, "%q", p)
	}
}

func TestUnder(t *testing.T) {
	t.Parallel()
	n := testNormaliser(t)
	for _, tc := range []struct {
		p, dir string
		under  bool
	}{
		{"data/x.parquet", "file:/work/dir/", true},
		{"s3a://bucket/wh/t/data/x", "s3://bucket/wh/t", true},
		{"/work/dirt/x", "/work/dir", false},
		{"/work/dir", "/work/dir", false},
		{"/x", "/", true},
		{"s3://bucket/wh/t/data/x", "s3://other/wh/t", false},
	} {
		require.Equal(t, tc.under, n.Canon(tc.p).Under(n.Canon(tc.dir)), "%s under %s", tc.p, tc.dir)
	}
}

func TestScheme(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"file:/x": "file", "FILE:///x": "file", "S3A://b/k": "s3a", "/abs": "", "rel/x": "", "part:2024/x": "",
		"s3:/b/k": "", "a+b.c-d://h/k": "a+b.c-d", "1s3://b": "", "": "",
	} {
		require.Equal(t, want, location.Scheme(in), in)
	}
}

func TestSet(t *testing.T) {
	t.Parallel()
	n := mustNew(t, location.Options{Dir: "/work"})
	s := n.NewSet()
	s.Add("file:///work/t/data/a.parquet")
	s.Add("/work/t/data/a.parquet")
	s.Add("s3a://b/t/data/c.parquet")
	s.Add("hdfs://nn1:8020/t/data/d.parquet")
	s.Add("")
	require.Equal(t, 3, s.Len(), "two spellings of a.parquet are one object; the empty location is no member")
	for _, tc := range []struct {
		p         string
		same      string
		path      string
		samePathP bool
	}{
		{"file:/work/t/data/a.parquet", "file:///work/t/data/a.parquet", "file:///work/t/data/a.parquet", true},
		{"t/data/a.parquet", "file:///work/t/data/a.parquet", "file:///work/t/data/a.parquet", true},
		{"s3://b/t/data/c.parquet", "s3a://b/t/data/c.parquet", "s3a://b/t/data/c.parquet", true},
		{"hdfs://nn2:8020/t/data/d.parquet", "", "hdfs://nn1:8020/t/data/d.parquet", true},
		{"gs://other/t/data/c.parquet", "", "s3a://b/t/data/c.parquet", true},
		{"/t/data/d.parquet", "", "hdfs://nn1:8020/t/data/d.parquet", true},
		{"s3://b/work/t/data/a.parquet", "", "/work/t/data/a.parquet", true},
		{"/work/t/data/e.parquet", "", "", false},
		{"", "", "", false},
	} {
		got, ok := s.Lookup(tc.p)
		require.Equal(t, tc.same != "", ok, "Lookup %q", tc.p)
		require.Equal(t, tc.same, got, "Lookup %q", tc.p)
		require.Equal(t, ok, s.Has(tc.p), tc.p)
		got, ok = s.LookupPath(tc.p)
		require.Equal(t, tc.samePathP, ok, "LookupPath %q", tc.p)
		if tc.path == "/work/t/data/a.parquet" {
			require.Contains(t, []string{"file:///work/t/data/a.parquet", "/work/t/data/a.parquet"}, got)
		} else {
			require.Equal(t, tc.path, got, "LookupPath %q", tc.p)
		}
	}
}

func TestNewRefusesBadOptions(t *testing.T) {
	t.Parallel()
	for _, o := range []location.Options{
		{EqualSchemes: map[string]string{"s3 a": "s3"}},
		{EqualSchemes: map[string]string{"s3a": "s3://"}},
		{EqualSchemes: map[string]string{"": "s3"}},
		{EqualSchemes: map[string]string{"S3A": "s3", "s3a": "gs"}},
		{EqualAuthorities: map[string]string{"host/a": "b"}},
		{EqualAuthorities: map[string]string{"a": "b?c"}},
		{EqualAuthorities: map[string]string{"": "b"}},
		{Dir: "relative/dir"},
	} {
		_, err := location.New(o)
		require.Error(t, err, "%+v", o)
	}
}

// With no Dir, relative paths resolve against the working directory, as
// iceberg-go's local FileIO opens them.
func TestRelativeToWorkingDirectory(t *testing.T) {
	t.Parallel()
	cwd, err := os.Getwd()
	require.NoError(t, err)
	n := mustNew(t, location.Options{})
	require.Equal(t, filepath.Join(cwd, "data", "x.parquet"), n.Canon("data/x.parquet").Full)
	require.Equal(t, cwd, n.Canon("file:.").Full)
	require.True(t, n.SameObject("s3a://b/k", "s3://b/k"), "nil EqualSchemes is Spark's default")

	var zero location.Normaliser
	require.Equal(t, "/data/x.parquet", zero.Canon("data/x.parquet").Full, "the zero Normaliser resolves against /")
	require.False(t, zero.SameObject("s3a://b/k", "s3://b/k"), "and has no equivalences")
}

func TestCanonicalDir(t *testing.T) {
	for in, want := range map[string]string{
		"s3://b/t/metadata/v1.metadata.json": "s3://b/t/metadata",
		"s3://b/x":                           "s3://b",
		"s3://b":                             "s3://b",
		"/w/t/data/a.parquet":                "/w/t/data",
		"/a":                                 "/",
		"/":                                  "/",
	} {
		if got := (location.Canonical{Full: in, Key: in}).Dir(); got.Full != want || got.Key != want {
			t.Errorf("Dir(%q) = %+v, want %q", in, got, want)
		}
	}
}
