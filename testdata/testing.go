package testdata

import (
	"testing"

	"go.uber.org/zap/zaptest"
)

// BuildT builds the named recipes (none: the default set) at scale 1 into a
// fresh t.TempDir() and returns that directory; open it with
// catalogs.OpenLocal(ctx, dir, false). A build error fails the test at once.
// Build logs go to the test log.
func BuildT(t testing.TB, recipes ...string) string {
	t.Helper()
	return BuildAdjustedT(t, nil, recipes...)
}

// BuildAdjustedT is BuildT with BuildOptions.Adjust: adjust reshapes each
// recipe (e.g. fewer appends) before it is built.
func BuildAdjustedT(t testing.TB, adjust func(r *Recipe), recipes ...string) string {
	t.Helper()
	dir := t.TempDir()
	_, err := Build(t.Context(), dir, BuildOptions{Recipes: recipes, Scale: DefaultScale, Log: zaptest.NewLogger(t), Adjust: adjust})
	if err != nil {
		t.Fatalf("testdata.BuildT(%v): %v", recipes, err)
	}
	return dir
}
