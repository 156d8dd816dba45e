package seaweedtest_test

import (
	"testing"

	"github.com/apache/iceberg-go/table"
	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/catalogs"
	"github.com/tms-dev/tms/internal/seaweedtest"
)

// The server answers the REST catalog with the keys from catalog
// properties only (none in the environment), and refuses a wrong secret
// with an error naming the catalog.
func TestStart(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	s := seaweedtest.Start(t)
	cat, err := catalogs.Open(t.Context(), "lake", s.Props())
	require.NoError(t, err)
	ident := seaweedtest.Ident("x")
	require.NoError(t, cat.CreateNamespace(t.Context(), table.Identifier{ident[0]}, nil))

	bad := s.Props()
	bad["s3.secret-access-key"] = "wrong"
	_, err = catalogs.Open(t.Context(), "lake", bad)
	if err == nil {
		c, _ := catalogs.Open(t.Context(), "lake", bad)
		_, err = c.ListNamespaces(t.Context(), nil)
	}
	require.Error(t, err)
	require.Contains(t, err.Error(), "signature")

	half := s.PublicProps()
	half["s3.access-key-id"] = s.AccessKey
	_, err = catalogs.Open(t.Context(), "lake", half)
	require.ErrorIs(t, err, catalogs.ErrInvalidArgument)
	require.ErrorContains(t, err, `catalog "lake": s3.access-key-id and s3.secret-access-key must be given together`)
}
