package submit_test

import (
	"testing"

	"github.com/tms-dev/tms/coordinator/internal/coordtest"
)

// TestMain: PostgreSQL must answer (these tests never skip), and no test may
// leak goroutines.
func TestMain(m *testing.M) { coordtest.Main(m) }
