package config

import (
	"bufio"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tms-dev/tms/internal/secretref"
	"github.com/tms-dev/tms/policy"
)

// Prefix starts every key of the configuration file.
const Prefix = "gravitino.maintenance."

// flagKeys maps the file's keys (without Prefix) to serve's flags. Keys
// ending in Ms take milliseconds and set a duration flag. Beside them the
// file takes task.TYPE.minIntervalMs, catalog.NAME.PROPERTY, ircAuth.* and
// gravitinoAuth.*.
var flagKeys = map[string]string{
	"db":                                     "db",
	"warehouseDir":                           "warehouse-dir",
	"node.id":                                "node-id",
	"runner.path":                            "runner",
	"jobSubmitter.local.maxRunning":          "max-running",
	"jobSubmitter.local.logDir":              "log-dir",
	"jobSubmitter.type":                      "job-submitter",
	"jobSubmitter.command.submit":            "submit-command",
	"jobSubmitter.command.status":            "status-command",
	"jobSubmitter.command.cancel":            "cancel-command",
	"jobSubmitter.command.idRegex":           "submit-id-regex",
	"jobSubmitter.gravitino.uri":             "gravitino-uri",
	"jobSubmitter.gravitino.metalake":        "gravitino-metalake",
	"jobSubmitter.gravitino.jobTemplateName": "gravitino-job-template",
	"expand.enqueueBatchSize":                "expand-batch",
	"scheduler.pollIntervalMs":               "poll-interval",
	"scheduler.heartbeatIntervalMs":          "heartbeat-interval",
	"reconciler.intervalMs":                  "reconcile-interval",
	"commit.coalesceDelayMs":                 "commit-delay",
	"http.listen":                            "listen",
	"http.commitToken":                       "commit-token",
	"http.adminToken":                        "admin-token",
	"http.readToken":                         "read-token",
	"watcher.intervalMs":                     "watch-interval",
	"watcher.concurrency":                    "watch-concurrency",
	"catalogNotify.enabled":                  "catalog-notify",
	"scheduler.expand.threads":               "expand-threads",
	"scheduler.cron.threads":                 "cron-threads",
	"scheduler.commit.threads":               "commit-threads",
}

// GravitinoAuthKeys are the keys of gravitinoAuth.*: password and
// oauthCredential take references, the others plain values.
var GravitinoAuthKeys = []string{"authType", "user", "password", "oauth2ServerUri", "oauthTokenPath", "oauthCredential", "oauthScope"}

// FlagKey returns the file key (with Prefix) of a flag of serve, "" for a
// flag the file does not set.
func FlagKey(flag string) string {
	for k, f := range flagKeys {
		if f == flag {
			return Prefix + k
		}
	}
	return ""
}

// File is a parsed configuration file: what it sets, and where.
type File struct {
	// Path is the file's name as it was given, the start of every Problem
	// of the file.
	Path string

	lines       map[string]int    // key (with Prefix) → its line
	flags       map[string]string // flag name → value (a duration for …Ms keys)
	minInterval map[policy.Type]time.Duration
	catalogs    map[string]map[string]string
	ircAuth     map[string]string // catalog client credential property → reference
	gravitino   map[string]string // gravitinoAuth key → value (credentials: a reference)
}

// Len is the number of keys the file sets.
func (f *File) Len() int { return len(f.lines) }

// Line is the line of key (with Prefix), 0 when the file does not set it.
func (f *File) Line(key string) int { return f.lines[key] }

// FlagValue is the value the file gives a flag of serve, as the flag takes
// it (a …Ms key's milliseconds as a duration).
func (f *File) FlagValue(flag string) (string, bool) {
	v, ok := f.flags[flag]
	return v, ok
}

// MinIntervals is the file's task.TYPE.minIntervalMs, by type.
func (f *File) MinIntervals() map[policy.Type]time.Duration { return maps.Clone(f.minInterval) }

// problem is a Problem of this file.
func (f *File) problem(line int, key, format string, args ...any) Problem {
	return Problem{File: f.Path, Line: line, Key: key, Msg: fmt.Sprintf(format, args...)}
}

// at is a Problem at key's line.
func (f *File) at(key, format string, args ...any) Problem {
	return f.problem(f.lines[key], key, format, args...)
}

// ReadFile parses the file of a --config flag (see Parse). A file that
// cannot be opened is a Problem of the flag.
func ReadFile(path string) (*File, error) {
	r, err := os.Open(path)
	if err != nil {
		return nil, Problems{flagProblem("--config: %v", err)}
	}
	defer r.Close()
	return Parse(r, path)
}

// Parse parses a configuration file's text; path names it in problems.
//
// The file holds one `key = value` per line, every key under Prefix. `#` or
// `!` starts a comment at the start of a line or after white space
// (`key = value   # note`); a value that holds such text is written in
// double quotes (`key = "a #b"`), which are not part of it. Credentials are
// never values: ircAuth.* and gravitinoAuth's password and oauthCredential
// take env:NAME or file:PATH references only.
//
// Parse reads the whole text and returns what it could read with every
// problem it found, one per line at most, as Problems naming the file, the
// line and the key.
func Parse(r io.Reader, path string) (*File, error) {
	f := &File{Path: path, lines: map[string]int{}, flags: map[string]string{}, minInterval: map[policy.Type]time.Duration{},
		catalogs: map[string]map[string]string{}, ircAuth: map[string]string{}, gravitino: map[string]string{}}
	var probs Problems
	seen := map[string]int{} // every key's first line, also of a key refused
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		k, raw, ok := strings.Cut(line, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" || strings.ContainsAny(k, " \t") {
			probs = append(probs, f.problem(n, "", "want key = value, got %q", line))
			continue
		}
		v, err := value(raw)
		if err != nil {
			probs = append(probs, f.problem(n, k, "%v", err))
			continue
		}
		if prev, dup := seen[k]; dup {
			probs = append(probs, f.problem(n, k, "already set on line %d", prev))
			continue
		}
		seen[k] = n
		if err := f.set(k, v); err != nil {
			probs = append(probs, f.problem(n, k, "%v", err))
			continue
		}
		f.lines[k] = n
	}
	if err := sc.Err(); err != nil {
		probs = append(probs, Problem{File: path, Msg: err.Error()})
	}
	return f, probs.Err()
}

// value reads the value part of a line: a double-quoted string (nothing
// but a comment may follow its closing quote), or the text up to a `#` or
// `!` that follows white space, trimmed.
func value(raw string) (string, error) {
	v := strings.TrimSpace(raw)
	if rest, quoted := strings.CutPrefix(v, `"`); quoted {
		val, after, closed := strings.Cut(rest, `"`)
		if !closed {
			return "", fmt.Errorf("the value's opening quote is not closed")
		}
		if after = strings.TrimSpace(after); after != "" && after[0] != '#' && after[0] != '!' {
			return "", fmt.Errorf("text %q after the value's closing quote; quote the whole value or start a comment with #", after)
		}
		return val, nil
	}
	for i := 1; i < len(v); i++ {
		if (v[i] == '#' || v[i] == '!') && (v[i-1] == ' ' || v[i-1] == '\t') {
			return strings.TrimSpace(v[:i]), nil
		}
	}
	return v, nil
}

// knownKeys lists the keys for the unknown-key message.
func knownKeys() string {
	keys := slices.Collect(maps.Keys(flagKeys))
	for _, t := range policy.Types() {
		keys = append(keys, "task."+string(t)+".minIntervalMs")
	}
	slices.Sort(keys)
	return strings.Join(keys, ", ")
}

func (f *File) set(key, v string) error {
	k, ok := strings.CutPrefix(key, Prefix)
	if !ok {
		return fmt.Errorf("unknown key: every key starts with %q", Prefix)
	}
	if flag, known := flagKeys[k]; known {
		if strings.HasSuffix(k, "Ms") {
			d, err := millis(v)
			if err != nil {
				return err
			}
			v = d.String()
		}
		f.flags[flag] = v
		return nil
	}
	switch {
	case strings.HasPrefix(k, "task.") && strings.HasSuffix(k, ".minIntervalMs"):
		typ := policy.Type(strings.TrimSuffix(strings.TrimPrefix(k, "task."), ".minIntervalMs"))
		if !slices.Contains(policy.Types(), typ) {
			return fmt.Errorf("unknown maintenance type %q (want one of %s)", typ, policy.TypeList())
		}
		d, err := millis(v)
		if err != nil {
			return err
		}
		f.minInterval[typ] = d
	case strings.HasPrefix(k, "catalog."):
		name, prop, ok := strings.Cut(strings.TrimPrefix(k, "catalog."), ".")
		if !ok || name == "" || prop == "" {
			return fmt.Errorf("want %scatalog.NAME.PROPERTY", Prefix)
		}
		if f.catalogs[name] == nil {
			f.catalogs[name] = map[string]string{}
		}
		f.catalogs[name][prop] = v
	case strings.HasPrefix(k, "ircAuth."), strings.HasPrefix(k, "gravitinoAuth."):
		group, prop, _ := strings.Cut(k, ".")
		if prop == "" {
			return fmt.Errorf("want %s%s.PROPERTY", Prefix, group)
		}
		// Every ircAuth key is a credential; of gravitinoAuth, the
		// credential-shaped ones (password, oauthCredential), while
		// authType, user, oauth2ServerUri and oauthScope are plain values.
		secret := group == "ircAuth" || policy.IsCredentialKey(prop)
		if secret && secretref.Check(v) != nil {
			return fmt.Errorf("a credential must be a reference, env:NAME or file:PATH, never the secret itself")
		}
		if group == "gravitinoAuth" && !slices.Contains(GravitinoAuthKeys, prop) {
			return fmt.Errorf("unknown gravitinoAuth key %q (known: %s)", prop, strings.Join(GravitinoAuthKeys, ", "))
		}
		if group == "ircAuth" {
			f.ircAuth[prop] = v
		} else {
			f.gravitino[prop] = v
		}
	default:
		return fmt.Errorf("unknown key (known: %s, catalog.NAME.PROPERTY, ircAuth.*, gravitinoAuth.*)", knownKeys())
	}
	return nil
}

// millis parses a non-negative count of milliseconds.
func millis(v string) (time.Duration, error) {
	ms, err := strconv.ParseInt(v, 10, 64)
	if err != nil || ms < 0 {
		return 0, fmt.Errorf("want a non-negative number of milliseconds, got %q", v)
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// catalogLine is the line of a file catalog's first key.
func (f *File) catalogLine(name string) (key string, line int) {
	for prop := range f.catalogs[name] {
		k := Prefix + "catalog." + name + "." + prop
		if l := f.lines[k]; line == 0 || l < line {
			key, line = k, l
		}
	}
	return key, line
}

// firstLine is the first line of the keys with the given prefix (after
// Prefix), and that key.
func (f *File) firstLine(prefix string) (key string, line int) {
	for k, l := range f.lines {
		if strings.HasPrefix(k, Prefix+prefix) && (line == 0 || l < line) {
			key, line = k, l
		}
	}
	return key, line
}
