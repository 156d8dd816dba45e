package main

import (
	"os"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestReadmeCommandsExist: every `bin/tms-coordinator NAME` the README
// shows is a command of this binary, and every command appears there.
func TestReadmeCommandsExist(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	shown := map[string]bool{}
	for _, m := range regexp.MustCompile(`bin/tms-coordinator ([a-z-]+)`).FindAllStringSubmatch(string(b), -1) {
		shown[m[1]] = true
	}
	known := map[string]bool{}
	for _, c := range commands() {
		known[c.Name] = true
		require.True(t, shown[c.Name], "the README shows no `bin/tms-coordinator %s`", c.Name)
	}
	for name := range shown {
		require.True(t, known[name], "the README shows `bin/tms-coordinator %s`, which is no command", name)
	}
}
