package migrations

import (
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"
)

func TestEmbeddedSetIsValid(t *testing.T) {
	t.Parallel()

	all, err := parseAll(files)
	require.NoError(t, err)
	for _, backend := range []string{Postgres, SQLite} {
		ms, err := All(backend)
		require.NoError(t, err)
		require.Len(t, ms, Latest())
		require.Equal(t, all[backend], ms)
		for i, m := range ms {
			require.Equal(t, i+1, m.Version)
			require.NotEmpty(t, m.SQL)
		}
	}
	require.GreaterOrEqual(t, Latest(), 1)
	require.Equal(t, "ledger", all[Postgres][0].Name)
}

func TestAllUnknownBackend(t *testing.T) {
	t.Parallel()

	_, err := All("mysql")
	require.ErrorContains(t, err, `unknown backend "mysql"`)
}

func TestAllReturnsCopy(t *testing.T) {
	t.Parallel()

	ms, err := All(SQLite)
	require.NoError(t, err)
	ms[0].SQL = "DROP TABLE everything"
	again, err := All(SQLite)
	require.NoError(t, err)
	require.NotEqual(t, ms[0].SQL, again[0].SQL)
}

func TestParseRejectsBadSets(t *testing.T) {
	t.Parallel()

	file := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }
	tests := []struct {
		name string
		fsys fstest.MapFS
		want string
	}{
		{
			name: "gap",
			fsys: fstest.MapFS{
				"postgres/0001_a.sql": file("SELECT 1;"), "postgres/0003_c.sql": file("SELECT 1;"),
				"sqlite/0001_a.sql": file("SELECT 1;"), "sqlite/0003_c.sql": file("SELECT 1;"),
			},
			want: "expected version 2, found 0003_c.sql",
		},
		{
			name: "does not start at 1",
			fsys: fstest.MapFS{"postgres/0002_b.sql": file("SELECT 1;"), "sqlite/0002_b.sql": file("SELECT 1;")},
			want: "expected version 1, found 0002_b.sql",
		},
		{
			name: "duplicate version",
			fsys: fstest.MapFS{
				"postgres/0001_a.sql": file("SELECT 1;"), "postgres/0001_b.sql": file("SELECT 1;"),
				"sqlite/0001_a.sql": file("SELECT 1;"),
			},
			want: "expected version 2, found 0001_",
		},
		{
			name: "bad file name",
			fsys: fstest.MapFS{"postgres/1_a.sql": file("SELECT 1;"), "sqlite/0001_a.sql": file("SELECT 1;")},
			want: "is not named NNNN_name.sql",
		},
		{
			name: "empty file",
			fsys: fstest.MapFS{"postgres/0001_a.sql": file(" \n"), "sqlite/0001_a.sql": file("SELECT 1;")},
			want: "postgres/0001_a.sql is empty",
		},
		{
			name: "backends differ in count",
			fsys: fstest.MapFS{
				"postgres/0001_a.sql": file("SELECT 1;"), "postgres/0002_b.sql": file("SELECT 1;"),
				"sqlite/0001_a.sql": file("SELECT 1;"),
			},
			want: "postgres has 2 migrations, sqlite has 1",
		},
		{
			name: "backends differ in name",
			fsys: fstest.MapFS{"postgres/0001_a.sql": file("SELECT 1;"), "sqlite/0001_b.sql": file("SELECT 1;")},
			want: `version 1 is "a" on postgres but "b" on sqlite`,
		},
		{
			name: "missing backend",
			fsys: fstest.MapFS{"postgres/0001_a.sql": file("SELECT 1;")},
			want: "read sqlite",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := parseAll(tt.fsys)
			require.ErrorContains(t, err, tt.want)
		})
	}
}
