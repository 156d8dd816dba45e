package store

import (
	"cmp"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"
)

// TestPostgresJITOff: the store's connections run without PostgreSQL's JIT
// unless the URL asks for it.
func TestPostgresJITOff(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// testdb.PostgresServer's URL (testdb imports this package).
	server := cmp.Or(os.Getenv("TMS_TEST_DATABASE_URL"), "postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
	sep := "?"
	if strings.Contains(server, "?") {
		sep = "&"
	}
	for url, want := range map[string]string{server: "off", server + sep + "jit=on": "on"} {
		s, err := openPostgres(ctx, url, zaptest.NewLogger(t), time.Now)
		require.NoError(t, err)
		var got string
		require.NoError(t, s.pool.QueryRow(ctx, "SHOW jit").Scan(&got))
		s.pool.Close()
		require.Equal(t, want, got, url)
	}
}
