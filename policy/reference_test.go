package policy_test

import (
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/policy"
)

var update = flag.Bool("update", false, "rewrite docs/policies.md from the definitions (make docs)")

const referencePath = "../docs/policies.md"

// TestReferenceIsCurrent fails when docs/policies.md is not what the
// definitions generate: run `make docs`.
func TestReferenceIsCurrent(t *testing.T) {
	want := policy.Reference()
	if *update {
		require.NoError(t, os.WriteFile(referencePath, []byte(want), 0o644))
	}
	got, err := os.ReadFile(referencePath)
	require.NoError(t, err)
	require.True(t, string(got) == want, "docs/policies.md is stale: run make docs")
}

// TestReferenceCoversEveryField checks that the reference names every
// field of every type, with its spellings, and that each example decodes
// as a valid policy of its type.
func TestReferenceCoversEveryField(t *testing.T) {
	t.Parallel()
	ref := policy.Reference()
	for _, typ := range policy.Types() {
		require.Contains(t, ref, "`"+policy.PolicyTypeOf(typ)+"`")
		for _, f := range policy.Fields(typ) {
			require.Contains(t, ref, "| `"+f.Name+"` |", "%s: %s", typ, f.Name)
			for _, a := range f.Aliases {
				require.Contains(t, ref, "`"+a+"`", "%s: %s", typ, a)
			}
			require.NotEmpty(t, f.Doc, "%s: %s has no meaning", typ, f.Name)
			require.True(t, f.Default != "" || f.Unset != "", "%s: %s says neither its default nor what applies unset", typ, f.Name)
		}
		doc, c, err := policy.Decode(strings.NewReader(policy.Examples[typ]))
		require.NoError(t, err, "example for %s", typ)
		require.Equal(t, typ, c.Type)
		require.Equal(t, policy.PolicyTypeOf(typ), doc.PolicyType)
	}
}

// TestFieldDefaultsAreWhatTheParsersApply: a content that spells out every
// documented default parses to the same options as an empty one, so the
// reference's defaults are the parsers' defaults.
func TestFieldDefaultsAreWhatTheParsersApply(t *testing.T) {
	t.Parallel()
	explicit := func(typ policy.Type) []byte {
		var parts []string
		for _, f := range policy.Fields(typ)[5:] {
			if f.Default == "" || strings.HasSuffix(f.Name, "-ms") {
				continue
			}
			v := f.Default
			if f.Kind != policy.KindObject {
				v = `"` + v + `"`
			}
			parts = append(parts, `"`+f.Name+`": `+v)
		}
		var top, rw []string
		for _, p := range parts {
			if k, ok := strings.CutPrefix(p, `"rewriteOptions.`); ok {
				rw = append(rw, `"`+k)
			} else {
				top = append(top, p)
			}
		}
		top = append(top, `"rewriteOptions": {`+strings.Join(rw, ", ")+`}`)
		return []byte("{" + strings.Join(top, ", ") + "}")
	}
	c0, err := policy.ParseCompaction(nil)
	require.NoError(t, err)
	c1, err := policy.ParseCompaction(explicit(policy.Compaction))
	require.NoError(t, err, "%s", explicit(policy.Compaction))
	require.Equal(t, c0, c1)
	m0, err := policy.ParseManifests(nil)
	require.NoError(t, err)
	m1, err := policy.ParseManifests(explicit(policy.ManifestRewrite))
	require.NoError(t, err)
	require.Equal(t, m0, m1)
	e0, err := policy.ParseExpiry(nil)
	require.NoError(t, err)
	e1, err := policy.ParseExpiry(explicit(policy.SnapshotExpiry))
	require.NoError(t, err)
	require.Equal(t, e0, e1)
	o0, err := policy.ParseOrphans(nil)
	require.NoError(t, err)
	o1, err := policy.ParseOrphans(explicit(policy.OrphanCleanup))
	require.NoError(t, err, "%s", explicit(policy.OrphanCleanup))
	o0.OlderThan, o1.OlderThan = 0, 0 // an explicit age is the default's value, marked set
	require.Equal(t, o0, o1)
}
