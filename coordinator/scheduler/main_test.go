package scheduler_test

import (
	"os"
	"testing"

	"github.com/tms-dev/tms/coordinator/internal/coordtest"
)

// TestMain runs the helper node when the test binary was re-executed as one
// (see process_test.go); otherwise it is coordtest.Main: PostgreSQL must
// answer, and no test may leak goroutines.
func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		os.Exit(runHelperNode())
	}
	coordtest.Main(m)
}
