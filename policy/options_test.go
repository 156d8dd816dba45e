package policy

import (
	"encoding/json"
	"testing"

	"github.com/apache/iceberg-go/table"
	"github.com/stretchr/testify/require"
)

func TestParseTypes(t *testing.T) {
	t.Parallel()
	got, err := ParseTypes("orphan-cleanup, compaction,snapshot-expiry,compaction")
	require.NoError(t, err)
	require.Equal(t, []Type{Compaction, SnapshotExpiry, OrphanCleanup}, got)
	_, err = ParseTypes("compaction,vacuum")
	require.ErrorIs(t, err, ErrInvalid)
	require.ErrorContains(t, err, `"vacuum"`)
	_, err = ParseTypes("")
	require.Error(t, err)
}

func TestValidateOptionsNamesField(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		t       Type
		content string
		want    string
	}{
		{Compaction, `{"rewriteOptions": {"target-file-size-bytes": -1}}`, "rewriteOptions.target-file-size-bytes: must be positive, got -1"},
		{Compaction, `{"rewriteOptions": {"delete-ratio-threshold": 1.5}}`, "rewriteOptions.delete-ratio-threshold: must be between 0 and 1, got 1.5"},
		{Compaction, `{"rewriteOptions": {"delete-ratio-threshold": -0.1}}`, "rewriteOptions.delete-ratio-threshold: must be >= 0, got -0.1"},
		{Compaction, `{"rewriteOptions": {"target-file-size-bytes": "abc"}}`, "rewriteOptions.target-file-size-bytes: want an integer"},
		{Compaction, `{"minDataFileMse": -3}`, "minDataFileMse: must be >= 0"},
		{Compaction, `{"maxPartitionNum": 0}`, "maxPartitionNum: must be positive"},
		{Compaction, `{"rewriteOptions": {"partial-progress.enabled": "maybe"}}`, "rewriteOptions.partial-progress.enabled: want true or false"},
		{Compaction, `{"rewriteOptions": {"where": "ts >="}}`, "rewriteOptions.where:"},
		{Compaction, `{"rewriteOptions": {"where": "a = 1 OR b = 2"}}`, "rewriteOptions.where: want AND"},
		{Compaction, `{"rewriteOptions": {"target-file-size": 5}}`, "rewriteOptions.target-file-size: unknown option"},
		{ManifestRewrite, `{"rewriteOptions": {"target-manifest-size-bytes": 0}}`, "rewriteOptions.target-manifest-size-bytes: must be positive"},
		{SnapshotExpiry, `{"rewriteOptions": {"retain-last": 0}}`, "rewriteOptions.retain-last: must be positive, got 0"},
		{SnapshotExpiry, `{"olderThanMs": -5}`, "olderThanMs: must be >= 0"},
		{SnapshotExpiry, `{"rewriteOptions": {"older-than": "soon"}}`, "rewriteOptions.older-than: want a duration"},
		{OrphanCleanup, `{"older-than": "10m"}`, "older-than: must be at least 1h0m0s"},
		{OrphanCleanup, `[1]`, "content: not a JSON object"},
		{Type("vacuum"), `{}`, `unknown maintenance type "vacuum"`},
	} {
		err := ValidateOptions(tc.t, json.RawMessage(tc.content))
		require.ErrorIs(t, err, ErrInvalid, tc.content)
		require.ErrorContains(t, err, tc.want, tc.content)
	}
	for _, ok := range []struct {
		t       Type
		content string
	}{
		{Compaction, ``},
		{Compaction, `{"minDataFileMse": 1e5, "schedule": {"onCommit": true}, "minIntervalMs": 60000, "jobOptions": {"x": "y"},
			"rewriteOptions": {"target-file-size-bytes": "134217728", "min-input-files": 2, "partial-progress.enabled": true,
			"where": "category = 'books' AND id >= 10"}}`},
		{SnapshotExpiry, `{"olderThanMs": 3600000, "retainLast": 3}`},
		{OrphanCleanup, `{"rewriteOptions": {"older-than": "3d"}}`},
	} {
		require.NoError(t, ValidateOptions(ok.t, json.RawMessage(ok.content)), ok.content)
	}
}

func TestOrphanPolicyFields(t *testing.T) {
	t.Parallel()
	p, err := ParseOrphans(nil)
	require.NoError(t, err)
	require.Equal(t, map[string]string{"s3a": "s3", "s3n": "s3"}, p.EqualSchemes)
	require.Empty(t, p.EqualAuthorities)
	require.Equal(t, table.PrefixMismatchError, p.PrefixMismatch)
	require.Equal(t, DefaultOrphanOlderThan, p.OlderThan)
	require.Equal(t, OrphanScopeTablePaths, p.Scope, "only the table's own folders by default")
	for content, want := range map[string]string{
		`{"scope": "location"}`:                        OrphanScopeLocation,
		`{"rewriteOptions": {"scope": "Location"}}`:    OrphanScopeLocation,
		`{"rewriteOptions": {"scope": "table-paths"}}`: OrphanScopeTablePaths,
	} {
		p, err = ParseOrphans(json.RawMessage(content))
		require.NoError(t, err, content)
		require.Equal(t, want, p.Scope, content)
	}

	p, err = ParseOrphans(json.RawMessage(`{"equal-schemes": {"s3a,s3n": "s3", "gs2, GCS": "gs"},
		"rewriteOptions": {"equal-authorities": "{\"nn1:8020,nn2:8020\": \"ns1\"}", "prefix-mismatch-mode": "IGNORE"}}`))
	require.NoError(t, err)
	require.Equal(t, map[string]string{"s3a": "s3", "s3n": "s3", "gs2": "gs", "gcs": "gs"}, p.EqualSchemes)
	require.Equal(t, map[string]string{"nn1:8020": "ns1", "nn2:8020": "ns1"}, p.EqualAuthorities)
	require.Equal(t, table.PrefixMismatchIgnore, p.PrefixMismatch)

	p, err = ParseOrphans(json.RawMessage(`{"rewriteOptions": {"equal-schemes": {"s3a": "s3x"}, "prefix-mismatch-mode": "delete"}}`))
	require.NoError(t, err)
	require.Equal(t, map[string]string{"s3a": "s3x", "s3n": "s3"}, p.EqualSchemes)
	require.Equal(t, table.PrefixMismatchDelete, p.PrefixMismatch)

	for _, tc := range []struct{ content, want string }{
		{`{"equal-schemes": "s3a=s3"}`, `equal-schemes: want a JSON object mapping comma-separated schemes to one, e.g. {"s3a,s3n": "s3"}: got "s3a=s3"`},
		{`{"equal-schemes": ["s3a"]}`, "equal-schemes: want a JSON object"},
		{`{"rewriteOptions": {"equal-schemes": {"s3a,": "s3"}}}`, `rewriteOptions.equal-schemes: want a JSON object mapping comma-separated schemes to one, e.g. {"s3a,s3n": "s3"}: "s3a," holds an empty name`},
		{`{"equal-schemes": {"s3a": ""}}`, `equal-schemes: want a JSON object mapping comma-separated schemes to one, e.g. {"s3a,s3n": "s3"}: "s3a" maps to an empty name`},
		{`{"equal-schemes": {"s3 a": "s3"}}`, `"s3 a" is not a URI scheme`},
		{`{"equal-schemes": {"s3a": "s3://"}}`, `"s3://" is not a URI scheme`},
		{`{"equal-schemes": {"s3a": "s3", "s3a,s3n": "s4"}}`, `"s3a" maps to both "s3" and "s4"`},
		{`{"rewriteOptions": {"equal-authorities": {"host/a": "b"}}}`, `rewriteOptions.equal-authorities: want a JSON object mapping comma-separated authorities to one`},
		{`{"equal-authorities": 5}`, "equal-authorities: want a JSON object"},
		{`{"prefix-mismatch-mode": "warn"}`, `prefix-mismatch-mode: want error, ignore or delete, got "warn"`},
		{`{"rewriteOptions": {"prefix-mismatch-mode": 3}}`, `rewriteOptions.prefix-mismatch-mode: want error, ignore or delete, got "3"`},
		{`{"equal-scheme": {"s3a": "s3"}}`, "equal-scheme: unknown option"},
		{`{"rewriteOptions": {"scope": "warehouse"}}`, `rewriteOptions.scope: want table-paths or location, got "warehouse"`},
	} {
		err := ValidateOptions(OrphanCleanup, json.RawMessage(tc.content))
		require.ErrorIs(t, err, ErrInvalid, tc.content)
		require.ErrorContains(t, err, tc.want, tc.content)
	}
}

// Snapshot expiry takes orphan cleanup's equal-schemes, equal-authorities
// and prefix-mismatch-mode with the same spellings, defaults and checks.
func TestExpiryPolicySpellingFields(t *testing.T) {
	t.Parallel()
	p, err := ParseExpiry(nil)
	require.NoError(t, err)
	require.Equal(t, map[string]string{"s3a": "s3", "s3n": "s3"}, p.EqualSchemes)
	require.Empty(t, p.EqualAuthorities)
	require.Equal(t, table.PrefixMismatchError, p.PrefixMismatch, "error by default, as in iceberg-go")
	require.True(t, p.CleanExpiredFiles)

	p, err = ParseExpiry(json.RawMessage(`{"retain-last": 2, "equalSchemes": {"gs2, GCS": "gs"},
		"rewriteOptions": {"equal-authorities": "{\"nn1:8020,nn2:8020\": \"ns1\"}", "prefix-mismatch-mode": "Ignore"}}`))
	require.NoError(t, err)
	require.EqualValues(t, 2, p.RetainLast)
	require.Equal(t, map[string]string{"s3a": "s3", "s3n": "s3", "gs2": "gs", "gcs": "gs"}, p.EqualSchemes)
	require.Equal(t, map[string]string{"nn1:8020": "ns1", "nn2:8020": "ns1"}, p.EqualAuthorities)
	require.Equal(t, table.PrefixMismatchIgnore, p.PrefixMismatch)

	p, err = ParseExpiry(json.RawMessage(`{"prefixMismatchMode": "delete"}`))
	require.NoError(t, err)
	require.Equal(t, table.PrefixMismatchDelete, p.PrefixMismatch)

	for _, tc := range []struct{ content, want string }{
		{`{"equal-schemes": "s3a=s3"}`, `equal-schemes: want a JSON object mapping comma-separated schemes to one`},
		{`{"rewriteOptions": {"equal-schemes": {"s3 a": "s3"}}}`, `rewriteOptions.equal-schemes: want a JSON object mapping comma-separated schemes to one, e.g. {"s3a,s3n": "s3"}: "s3 a" is not a URI scheme`},
		{`{"equalAuthorities": {"host/a": "b"}}`, `equalAuthorities: want a JSON object mapping comma-separated authorities to one`},
		{`{"prefix-mismatch-mode": "warn"}`, `prefix-mismatch-mode: want error, ignore or delete, got "warn"`},
		{`{"rewriteOptions": {"prefix-mismatch-mode": 3}}`, `rewriteOptions.prefix-mismatch-mode: want error, ignore or delete, got "3"`},
		{`{"rewriteOptions": {"prefix-mismatch": "ignore"}}`, "rewriteOptions.prefix-mismatch: unknown option"},
	} {
		err := ValidateOptions(SnapshotExpiry, json.RawMessage(tc.content))
		require.ErrorIs(t, err, ErrInvalid, tc.content)
		require.ErrorContains(t, err, tc.want, tc.content)
	}

	// One definition: the expiry fields are the orphan ones but for what
	// the mode means.
	find := func(ty Type, name string) Field {
		for _, f := range Fields(ty) {
			if f.Name == name {
				return f
			}
		}
		t.Fatalf("%s has no field %s", ty, name)
		return Field{}
	}
	for _, name := range []string{"rewriteOptions.equal-schemes", "rewriteOptions.equal-authorities", "rewriteOptions.prefix-mismatch-mode"} {
		e, o := find(SnapshotExpiry, name), find(OrphanCleanup, name)
		require.Equal(t, o.Aliases, e.Aliases, name)
		require.Equal(t, o.Default, e.Default, name)
		require.Equal(t, o.Values, e.Values, name)
		require.Equal(t, o.Kind, e.Kind, name)
	}
	require.Contains(t, find(SnapshotExpiry, "rewriteOptions.prefix-mismatch-mode").Doc, "never deletes a file a retained snapshot may read")
}
