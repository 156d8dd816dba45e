package chain

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a test leaves goroutines behind, e.g. a
// compaction group that outlives its Run.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// database/sql keeps a connection opener per open catalog; tests
		// leave their catalogs to the process like the other packages do.
		goleak.IgnoreTopFunction("database/sql.(*DB).connectionOpener"),
	)
}
