package config

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/tms-dev/tms/catalogs"
	"github.com/tms-dev/tms/coordinator/flow"
	"github.com/tms-dev/tms/coordinator/submit"
	"github.com/tms-dev/tms/internal/secretref"
	"github.com/tms-dev/tms/policy"
)

// Resolved are the settings of a Config that Resolve reads behind their
// references, and the others it derives.
type Resolved struct {
	// AdminToken, ReadToken and CommitToken are the HTTP API's tokens, ""
	// for none.
	AdminToken, ReadToken, CommitToken string
	// Catalogs are the flags' catalogs, then the file's, by name, with
	// their secrets: a file catalog with properties gets every IRCAuth.
	Catalogs []flow.CatalogConfig
	// GravitinoAuth is the gravitino submitter's identity, its credentials
	// read.
	GravitinoAuth submit.GravitinoAuth
	// MinInterval are the cooldowns by type (Cooldowns).
	MinInterval map[policy.Type]time.Duration
}

// Resolve reads every reference of c (Validate first: Resolve assumes its
// checks passed). A reference that cannot be read is a Problem naming its
// key or flag; the secret never appears in it.
func (c *Config) Resolve() (*Resolved, error) {
	r := &Resolved{}
	tokens := []*string{&r.AdminToken, &r.ReadToken, &r.CommitToken}
	for i, ref := range c.tokenRefs() {
		if ref == "" {
			continue
		}
		v, err := secretref.Resolve(ref)
		if err != nil {
			if c.fromFile(tokenFlags[i]) {
				return nil, c.flagAt(tokenFlags[i], "%v", err)
			}
			return nil, flagProblem("--%s: %v", tokenFlags[i], err)
		}
		*tokens[i] = v
	}
	if c.WarehouseDir != "" {
		r.Catalogs = append(r.Catalogs, flow.CatalogConfig{Name: catalogs.LocalName, WarehouseDir: c.WarehouseDir})
	}
	if c.CatalogName != "" && (len(c.CatalogProps) > 0 || len(c.CatalogSecrets) > 0) {
		props, err := catalogs.ParseProps(c.CatalogProps)
		if err != nil {
			return nil, flagProblem("%v", err)
		}
		secrets := map[string]string{}
		for _, kv := range c.CatalogSecrets {
			k, ref, _ := strings.Cut(kv, "=")
			v, err := secretref.Resolve(ref)
			if err != nil {
				return nil, flagProblem("--catalog-secret %s: %v", k, err)
			}
			secrets[k] = v
		}
		r.Catalogs = append(r.Catalogs, flow.CatalogConfig{Name: c.CatalogName, Properties: props, Secrets: secrets})
	}
	secrets := map[string]string{}
	for _, k := range slices.Sorted(maps.Keys(c.IRCAuth)) {
		v, err := secretref.Resolve(c.IRCAuth[k])
		if err != nil {
			return nil, c.file.at(Prefix+"ircAuth."+k, "%v", err)
		}
		secrets[k] = v
	}
	auth := map[string]string{}
	for _, k := range slices.Sorted(maps.Keys(c.GravitinoAuth)) {
		v := c.GravitinoAuth[k]
		if policy.IsCredentialKey(k) {
			var err error
			if v, err = secretref.Resolve(v); err != nil {
				return nil, c.file.at(Prefix+"gravitinoAuth."+k, "%v", err)
			}
		}
		auth[k] = v
	}
	r.GravitinoAuth = c.gravitinoAuth(auth)
	for _, name := range slices.Sorted(maps.Keys(c.FileCatalogs)) {
		props := c.FileCatalogs[name]
		if dir, ok := props["warehouseDir"]; ok {
			r.Catalogs = append(r.Catalogs, flow.CatalogConfig{Name: name, WarehouseDir: dir})
			continue
		}
		r.Catalogs = append(r.Catalogs, flow.CatalogConfig{Name: name, Properties: maps.Clone(props), Secrets: maps.Clone(secrets)})
	}
	var err error
	if r.MinInterval, err = Cooldowns(c.TaskMinIntervals, c.MinIntervalFlags); err != nil {
		return nil, err
	}
	return r, nil
}

// gravitinoAuth is the identity of gravitinoAuth.* values by key.
func (c *Config) gravitinoAuth(values map[string]string) submit.GravitinoAuth {
	var a submit.GravitinoAuth
	fields := map[string]*string{"authType": &a.Type, "user": &a.User, "password": &a.Password, "oauth2ServerUri": &a.OAuth2ServerURI,
		"oauthTokenPath": &a.OAuth2TokenPath, "oauthCredential": &a.OAuthCredential, "oauthScope": &a.OAuthScope}
	for k, v := range values {
		if p := fields[k]; p != nil {
			*p = v
		}
	}
	return a
}

// LocalConfig is the local submitter's configuration.
func (c *Config) LocalConfig(log *zap.Logger) submit.LocalConfig {
	return submit.LocalConfig{RunnerPath: c.RunnerPath, MaxRunning: c.MaxRunning, LogDir: c.LogDir, Log: log}
}

// CommandConfig is the command submitter's configuration: its commands'
// JSON argv decoded (Validate checked them).
func (c *Config) CommandConfig() (submit.CommandConfig, error) {
	cfg := submit.CommandConfig{IDRegex: c.SubmitIDRegex}
	for _, a := range []struct {
		flag, value string
		argv        *[]string
	}{{"submit-command", c.SubmitCommand, &cfg.Submit}, {"status-command", c.StatusCommand, &cfg.Status}, {"cancel-command", c.CancelCommand, &cfg.Cancel}} {
		if err := json.Unmarshal([]byte(a.value), a.argv); err != nil {
			return cfg, flagProblem("--%s: want a JSON array of strings such as [\"prog\", \"--job\", \"{{job_id}}\"]: %v", a.flag, err)
		}
	}
	return cfg, nil
}

// GravitinoConfig is the gravitino submitter's configuration with auth
// (Resolved.GravitinoAuth); the catalog credentials go to it as their
// references, which it passes on.
func (c *Config) GravitinoConfig(auth submit.GravitinoAuth) submit.GravitinoConfig {
	return submit.GravitinoConfig{URI: c.GravitinoURI, Metalake: c.GravitinoMetalake, JobTemplateName: c.GravitinoJobTemplate,
		Auth: auth, CatalogSecretRefs: maps.Clone(c.IRCAuth)}
}
