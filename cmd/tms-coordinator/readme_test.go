package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
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

// TestDocsLinksStayInside: every relative link of the README and the docs
// leads to a file or folder of this repository, which a clone has; none
// leads outside it.
func TestDocsLinksStayInside(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	pages := []string{filepath.Join(root, "README.md")}
	require.NoError(t, filepath.WalkDir(filepath.Join(root, "docs"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".md") {
			pages = append(pages, p)
		}
		return err
	}))
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	checked := 0
	for _, page := range pages {
		b, err := os.ReadFile(page)
		require.NoError(t, err)
		for _, m := range link.FindAllStringSubmatch(string(b), -1) {
			target, _, _ := strings.Cut(m[1], "#")
			if target == "" || strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			abs := filepath.Join(filepath.Dir(page), target)
			rel, err := filepath.Rel(root, abs)
			require.NoError(t, err)
			require.False(t, rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)),
				"%s links %s, outside the repository", page, m[1])
			_, err = os.Stat(abs)
			require.NoError(t, err, "%s links %s, which does not exist", page, m[1])
			checked++
		}
	}
	require.Positive(t, checked)
}
