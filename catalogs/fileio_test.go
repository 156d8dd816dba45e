package catalogs_test

import (
	"slices"
	"testing"

	iceio "github.com/apache/iceberg-go/io"
	"github.com/stretchr/testify/require"

	_ "github.com/tms-dev/tms/catalogs"
)

// Both binaries import catalogs, which registers the object-store FileIOs:
// a table on S3, GCS or Azure storage loads instead of failing with "io
// scheme not registered".
func TestObjectStoreSchemesRegistered(t *testing.T) {
	got := iceio.GetRegisteredSchemes()
	for _, scheme := range []string{"file", "s3", "s3a", "s3n", "gs", "abfs", "abfss", "wasb", "wasbs"} {
		require.True(t, slices.Contains(got, scheme), "scheme %s (registered: %v)", scheme, got)
	}
}
