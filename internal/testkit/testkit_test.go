package testkit_test

import (
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/internal/testkit"
)

func TestEventually(t *testing.T) {
	t.Parallel()
	var n atomic.Int32
	testkit.Eventually(t, time.Minute, "the third check", func() bool { return n.Add(1) >= 3 })
	require.EqualValues(t, 3, n.Load())
}

// TestWriteExecutableWhileForking writes and runs scripts while other
// goroutines fork: none fails with "text file busy".
func TestWriteExecutableWhileForking(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 20 {
				p := filepath.Join(dir, "script-"+string(rune('a'+i))+"-"+string(rune('a'+j)))
				testkit.WriteExecutable(t, p, []byte("#!/bin/sh\nexit 0\n"))
				out, err := exec.Command(p).CombinedOutput()
				require.NoError(t, err, "%s", out)
			}
		})
	}
	wg.Wait()
}
