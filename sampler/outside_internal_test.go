package sampler

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCollapseFolders(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		in    []string
		limit int
		want  []string
	}{
		{"below another", []string{"s3://b/x/y", "s3://b/x", "s3://b/x-y"}, 10, []string{"s3://b/x", "s3://b/x-y"}},
		{"duplicates", []string{"/a/b", "/a/b"}, 10, []string{"/a/b"}},
		{"deepest first", []string{"s3://b/t/p=1/q=1", "s3://b/t/p=1/q=2", "s3://b/u"}, 2, []string{"s3://b/t/p=1", "s3://b/u"}},
		{"up to the bucket", []string{"s3://b/x/1", "s3://b/y/2", "s3://b/z/3"}, 1, []string{"s3://b"}},
		{"roots stay", []string{"s3://a", "s3://b", "s3://c"}, 1, []string{"s3://a", "s3://b", "s3://c"}},
		{"local root", []string{"/x", "/y"}, 1, []string{"/"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			require.Equal(t, c.want, collapseFolders(append([]string(nil), c.in...), c.limit))
		})
	}
}
