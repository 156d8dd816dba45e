package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/spf13/pflag"

	"github.com/tms-dev/tms/coordinator/submit"
	"github.com/tms-dev/tms/store"
)

// submitterFlags choose and configure serve's job submitter
// (jobSubmitter.* in the config file).
type submitterFlags struct {
	kind                   string
	submit, status, cancel string
	idRegex                string
	gravitino              submit.GravitinoConfig
}

func (f *submitterFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.kind, "job-submitter", "local", "where jobs run: local (tms-runner as a child of this node), command (the submit/status/cancel commands) or gravitino (runs of a Gravitino job template) (jobSubmitter.type)")
	fs.StringVar(&f.submit, "submit-command", "", `command submitter: JSON array of argv strings that starts a job and prints its id, e.g. ["kubectl", "create", "job", "tms-{{job_id}}", …]; placeholders {{job_id}} {{fence}} {{ledger_url}} {{catalog_name}} {{table_identifier}} {{types}} (jobSubmitter.command.submit)`)
	fs.StringVar(&f.status, "status-command", "", "command submitter: JSON argv that prints queued|running|succeeded|failed|cancelled for {{external_id}}, or exits non-zero for unknown (jobSubmitter.command.status)")
	fs.StringVar(&f.cancel, "cancel-command", "", "command submitter: JSON argv that cancels {{external_id}} (jobSubmitter.command.cancel)")
	fs.StringVar(&f.gravitino.URI, "gravitino-uri", "", "gravitino submitter: Gravitino's base URI, http(s)://host:8090 (jobSubmitter.gravitino.uri)")
	fs.StringVar(&f.gravitino.Metalake, "gravitino-metalake", "", "gravitino submitter: the metalake holding the job template (jobSubmitter.gravitino.metalake)")
	fs.StringVar(&f.gravitino.JobTemplateName, "gravitino-job-template", "", "gravitino submitter: the registered job template each job runs, e.g. tms_runner (jobSubmitter.gravitino.jobTemplateName)")
	fs.StringVar(&f.idRegex, "submit-id-regex", "", "command submitter: the first capture group of this regex on the submit command's stdout is the job's id (default: the whole stdout, one token) (jobSubmitter.command.idRegex)")
}

// closer is a submitter serve stops at its graceful end.
type closer interface {
	submit.Submitter
	Close(ctx context.Context) error
}

// submitter builds the chosen submitter; local is configured by local,
// gravitino's auth and the catalog credentials' references come from the
// config file.
func (f *submitterFlags) submitter(local submit.LocalConfig, file *fileConfig) (closer, error) {
	others := map[string]map[string]string{
		"command":   {"--submit-command": f.submit, "--status-command": f.status, "--cancel-command": f.cancel, "--submit-id-regex": f.idRegex},
		"gravitino": {"--gravitino-uri": f.gravitino.URI, "--gravitino-metalake": f.gravitino.Metalake, "--gravitino-job-template": f.gravitino.JobTemplateName},
	}
	for kind, flags := range others {
		if kind == f.kind {
			continue
		}
		for _, name := range slices.Sorted(maps.Keys(flags)) {
			if flags[name] != "" {
				return nil, fmt.Errorf("%s is for --job-submitter %s, not %s", name, kind, f.kind)
			}
		}
	}
	switch f.kind {
	case "local":
		return submit.NewLocalSubmitter(local)
	case "command":
		cfg := submit.CommandConfig{IDRegex: f.idRegex, Log: local.Log}
		for _, a := range []struct {
			flag, value string
			argv        *[]string
		}{{"--submit-command", f.submit, &cfg.Submit}, {"--status-command", f.status, &cfg.Status}, {"--cancel-command", f.cancel, &cfg.Cancel}} {
			if a.value == "" {
				return nil, fmt.Errorf("%s is required with --job-submitter command", a.flag)
			}
			if err := json.Unmarshal([]byte(a.value), a.argv); err != nil {
				return nil, fmt.Errorf("%s: want a JSON array of strings such as [\"prog\", \"--job\", \"{{job_id}}\"]: %v", a.flag, err)
			}
		}
		return submit.NewCommandSubmitter(cfg)
	case "gravitino":
		cfg := f.gravitino
		cfg.Log = local.Log
		auth, err := file.gravitinoAuth()
		if err != nil {
			return nil, err
		}
		cfg.Auth = auth
		if file != nil {
			cfg.CatalogSecretRefs = maps.Clone(file.ircAuth)
		}
		return submit.NewGravitinoSubmitter(cfg)
	}
	return nil, fmt.Errorf("--job-submitter: unknown submitter %q; want local, command or gravitino", f.kind)
}

// claimedBy returns the gravitino submitter's ledger check: whether an
// external id is already an in-flight row's.
func claimedBy(st store.Store) func(ctx context.Context, id string) (bool, error) {
	return func(ctx context.Context, id string) (bool, error) {
		for after := int64(0); ; {
			jobs, err := st.ListInFlightJobs(ctx, after, 500)
			if err != nil {
				return false, err
			}
			for _, j := range jobs {
				if j.JobID == id {
					return true, nil
				}
				after = j.ID
			}
			if len(jobs) < 500 {
				return false, nil
			}
		}
	}
}
