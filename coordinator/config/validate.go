package config

import (
	"cmp"
	"context"
	"encoding/json"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/tms-dev/tms/catalogs"
	"github.com/tms-dev/tms/coordinator/submit"
	"github.com/tms-dev/tms/internal/secretref"
	"github.com/tms-dev/tms/policy"
)

// Check reads the configuration file at path as `serve --config path`
// would with no other flag and no TMS_* variable, and returns the file
// (nil when it cannot be read) and every problem serve would refuse it
// for before it opens the database: the file's syntax, unknown and
// duplicate keys, values their flags refuse, credentials in clear,
// catalogs that cannot be opened, submitters that cannot be built. It
// reads no reference: a variable or file behind one need not exist here.
// Problems come in line order, those of the whole file last.
func Check(path string) (*File, Problems) {
	r, err := os.Open(path)
	if err != nil {
		return nil, Problems{{File: path, Msg: err.Error()}}
	}
	defer r.Close()
	f, err := Parse(r, path)
	var probs Problems
	if err != nil {
		probs = err.(Problems)
	}
	fs := pflag.NewFlagSet("check", pflag.ContinueOnError)
	c := &Config{}
	c.RegisterFlags(fs)
	c.DB, c.ConfigPath = DefaultDB, path // as without TMS_DB and TMS_CONFIG
	probs = append(probs, c.apply(fs, f, func(string) (string, bool) { return "", false })...)
	probs = append(probs, c.Validate()...)
	for i := range probs {
		probs[i].File = path // also a problem no line holds
	}
	const last = int(^uint(0) >> 1)
	slices.SortStableFunc(probs, func(a, b Problem) int { return cmp.Compare(cmp.Or(a.Line, last), cmp.Or(b.Line, last)) })
	return f, probs
}

// Validate returns every problem of c that serve refuses before it opens
// anything, without reading a reference (Resolve reads them). A problem of
// a value from the file names its key and line, one from a flag or a
// variable names the flag.
func (c *Config) Validate() Problems {
	var probs Problems
	add := func(p ...Problem) { probs = append(probs, p...) }
	add(c.checkIngress()...)
	add(c.checkTokens()...)
	add(c.checkCatalogs()...)
	if _, err := Cooldowns(nil, c.MinIntervalFlags); err != nil {
		add(err.(Problem))
	}
	add(c.checkRanges()...)
	add(c.checkSubmitter()...)
	return probs
}

func (c *Config) checkIngress() Problems {
	var probs Problems
	if c.CatalogNotify && strings.HasPrefix(cmp.Or(c.CatalogNotifyDB, c.DB), "sqlite") {
		if c.fromFile("catalog-notify") {
			probs = append(probs, c.flagAt("catalog-notify", "needs the catalog's PostgreSQL database (--catalog-notify-db postgres://…); with SQLite use %swatcher.intervalMs", Prefix))
		} else {
			probs = append(probs, flagProblem("--catalog-notify needs the catalog's PostgreSQL database (--catalog-notify-db postgres://…); with SQLite use --watch-interval"))
		}
	}
	if c.WatchInterval < 0 || c.WatchConcurrency < 1 {
		if c.fromFile("watch-concurrency") && c.WatchInterval >= 0 {
			probs = append(probs, c.flagAt("watch-concurrency", "must be positive, got %d", c.WatchConcurrency))
		} else {
			probs = append(probs, flagProblem("--watch-interval must not be negative and --watch-concurrency must be positive"))
		}
	}
	return probs
}

// tokenFlags are the HTTP API's token flags, admin, read, commit.
var tokenFlags = []string{"admin-token", "read-token", "commit-token"}

func (c *Config) tokenRefs() []string { return []string{c.AdminToken, c.ReadToken, c.CommitToken} }

func (c *Config) checkTokens() Problems {
	var probs Problems
	for i, ref := range c.tokenRefs() {
		if ref == "" {
			continue
		}
		if err := secretref.Check(ref); err != nil {
			if c.fromFile(tokenFlags[i]) {
				probs = append(probs, c.flagAt(tokenFlags[i], "a credential must be a reference, env:NAME or file:PATH, never the secret itself"))
			} else {
				probs = append(probs, flagProblem("--%s: %v", tokenFlags[i], err))
			}
		}
	}
	return probs
}

// flagCatalogs are the names of the catalogs the flags configure, with
// the flag that names each.
func (c *Config) flagCatalogs() map[string]string {
	out := map[string]string{}
	if c.WarehouseDir != "" {
		out[catalogs.LocalName] = "warehouse-dir"
	}
	if c.CatalogName != "" && (len(c.CatalogProps) > 0 || len(c.CatalogSecrets) > 0) {
		out[c.CatalogName] = "catalog"
	}
	return out
}

func (c *Config) checkCatalogs() Problems {
	var probs Problems
	add := func(p Problem) { probs = append(probs, p) }
	// The catalog of --catalog, --catalog-prop and --catalog-secret.
	switch {
	case len(c.CatalogProps) == 0 && len(c.CatalogSecrets) == 0:
		if c.CatalogName != "" {
			add(flagProblem("--catalog %q needs --catalog-prop", c.CatalogName))
		}
	case c.CatalogName == "":
		add(flagProblem("--catalog NAME is required with --catalog-prop and --catalog-secret"))
	default:
		props, err := catalogs.ParseProps(c.CatalogProps)
		if err != nil {
			add(flagProblem("%v", err))
			break
		}
		for _, kv := range c.CatalogSecrets {
			k, ref, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				add(flagProblem("--catalog-secret %q: want key=env:NAME or key=file:PATH", k))
			} else if err := secretref.Check(ref); err != nil {
				add(flagProblem("--catalog-secret %s: %v", k, err))
			}
		}
		if err := catalogs.CheckProps(c.CatalogName, props); err != nil {
			add(flagProblem("%v", err))
		}
		for _, k := range slices.Sorted(maps.Keys(props)) {
			if policy.IsCredentialKey(k) {
				add(flagProblem("--catalog-prop %s: catalog %q: property %q is a credential; give it as --catalog-secret %s=env:NAME or file:PATH", k, c.CatalogName, k, k))
			}
		}
	}
	// The file's catalogs.
	f := c.file
	if f == nil {
		return probs
	}
	byFlags := c.flagCatalogs()
	withProps := false
	for _, name := range slices.Sorted(maps.Keys(c.FileCatalogs)) {
		props := c.FileCatalogs[name]
		first, line := f.catalogLine(name)
		key := func(prop string) string { return Prefix + "catalog." + name + "." + prop }
		if flag, dup := byFlags[name]; dup {
			if flag == "warehouse-dir" && c.fromFile(flag) {
				add(f.problem(line, first, "catalog %q is also configured by %swarehouseDir on line %d", name, Prefix, f.Line(FlagKey(flag))))
			} else {
				add(f.problem(line, first, "catalog %q is configured both by flags and by the config file", name))
			}
		}
		if _, local := props["warehouseDir"]; local {
			if len(props) > 1 {
				others := slices.DeleteFunc(slices.Sorted(maps.Keys(props)), func(p string) bool { return p == "warehouseDir" })
				add(f.at(key("warehouseDir"), "makes a local catalog, which takes no other property (catalog %q also has %s)", name, strings.Join(others, ", ")))
			}
			continue
		}
		withProps = true
		if name == catalogs.LocalName {
			add(f.problem(line, first, "catalog %q is the local warehouse catalog; give it warehouseDir", name))
			continue
		}
		if catalogs.CheckProps(name, props) != nil {
			add(f.problem(line, key("type"), "catalog %q has neither type nor uri: give its type, e.g. %s = rest", name, key("type")))
		}
		for _, p := range slices.Sorted(maps.Keys(props)) {
			if policy.IsCredentialKey(p) {
				add(f.at(key(p), "property %q is a credential: give it as %sircAuth.%s = env:NAME or file:PATH", p, Prefix, p))
			}
		}
	}
	if len(c.IRCAuth) > 0 && !withProps {
		first, line := f.firstLine("ircAuth.")
		add(f.problem(line, first, "ircAuth.* is set but no catalog with properties is configured (%scatalog.NAME.uri = …)", Prefix))
	}
	return probs
}

func (c *Config) checkRanges() Problems {
	var probs Problems
	atLeast := func(flag string, v, least int) {
		if v >= least {
			return
		}
		if c.fromFile(flag) {
			probs = append(probs, c.flagAt(flag, "must be at least %d, got %d", least, v))
		} else {
			probs = append(probs, flagProblem("--%s must be at least %d, got %d", flag, least, v))
		}
	}
	atLeast("expand-threads", c.ExpandThreads, 1)
	atLeast("cron-threads", c.CronThreads, 1)
	atLeast("commit-threads", c.CommitThreads, 1)
	atLeast("expand-batch", c.ExpandBatch, 0) // 0: the default
	atLeast("max-running", c.MaxRunning, 0)   // 0: the default
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"poll-interval", c.PollInterval}, {"heartbeat-interval", c.HeartbeatInterval}, {"reconcile-interval", c.ReconcileInterval}} {
		if d.v < 0 { // a file's milliseconds are never negative
			probs = append(probs, flagProblem("--%s must not be negative, got %s", d.flag, d.v))
		}
	}
	return probs
}

// submitterFlags are the flags of each submitter but local, sorted.
var submitterFlags = map[string][]string{
	"command":   {"cancel-command", "status-command", "submit-command", "submit-id-regex"},
	"gravitino": {"gravitino-job-template", "gravitino-metalake", "gravitino-uri"},
}

func (c *Config) submitterValue(flag string) string {
	return map[string]string{
		"submit-command": c.SubmitCommand, "status-command": c.StatusCommand, "cancel-command": c.CancelCommand,
		"submit-id-regex": c.SubmitIDRegex, "gravitino-uri": c.GravitinoURI, "gravitino-metalake": c.GravitinoMetalake,
		"gravitino-job-template": c.GravitinoJobTemplate,
	}[flag]
}

func (c *Config) checkSubmitter() Problems {
	var probs Problems
	add := func(p Problem) { probs = append(probs, p) }
	kind := c.JobSubmitter
	if kind != "local" && kind != "command" && kind != "gravitino" {
		if c.fromFile("job-submitter") {
			add(c.flagAt("job-submitter", "unknown submitter %q; want local, command or gravitino", kind))
		} else {
			add(flagProblem("--job-submitter: unknown submitter %q; want local, command or gravitino", kind))
		}
		return probs
	}
	for _, other := range slices.Sorted(maps.Keys(submitterFlags)) {
		if other == kind {
			continue
		}
		for _, flag := range submitterFlags[other] {
			if c.submitterValue(flag) == "" {
				continue
			}
			if c.fromFile(flag) {
				add(c.flagAt(flag, "is for %sjobSubmitter.type %s, not %s", Prefix, other, kind))
			} else {
				add(flagProblem("--%s is for --job-submitter %s, not %s", flag, other, kind))
			}
		}
	}
	switch kind {
	case "command":
		ok := true
		for _, flag := range []string{"submit-command", "status-command", "cancel-command"} {
			v := c.submitterValue(flag)
			var err error
			if v != "" {
				err = json.Unmarshal([]byte(v), new([]string))
			}
			switch {
			case v == "" && c.fromFile("job-submitter"):
				add(c.requiredBy(flag, "job-submitter", "required with %sjobSubmitter.type command", Prefix))
			case v == "":
				add(flagProblem("--%s is required with --job-submitter command", flag))
			case err != nil:
				if c.fromFile(flag) {
					add(c.flagAt(flag, "want a JSON array of strings such as [\"prog\", \"--job\", \"{{job_id}}\"]: %v", err))
				} else {
					add(flagProblem("--%s: want a JSON array of strings such as [\"prog\", \"--job\", \"{{job_id}}\"]: %v", flag, err))
				}
			default:
				continue
			}
			ok = false
		}
		if !ok {
			break
		}
		cfg, _ := c.CommandConfig()
		s, err := submit.NewCommandSubmitter(cfg)
		if err != nil {
			add(c.constructorProblem(err, map[string]string{"submit command": "submit-command", "status command": "status-command",
				"cancel command": "cancel-command", "idRegex": "submit-id-regex"}))
			break
		}
		_ = s.Close(context.Background())
	case "gravitino":
		// The credentials are not read: their references stand in, which
		// is enough for every check but the secrets' own.
		s, err := submit.NewGravitinoSubmitter(c.GravitinoConfig(c.gravitinoAuth(c.GravitinoAuth)))
		if err != nil {
			by := map[string]string{"jobSubmitter.gravitino.uri": "gravitino-uri", "jobSubmitter.gravitino.metalake": "gravitino-metalake",
				"jobSubmitter.gravitino.jobTemplateName": "gravitino-job-template"}
			add(c.constructorProblem(err, by))
			break
		}
		_ = s.Close(context.Background())
	}
	return probs
}

// constructorProblem places a submitter's refusal: at the key its message
// names (by: a text of the message → the flag), or the gravitinoAuth key
// it names, or at jobSubmitter.type; as it is for flags.
func (c *Config) constructorProblem(err error, by map[string]string) Problem {
	f := c.file
	if f == nil {
		return flagProblem("%v", err)
	}
	msg := err.Error()
	for _, text := range slices.Sorted(maps.Keys(by)) {
		if flag := by[text]; strings.Contains(msg, text) {
			switch {
			case c.fromFile(flag):
				return c.flagAt(flag, "%v", err)
			case c.fromFile("job-submitter") && c.submitterValue(flag) == "":
				return c.requiredBy(flag, "job-submitter", "%v", err)
			}
			return flagProblem("%v", err)
		}
	}
	for _, k := range GravitinoAuthKeys {
		if key := Prefix + "gravitinoAuth." + k; strings.Contains(msg, "gravitinoAuth."+k) {
			if f.Line(key) > 0 {
				return f.at(key, "%v", err)
			}
			if _, line := f.firstLine("gravitinoAuth."); line > 0 {
				return f.problem(line, key, "%v", err)
			}
		}
	}
	if c.fromFile("job-submitter") {
		return c.flagAt("job-submitter", "%v", err)
	}
	return flagProblem("%v", err)
}

// Cooldowns are the cooldowns by type of a file's task.TYPE.minIntervalMs
// (fromFile, which Parse checked), overridden by --min-interval
// TYPE=DURATION values. An error is a Problem of --min-interval.
func Cooldowns(fromFile map[policy.Type]time.Duration, fromFlags []string) (map[policy.Type]time.Duration, error) {
	out := maps.Clone(fromFile)
	if out == nil {
		out = map[policy.Type]time.Duration{}
	}
	for _, kv := range fromFlags {
		t, v, ok := strings.Cut(kv, "=")
		d, err := time.ParseDuration(v)
		if !ok || err != nil || d < 0 {
			return nil, flagProblem("--min-interval %q: want TYPE=DURATION, e.g. compaction=2h", kv)
		}
		ts, err := policy.ParseTypes(t)
		if err != nil || len(ts) != 1 {
			return nil, flagProblem("--min-interval: unknown maintenance type %q", t)
		}
		out[ts[0]] = d
	}
	return out, nil
}
