package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// failpointEnv names the crash-recovery failpoint of the runner's tests:
// TMS_FAILPOINT=pause-after-deletes:N makes the process print
// "failpoint: paused after N deletions" to stderr once snapshot expiry has
// deleted N files, and then block until it is killed, so that a test can
// kill -9 it at exactly that point. Unset (always, outside such tests) it
// does nothing.
const failpointEnv = "TMS_FAILPOINT"

// fileDeletedFailpoint returns the runner.Options.FileDeleted of the
// failpoint, nil when none is set; a malformed value is an error naming it.
func fileDeletedFailpoint(stderr io.Writer) (func(string), error) {
	v := os.Getenv(failpointEnv)
	if v == "" {
		return nil, nil
	}
	n, err := strconv.Atoi(strings.TrimPrefix(v, "pause-after-deletes:"))
	if !strings.HasPrefix(v, "pause-after-deletes:") || err != nil || n < 1 {
		return nil, fmt.Errorf("%s=%q: want pause-after-deletes:N with N ≥ 1", failpointEnv, v)
	}
	deleted := 0
	return func(string) {
		if deleted++; deleted == n {
			fmt.Fprintf(stderr, "failpoint: paused after %d deletions\n", n)
			select {}
		}
	}, nil
}
