package config

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tms-dev/tms/internal/invalid"
)

// FuzzConfigFile: any file text is parsed or refused as invalid-argument
// Problems that each name the file (and, for a line's fault, the line); a
// parsed value never keeps a trailing comment, and only known flags are
// set.
func FuzzConfigFile(f *testing.F) {
	f.Add("gravitino.maintenance.node.id = tms-a   # --node-id\n! comment\n# comment\n")
	f.Add(`gravitino.maintenance.catalog.prod.uri = "http://x/#frag" # kept` + "\n")
	f.Add("gravitino.maintenance.scheduler.pollIntervalMs = 10000\ngravitino.maintenance.scheduler.pollIntervalMs = 1\n")
	f.Add("gravitino.maintenance.ircAuth.token = file:/run/secrets/t\ngravitino.maintenance.http.adminToken = plain\n")
	f.Add("gravitino.maintenance.node.id = \"unterminated\n")
	f.Add("key without equals\n")
	f.Add("gravitino.maintenance.task.vacuum.minIntervalMs = 1\n")
	f.Fuzz(func(t *testing.T, text string) {
		c, err := Parse(strings.NewReader(text), "fuzz.conf")
		if err != nil {
			if !errors.Is(err, invalid.ErrArgument) {
				t.Fatalf("not an invalid argument: %v (%T)", err, err)
			}
			var probs Problems
			if !errors.As(err, &probs) || len(probs) == 0 {
				t.Fatalf("not Problems: %v (%T)", err, err)
			}
			for _, p := range probs {
				if !strings.HasPrefix(p.Error(), "fuzz.conf") {
					t.Fatalf("problem does not name the file: %v", p)
				}
			}
		}
		known := slices.Collect(func(yield func(string) bool) {
			for _, flag := range flagKeys {
				if !yield(flag) {
					return
				}
			}
		})
		for flag, v := range c.flags {
			if !slices.Contains(known, flag) {
				t.Fatalf("set unknown flag %q", flag)
			}
			if utf8.ValidString(v) && v != strings.TrimSpace(v) {
				t.Fatalf("flag %s value %q is not trimmed", flag, v)
			}
		}
	})
}

// FuzzConfigValue: a value part either reads or is refused; an unquoted
// value never holds " #" or " !", and a quoted one is its text as written.
func FuzzConfigValue(f *testing.F) {
	for _, v := range []string{` tms-a   # --node-id`, ` "a #b" # c`, ` "a" b`, ` "open`, ` http://x/#y`, "\t7\t!x", ` ""`} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		v, err := value(raw)
		if err != nil {
			return
		}
		trimmed := strings.TrimSpace(raw)
		if strings.HasPrefix(trimmed, `"`) {
			if !strings.HasPrefix(trimmed[1:], v+`"`) {
				t.Fatalf("quoted %q read as %q", raw, v)
			}
			return
		}
		if strings.Contains(v, " #") || strings.Contains(v, " !") || strings.Contains(v, "\t#") || strings.Contains(v, "\t!") {
			t.Fatalf("%q kept a comment: %q", raw, v)
		}
		if !strings.HasPrefix(trimmed, v) {
			t.Fatalf("%q read as %q, not its beginning", raw, v)
		}
	})
}
