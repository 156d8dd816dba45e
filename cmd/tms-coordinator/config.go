package main

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

	"github.com/spf13/pflag"

	"github.com/tms-dev/tms/catalogs"
	"github.com/tms-dev/tms/coordinator/flow"
	"github.com/tms-dev/tms/coordinator/submit"
	"github.com/tms-dev/tms/internal/cli"
	"github.com/tms-dev/tms/internal/secretref"
	"github.com/tms-dev/tms/policy"
)

// The coordinator's configuration file (serve --config FILE, env
// TMS_CONFIG) holds Gravitino-style keys, one `key = value` per line,
// every key under configPrefix. `#` or `!` starts a comment at the start of
// a line or after white space (`key = value   # note`); a value that holds
// such text is written in double quotes (`key = "a #b"`), which are not
// part of it. A command-line
// flag wins over its TMS_* environment variable, which wins over the file.
// Credentials are never values in the file: ircAuth.* and gravitinoAuth.*
// take env:NAME or file:PATH references only.
const configPrefix = "gravitino.maintenance."

// configFlags maps the file's keys to serve's flags. Keys ending in Ms take
// milliseconds and set a duration flag.
var configFlags = map[string]string{
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
	"task.compaction.minIntervalMs":          "",
	"task.manifest-rewrite.minIntervalMs":    "",
	"task.snapshot-expiry.minIntervalMs":     "",
	"task.orphan-cleanup.minIntervalMs":      "",
}

// fileConfig is what a configuration file says beyond serve's flags.
type fileConfig struct {
	flags       map[string]string        // flag name → value
	minInterval map[string]time.Duration // maintenance type → cooldown
	catalogs    map[string]map[string]string
	ircAuth     map[string]string // catalog client credential property → reference
	gravitino   map[string]string // gravitinoAuth key → value (credentials: a reference)
}

// readConfigFile parses path; every error names the file, the line and the
// key.
func readConfigFile(path string) (*fileConfig, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, cli.Usagef("--config: %v", err)
	}
	defer f.Close()
	return parseConfig(f, path)
}

// parseConfig parses a configuration file's text; errors name path, the
// line and the key.
func parseConfig(r io.Reader, path string) (*fileConfig, error) {
	c := &fileConfig{flags: map[string]string{}, minInterval: map[string]time.Duration{}, catalogs: map[string]map[string]string{},
		ircAuth: map[string]string{}, gravitino: map[string]string{}}
	seen := map[string]int{}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		k, raw, ok := strings.Cut(line, "=")
		k = strings.TrimSpace(k)
		where := fmt.Sprintf("%s:%d", path, n)
		if !ok || k == "" || strings.ContainsAny(k, " \t") {
			return nil, cli.Usagef("%s: want key = value, got %q", where, line)
		}
		v, err := configValue(raw)
		if err != nil {
			return nil, cli.Usagef("%s: key %s: %v", where, k, err)
		}
		if prev, dup := seen[k]; dup {
			return nil, cli.Usagef("%s: key %s is already set on line %d", where, k, prev)
		}
		seen[k] = n
		if err := c.set(k, v); err != nil {
			return nil, cli.Usagef("%s: key %s: %v", where, k, err)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, cli.Usagef("--config %s: %v", path, err)
	}
	return c, nil
}

// configValue reads the value part of a line: a double-quoted string
// (nothing but a comment may follow its closing quote), or the text up to a
// `#` or `!` that follows white space, trimmed.
func configValue(raw string) (string, error) {
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

func (c *fileConfig) set(key, v string) error {
	k, ok := strings.CutPrefix(key, configPrefix)
	if !ok {
		return fmt.Errorf("unknown key: every key starts with %q", configPrefix)
	}
	if flag, known := configFlags[k]; known {
		if flag == "" { // task.<type>.minIntervalMs
			typ := strings.TrimSuffix(strings.TrimPrefix(k, "task."), ".minIntervalMs")
			d, err := millis(v)
			if err != nil {
				return err
			}
			c.minInterval[typ] = d
			return nil
		}
		if strings.HasSuffix(k, "Ms") {
			d, err := millis(v)
			if err != nil {
				return err
			}
			v = d.String()
		}
		c.flags[flag] = v
		return nil
	}
	switch {
	case strings.HasPrefix(k, "catalog."):
		name, prop, ok := strings.Cut(strings.TrimPrefix(k, "catalog."), ".")
		if !ok || name == "" || prop == "" {
			return fmt.Errorf("want %scatalog.NAME.PROPERTY", configPrefix)
		}
		if c.catalogs[name] == nil {
			c.catalogs[name] = map[string]string{}
		}
		c.catalogs[name][prop] = v
	case strings.HasPrefix(k, "ircAuth."), strings.HasPrefix(k, "gravitinoAuth."):
		group, prop, _ := strings.Cut(k, ".")
		if prop == "" {
			return fmt.Errorf("want %s%s.PROPERTY", configPrefix, group)
		}
		// Every ircAuth key is a credential; of gravitinoAuth, the
		// credential-shaped ones (password, oauthCredential), while
		// authType, user, oauth2ServerUri and oauthScope are plain values.
		secret := group == "ircAuth" || policy.IsCredentialKey(prop)
		if secret && !strings.HasPrefix(v, "env:") && !strings.HasPrefix(v, "file:") {
			return fmt.Errorf("a credential must be a reference, env:NAME or file:PATH, never the secret itself")
		}
		if group == "gravitinoAuth" && !slices.Contains(gravitinoAuthKeys, prop) {
			return fmt.Errorf("unknown gravitinoAuth key %q (known: %s)", prop, strings.Join(gravitinoAuthKeys, ", "))
		}
		if group == "ircAuth" {
			c.ircAuth[prop] = v
		} else {
			c.gravitino[prop] = v
		}
	default:
		return fmt.Errorf("unknown key (known: %s, catalog.NAME.PROPERTY, ircAuth.*, gravitinoAuth.*)", strings.Join(slices.Sorted(maps.Keys(configFlags)), ", "))
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

// applyConfig fills the flags the command line did not set: from their
// TMS_* variable (TMS_ and the flag name in upper case, dashes as
// underscores), else from the file. It returns the file's other settings
// (nil without a file).
func applyConfig(fs *pflag.FlagSet, path string) (*fileConfig, error) {
	var c *fileConfig
	if path != "" {
		var err error
		if c, err = readConfigFile(path); err != nil {
			return nil, err
		}
	}
	var err error
	fs.VisitAll(func(f *pflag.Flag) {
		if err != nil || f.Changed || f.Name == "config" {
			return
		}
		env := "TMS_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		v, ok := os.LookupEnv(env)
		src := env
		if !ok && c != nil {
			v, ok = c.flags[f.Name]
			src = "--config " + path
		}
		if !ok || f.Name == "db" && src == env { // --db already defaults to TMS_DB
			return
		}
		if e := fs.Set(f.Name, v); e != nil {
			err = cli.Usagef("%s: --%s %q: %v", src, f.Name, v, e)
		}
	})
	if err != nil {
		return nil, err
	}
	if c != nil {
		for name := range c.flags {
			if fs.Lookup(name) == nil {
				return nil, cli.Usagef("--config %s: this command has no --%s", path, name)
			}
		}
	}
	return c, nil
}

// catalogConfigs returns the file's catalogs: a warehouseDir property makes a
// local testdata-style catalog, anything else iceberg-go properties, with
// the ircAuth references resolved into the secrets of each.
func (c *fileConfig) catalogConfigs() ([]flow.CatalogConfig, error) {
	if c == nil {
		return nil, nil
	}
	secrets := map[string]string{}
	for k, ref := range c.ircAuth {
		v, err := secretref.Resolve(ref)
		if err != nil {
			return nil, cli.Usagef("config key %sircAuth.%s: %v", configPrefix, k, err)
		}
		secrets[k] = v
	}
	if _, err := c.gravitinoAuth(); err != nil {
		return nil, err
	}
	var out []flow.CatalogConfig
	for _, name := range slices.Sorted(maps.Keys(c.catalogs)) {
		props := c.catalogs[name]
		if dir, ok := props["warehouseDir"]; ok {
			if len(props) > 1 {
				return nil, cli.Usagef("config catalog %q: warehouseDir makes a local catalog and takes no other property", name)
			}
			out = append(out, flow.CatalogConfig{Name: name, WarehouseDir: dir})
			continue
		}
		out = append(out, flow.CatalogConfig{Name: name, Properties: maps.Clone(props), Secrets: maps.Clone(secrets)})
	}
	if len(secrets) > 0 && !slices.ContainsFunc(out, func(c flow.CatalogConfig) bool { return c.WarehouseDir == "" }) {
		return nil, cli.Usagef("config: ircAuth.* is set but no catalog with properties is configured (%scatalog.NAME.uri = …)", configPrefix)
	}
	return out, nil
}

// gravitinoAuthKeys are the keys of gravitinoAuth.*.
var gravitinoAuthKeys = []string{"authType", "user", "password", "oauth2ServerUri", "oauthTokenPath", "oauthCredential", "oauthScope"}

// gravitinoAuth returns the file's gravitinoAuth.* with its references
// resolved; an error names the key.
func (c *fileConfig) gravitinoAuth() (submit.GravitinoAuth, error) {
	var a submit.GravitinoAuth
	if c == nil {
		return a, nil
	}
	fields := map[string]*string{"authType": &a.Type, "user": &a.User, "password": &a.Password, "oauth2ServerUri": &a.OAuth2ServerURI,
		"oauthTokenPath": &a.OAuth2TokenPath, "oauthCredential": &a.OAuthCredential, "oauthScope": &a.OAuthScope}
	for k, v := range c.gravitino {
		if policy.IsCredentialKey(k) {
			var err error
			if v, err = secretref.Resolve(v); err != nil {
				return a, cli.Usagef("config key %sgravitinoAuth.%s: %v", configPrefix, k, err)
			}
		}
		*fields[k] = v
	}
	return a, nil
}

// minIntervalsByType returns task.<type>.minIntervalMs from the file,
// overridden by --min-interval TYPE=DURATION flags.
func minIntervalsByType(c *fileConfig, fromFlags []string) (map[policy.Type]time.Duration, error) {
	out := map[policy.Type]time.Duration{}
	add := func(src, typ string, d time.Duration) error {
		ts, err := policy.ParseTypes(typ)
		if err != nil || len(ts) != 1 {
			return cli.Usagef("%s: unknown maintenance type %q", src, typ)
		}
		out[ts[0]] = d
		return nil
	}
	if c != nil {
		for t, d := range c.minInterval {
			if err := add("config key "+configPrefix+"task."+t+".minIntervalMs", t, d); err != nil {
				return nil, err
			}
		}
	}
	for _, kv := range fromFlags {
		t, v, ok := strings.Cut(kv, "=")
		d, err := time.ParseDuration(v)
		if !ok || err != nil || d < 0 {
			return nil, cli.Usagef("--min-interval %q: want TYPE=DURATION, e.g. compaction=2h", kv)
		}
		if err := add("--min-interval", t, d); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// mergeCatalogs adds the file's catalogs to the flags', refusing a name
// configured twice.
func mergeCatalogs(fromFlags, fromFile []flow.CatalogConfig) ([]flow.CatalogConfig, error) {
	out := slices.Clone(fromFlags)
	for _, c := range fromFile {
		if slices.ContainsFunc(out, func(o flow.CatalogConfig) bool { return o.Name == c.Name }) {
			return nil, cli.Usagef("catalog %q is configured both by flags and by the config file", c.Name)
		}
		if c.Name == catalogs.LocalName && c.WarehouseDir == "" {
			return nil, cli.Usagef("config catalog %q: that name is the local warehouse catalog; give it warehouseDir", c.Name)
		}
		out = append(out, c)
	}
	return out, nil
}
