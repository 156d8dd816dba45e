// Package testkit holds the helpers every package's tests share: the one
// way to wait for a condition, and the one way to write an executable a
// test then runs.
package testkit

import (
	"os"
	"syscall"
	"testing"
	"time"
)

// Eventually waits until cond holds, checking it every few milliseconds
// (backing off to 100 ms), and fails the test naming what it waited for
// once limit has passed. limit is a bound for a hung system, not a
// measure of speed: pass/fail never depends on how fast cond came true.
func Eventually(t testing.TB, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	wait := 5 * time.Millisecond
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", limit, what)
		}
		time.Sleep(wait)
		wait = min(2*wait, 100*time.Millisecond)
	}
}

// WriteExecutable writes an executable file (a script a test runs) at
// path. It holds syscall.ForkLock for reading while the file is open for
// writing, so that no process this one forks meanwhile (another parallel
// test starting a command) inherits the write descriptor: exec of a file
// open for writing anywhere fails with ETXTBSY ("text file busy").
func WriteExecutable(t testing.TB, path string, body []byte) {
	t.Helper()
	syscall.ForkLock.RLock()
	err := os.WriteFile(path, body, 0o755)
	syscall.ForkLock.RUnlock()
	if err != nil {
		t.Fatalf("write executable %s: %v", path, err)
	}
}

// NeedsService marks a test that needs a service (PostgreSQL, SeaweedFS,
// Chromium). Under `go test -short` (make check, the edit loop that runs
// without services) the test is skipped, saying so; in make test, which
// never passes -short, it always runs, and a missing service fails it.
func NeedsService(t testing.TB, what string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("needs %s: make test runs it", what)
	}
}
