package config

import (
	"maps"
	"os"
	"strings"

	"github.com/spf13/pflag"
)

// EnvName is a flag's TMS_* variable: TMS_ and the flag name in capitals,
// dashes as underscores (--max-running: TMS_MAX_RUNNING).
func EnvName(flag string) string {
	return "TMS_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// Apply completes c once fs, on which RegisterFlags bound c, parsed the
// command line: it reads c.ConfigPath when set, then gives every flag the
// command line left unset its TMS_* variable (EnvName), else the file's
// value, else leaves its default; the file's catalogs, credential
// references and cooldowns fill the fields only the file sets. A file that
// does not parse, or a value its flag refuses, is Problems.
func (c *Config) Apply(fs *pflag.FlagSet) error {
	var f *File
	if c.ConfigPath != "" {
		var err error
		if f, err = ReadFile(c.ConfigPath); err != nil {
			return err
		}
	}
	return c.apply(fs, f, os.LookupEnv).Err()
}

// apply is Apply over a parsed file (nil: none) and an environment.
func (c *Config) apply(fs *pflag.FlagSet, f *File, lookupEnv func(string) (string, bool)) Problems {
	c.file, c.src, c.set = f, map[string]string{}, map[string]bool{}
	var probs Problems
	fs.VisitAll(func(fl *pflag.Flag) {
		if fl.Changed {
			c.set[fl.Name] = true
			return
		}
		if fl.Name == "config" { // TMS_CONFIG is its default
			return
		}
		env := EnvName(fl.Name)
		if v, ok := lookupEnv(env); ok {
			c.src[fl.Name] = env
			if fl.Name == "db" { // --db already defaults to TMS_DB
				return
			}
			if err := fs.Set(fl.Name, v); err != nil {
				probs = append(probs, flagProblem("%s: --%s %q: %v", env, fl.Name, v, err))
			}
			return
		}
		if f == nil {
			return
		}
		if v, ok := f.flags[fl.Name]; ok {
			if err := fs.Set(fl.Name, v); err != nil {
				probs = append(probs, f.at(FlagKey(fl.Name), "%v", err))
			}
		}
	})
	if f != nil {
		c.FileCatalogs = map[string]map[string]string{}
		for name, props := range f.catalogs {
			c.FileCatalogs[name] = maps.Clone(props)
		}
		c.IRCAuth, c.GravitinoAuth, c.TaskMinIntervals = maps.Clone(f.ircAuth), maps.Clone(f.gravitino), maps.Clone(f.minInterval)
	}
	return probs
}

// fromFile reports whether flag has the file's value: neither the command
// line nor its variable set it, and the file does.
func (c *Config) fromFile(flag string) bool {
	if c.file == nil || c.set[flag] || c.src[flag] != "" {
		return false
	}
	_, ok := c.file.flags[flag]
	return ok
}

// flagAt is a problem of flag's key in the file, at its line.
func (c *Config) flagAt(flag, format string, args ...any) Problem {
	return c.file.at(FlagKey(flag), format, args...)
}

// requiredBy is a problem of the file key of flag, which the file does not
// set, at the line of the file key of by.
func (c *Config) requiredBy(flag, by, format string, args ...any) Problem {
	return c.file.problem(c.file.Line(FlagKey(by)), FlagKey(flag), format, args...)
}
