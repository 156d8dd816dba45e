package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"
	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/internal/cli"
	"github.com/tms-dev/tms/internal/testkit"
	"github.com/tms-dev/tms/store/testdb"
)

// TestAttachmentsCheckedAgainstNodeCatalogs: each serve node records the
// catalogs it is configured with. Before any node has, an attachment to
// any catalog is accepted with a note; once one has, the policy command
// and the HTTP API refuse a catalog no live node has, naming it; status
// and GET /v1/policies show the attachment made earlier to a catalog that
// no node has.
func TestAttachmentsCheckedAgainstNodeCatalogs(t *testing.T) {
	testkit.NeedsService(t, builtBinaries)
	t.Parallel()
	db := testdb.SQLiteURL(t)
	dir := t.TempDir()
	smallFilesTable(t, dir, table.Identifier{"att", "t"}, 2, false)
	code, _, stderr := run(t, "migrate", "--db", db)
	require.Equal(t, cli.ExitOK, code, stderr)
	file := filepath.Join(t.TempDir(), "p.json")
	require.NoError(t, os.WriteFile(file, []byte(`{"schedule": {"crontab": "@hourly"}}`), 0o600))
	ok(t, "policy", "create", "--db", db, "--name", "p", "--type", "compaction", "--content-file", file)
	code, _, stderr = run(t, "policy", "attach", "--db", db, "--name", "p", "--object", "gone.db")
	require.Equal(t, cli.ExitOK, code, stderr)
	require.Contains(t, stderr, `no live serve node has said which catalogs it has, so catalog "gone" was not checked`)

	admin := fmt.Sprintf("admin-%d", time.Now().UnixNano())
	tokenFile := filepath.Join(t.TempDir(), "admin")
	require.NoError(t, os.WriteFile(tokenFile, []byte(admin), 0o600))
	n := serve(t, db, dir, "--node-id", "att-1", "--admin-token", "file:"+tokenFile)
	st := ledger(t, db)
	testkit.Eventually(t, time.Minute, "the node to record its catalogs", func() bool {
		ns, err := st.ListNodes(t.Context())
		require.NoError(t, err)
		return len(ns) == 1 && slices.Equal(ns[0].Catalogs, []string{"local"})
	})

	code, _, stderr = run(t, "policy", "attach", "--db", db, "--name", "p", "--object", "nowhere.db.t")
	require.Equal(t, cli.ExitUsage, code)
	require.Contains(t, stderr, `catalog "nowhere" is not configured on any coordinator (configured: local)`)
	ok(t, "policy", "attach", "--db", db, "--name", "p", "--object", "local.att.t")

	base := n.httpAddr(t)
	var errBody struct{ Error string }
	require.Equal(t, http.StatusBadRequest, call(t, "POST", base+"/v1/policies/p/attachments", admin, map[string]any{"object": "elsewhere.db"}, &errBody))
	require.Contains(t, errBody.Error, `catalog "elsewhere" is not configured`)
	var doc struct {
		Attachments []struct {
			Object            string
			CatalogConfigured *bool
		}
	}
	require.Equal(t, http.StatusOK, call(t, "GET", base+"/v1/policies/p", admin, nil, &doc))
	got := map[string]bool{}
	for _, a := range doc.Attachments {
		require.NotNil(t, a.CatalogConfigured, a.Object)
		got[a.Object] = *a.CatalogConfigured
	}
	require.Equal(t, map[string]bool{"gone.db": false, "local.att.t": true}, got)

	out := ok(t, "status", "--db", db)
	require.Contains(t, out, "ATTACHMENTS TO A CATALOG NO NODE HAS (they maintain nothing)\n  policy p on namespace gone.db")
	n.stop(t)
	out = ok(t, "status", "--db", db)
	require.Contains(t, out, "ATTACHMENTS TO A CATALOG NO NODE HAS: not known", "no live node: not known")
}
