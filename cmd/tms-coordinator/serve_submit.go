package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/spf13/pflag"

	"github.com/tms-dev/tms/coordinator/submit"
)

// submitterFlags choose and configure serve's job submitter
// (jobSubmitter.* in the config file).
type submitterFlags struct {
	kind                   string
	submit, status, cancel string
	idRegex                string
}

func (f *submitterFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.kind, "job-submitter", "local", "where jobs run: local (tms-runner as a child of this node) or command (the submit/status/cancel commands) (jobSubmitter.type)")
	fs.StringVar(&f.submit, "submit-command", "", `command submitter: JSON array of argv strings that starts a job and prints its id, e.g. ["kubectl", "create", "job", "tms-{{job_id}}", …]; placeholders {{job_id}} {{fence}} {{ledger_url}} {{catalog_name}} {{table_identifier}} {{types}} (jobSubmitter.command.submit)`)
	fs.StringVar(&f.status, "status-command", "", "command submitter: JSON argv that prints queued|running|succeeded|failed|cancelled for {{external_id}}, or exits non-zero for unknown (jobSubmitter.command.status)")
	fs.StringVar(&f.cancel, "cancel-command", "", "command submitter: JSON argv that cancels {{external_id}} (jobSubmitter.command.cancel)")
	fs.StringVar(&f.idRegex, "submit-id-regex", "", "command submitter: the first capture group of this regex on the submit command's stdout is the job's id (default: the whole stdout, one token) (jobSubmitter.command.idRegex)")
}

// closer is a submitter serve stops at its graceful end.
type closer interface {
	submit.Submitter
	Close(ctx context.Context) error
}

// submitter builds the chosen submitter; local is configured by local.
func (f *submitterFlags) submitter(local submit.LocalConfig) (closer, error) {
	switch f.kind {
	case "local":
		for name, v := range map[string]string{"--submit-command": f.submit, "--status-command": f.status, "--cancel-command": f.cancel, "--submit-id-regex": f.idRegex} {
			if v != "" {
				return nil, fmt.Errorf("%s is for --job-submitter command, not local", name)
			}
		}
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
	}
	return nil, fmt.Errorf("--job-submitter: unknown submitter %q; want local or command", f.kind)
}
