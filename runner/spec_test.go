package runner

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseSpec(t *testing.T) {
	t.Parallel()
	good := `{"catalog": {"warehouse-dir": "/tmp/wh"}, "table": "tms.t",
		"steps": [{"type": "compaction", "policy": {"minDataFileMse": 10}}, {"type": "snapshot-expiry"}], "dry-run": true}`
	s, err := ParseSpec(json.RawMessage(good))
	require.NoError(t, err)
	require.Equal(t, "/tmp/wh", s.Catalog.WarehouseDir)
	require.Equal(t, "tms.t", s.Table)
	require.True(t, s.DryRun)
	require.Len(t, s.Steps, 2)
	require.JSONEq(t, `{"minDataFileMse": 10}`, string(s.Steps[0].Policy))

	props := `{"catalog": {"name": "prod", "properties": {"type": "rest", "uri": "https://irc"}}, "table": "a.b.c", "steps": [{"type": "manifest-rewrite"}]}`
	s, err = ParseSpec(json.RawMessage(props))
	require.NoError(t, err)
	require.Equal(t, "prod", s.Catalog.Name)
	require.Equal(t, "https://irc", s.Catalog.Properties["uri"])

	for _, tc := range []struct{ name, spec, want string }{
		{"empty", ``, "no spec"},
		{"not json", `{`, "invalid job spec"},
		{"unknown field", `{"catalog": {"warehouse-dir": "/w"}, "table": "a.b", "steps": [{"type": "compaction"}], "tabel": "x"}`, `unknown field "tabel"`},
		{"no catalog", `{"table": "a.b", "steps": [{"type": "compaction"}]}`, "catalog: needs warehouse-dir or properties"},
		{"both catalogs", `{"catalog": {"warehouse-dir": "/w", "properties": {"type": "sql"}}, "table": "a.b", "steps": [{"type": "compaction"}]}`, "not both"},
		{"bad table", `{"catalog": {"warehouse-dir": "/w"}, "table": "nons", "steps": [{"type": "compaction"}]}`, "table:"},
		{"no steps", `{"catalog": {"warehouse-dir": "/w"}, "table": "a.b"}`, "steps: at least one"},
		{"unknown type", `{"catalog": {"warehouse-dir": "/w"}, "table": "a.b", "steps": [{"type": "vacuum"}]}`, `"vacuum"`},
		{"missing type", `{"catalog": {"warehouse-dir": "/w"}, "table": "a.b", "steps": [{"policy": {}}]}`, "steps[0].type: missing"},
		{"out of order", `{"catalog": {"warehouse-dir": "/w"}, "table": "a.b", "steps": [{"type": "snapshot-expiry"}, {"type": "compaction"}]}`, "chain order"},
		{"duplicate", `{"catalog": {"warehouse-dir": "/w"}, "table": "a.b", "steps": [{"type": "compaction"}, {"type": "compaction"}]}`, "without duplicates"},
		{"bad policy", `{"catalog": {"warehouse-dir": "/w"}, "table": "a.b", "steps": [{"type": "compaction"}, {"type": "snapshot-expiry", "policy": {"retain-last": 0}}]}`, "steps[1].policy (snapshot-expiry)"},
		{"credential property", `{"catalog": {"properties": {"type": "rest", "s3.secret-access-key": "x"}}, "table": "a.b", "steps": [{"type": "compaction"}]}`, "catalog.properties.s3.secret-access-key: credential-shaped"},
		{"credential in policy", `{"catalog": {"warehouse-dir": "/w"}, "table": "a.b", "steps": [{"type": "compaction", "policy": {"jobOptions": {"password": "x"}}}]}`, "steps[0].policy.jobOptions.password: credential-shaped"},
		{"credential under unknown field", `{"catalog": {"warehouse-dir": "/w"}, "table": "a.b", "steps": [{"type": "compaction"}], "extra": {"token": "x"}}`, "extra.token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseSpec(json.RawMessage(tc.spec))
			require.ErrorIs(t, err, ErrInvalidSpec)
			require.ErrorContains(t, err, tc.want)
			require.NotContains(t, err.Error(), `"x"`, "a secret value never appears in the error")
		})
	}
}

func TestIsCredentialKey(t *testing.T) {
	t.Parallel()
	for _, k := range []string{"password", "auth.basic.Password", "credential", "token", "s3.session-token",
		"s3.secret-access-key", "s3.access-key-id", "adls.sas-token.acct", "gcs.oauth2.token", "hive.kerberos.keytab",
		"client.secret", "api_key", "rest.signing-private-key"} {
		require.True(t, IsCredentialKey(k), k)
	}
	for _, k := range []string{"type", "uri", "warehouse", "s3.region", "s3.endpoint", "io-impl", "rest.signing-name", "scope"} {
		require.False(t, IsCredentialKey(k), k)
	}
}

func TestCatalogPropsFromEnv(t *testing.T) {
	t.Parallel()
	got := CatalogPropsFromEnv([]string{
		"PATH=/bin", "TMS_CATALOG_PROP_credential=id:secret", "TMS_CATALOG_PROP_s3.secret-access-key=k=v",
		"TMS_CATALOG_PROP_=ignored", "TMS_DB=sqlite://x",
	})
	require.Equal(t, map[string]string{"credential": "id:secret", "s3.secret-access-key": "k=v"}, map[string]string(got))
}

func TestReadCatalogPropsFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "catalog.properties")
	require.NoError(t, os.WriteFile(path, []byte("# catalog credentials\n\ncredential = id:s3cr3t\n! also a comment\ntoken=a=b\n"), 0o600))
	got, err := ReadCatalogPropsFile(path)
	require.NoError(t, err)
	require.Equal(t, map[string]string{"credential": "id:s3cr3t", "token": "a=b"}, map[string]string(got))

	bad := filepath.Join(dir, "bad.properties")
	require.NoError(t, os.WriteFile(bad, []byte("type=rest\njust-a-s3cr3t\n"), 0o600))
	_, err = ReadCatalogPropsFile(bad)
	require.ErrorContains(t, err, "line 2: want key=value")
	require.NotContains(t, err.Error(), "s3cr3t", "the line's content may be a secret")

	_, err = ReadCatalogPropsFile(filepath.Join(dir, "missing"))
	require.ErrorContains(t, err, "catalog props file")
}
