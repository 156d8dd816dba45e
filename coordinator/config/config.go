// Package config is the configuration of `tms-coordinator serve`: the
// typed Config, its flags, and the configuration file of
// gravitino.maintenance.* keys (see Parse for its syntax). A flag on the
// command line wins over its TMS_* environment variable (TMS_ and the flag
// name in capitals, dashes as underscores), which wins over the file
// (Config.Apply).
//
// The package reads and checks; it opens and starts nothing. Credentials
// are never values: they are env:NAME or file:PATH references, which only
// Config.Resolve reads; Parse, Validate and Check never do, so a file can be
// checked where its secrets are absent (`tms-coordinator config check`).
// Every error caused by the configuration is a Problem, or Problems, and
// matches invalid.ErrArgument.
package config

import (
	"os"
	"time"

	"github.com/spf13/pflag"

	"github.com/tms-dev/tms/coordinator/flow"
	"github.com/tms-dev/tms/coordinator/httpapi"
	"github.com/tms-dev/tms/coordinator/ingress"
	"github.com/tms-dev/tms/coordinator/scheduler"
	"github.com/tms-dev/tms/coordinator/submit"
	"github.com/tms-dev/tms/policy"
)

// Defaults that no other package owns.
const (
	// DefaultDB is the ledger of a single node without --db or TMS_DB: an
	// embedded SQLite file in the working directory.
	DefaultDB = "sqlite://./tms.db"
	// DefaultCronThreads is the threads of the cron-job pool.
	DefaultCronThreads = 8
	// DefaultJobSubmitter is the submitter without --job-submitter.
	DefaultJobSubmitter = "local"
)

// DBFromEnv is --db's default: TMS_DB when it is set and not empty, else
// DefaultDB.
func DBFromEnv() string {
	if v := os.Getenv("TMS_DB"); v != "" {
		return v
	}
	return DefaultDB
}

// Config is every setting of serve. Each field's comment gives its file
// key (under Prefix), its flag and its default; a flag's TMS_* variable is
// not repeated. RegisterFlags binds the flags to the fields with those
// defaults, and Apply fills in what the command line left unset.
type Config struct {
	// ConfigPath is the configuration file. Flag --config, env TMS_CONFIG
	// (no TMS_* variable otherwise: it is the flag's default). Default: none.
	ConfigPath string

	// DB is the ledger database URL, postgres://… (several nodes) or
	// sqlite://PATH (one node). Key db, flag --db. Default DBFromEnv():
	// TMS_DB, else DefaultDB (sqlite://./tms.db).
	DB string
	// WarehouseDir is a local testdata-style catalog folder, known as
	// catalog "local" (catalogs.LocalName). Key warehouseDir, flag
	// --warehouse-dir. Default: none.
	WarehouseDir string
	// CatalogName names the catalog of CatalogProps and CatalogSecrets.
	// Flag --catalog (the file names its catalogs in their keys). Default:
	// none.
	CatalogName string
	// CatalogProps are that catalog's non-secret iceberg-go properties,
	// key=value. Flag --catalog-prop, repeatable. Default: none.
	CatalogProps []string
	// CatalogSecrets are that catalog's credential properties,
	// key=env:NAME or key=file:PATH. Flag --catalog-secret, repeatable.
	// Default: none.
	CatalogSecrets []string
	// FileCatalogs are the file's catalogs by name, their properties by
	// key: keys catalog.NAME.PROPERTY. A warehouseDir property makes a
	// local catalog, which takes no other property. File only.
	FileCatalogs map[string]map[string]string
	// IRCAuth are the catalog client's credentials, property → env:NAME or
	// file:PATH reference, given to every catalog of FileCatalogs
	// configured with properties: keys ircAuth.PROPERTY. File only.
	IRCAuth map[string]string
	// GravitinoAuth is the gravitino submitter's identity, by key (see
	// GravitinoAuthKeys); password and oauthCredential are references:
	// keys gravitinoAuth.KEY. File only.
	GravitinoAuth map[string]string

	// CommitDelay is how long a commit-job waits for more commits to its
	// table. Key commit.coalesceDelayMs, flag --commit-delay. Default
	// flow.DefaultCommitDelay (2s); negative: none.
	CommitDelay time.Duration

	// Listen is the HTTP API's address; "off" disables it. Key
	// http.listen, flag --listen. Default httpapi.DefaultListen
	// (127.0.0.1:8090).
	Listen string
	// AdminToken is the /v1 resources' bearer token, a reference. Key
	// http.adminToken, flag --admin-token. Default: none (/v1 answers 403).
	AdminToken string
	// ReadToken is the read-only bearer token of GET /v1/…, a reference.
	// Key http.readToken, flag --read-token. Default: none.
	ReadToken string
	// CommitToken is POST /v1/commit-events' bearer token, a reference
	// (the admin token works too). Key http.commitToken, flag
	// --commit-token. Default: none.
	CommitToken string

	// WatchInterval is how often the catalog watcher polls the tables of
	// onCommit policies. Key watcher.intervalMs, flag --watch-interval.
	// Default 0: no watcher.
	WatchInterval time.Duration
	// WatchConcurrency is the table loads one watcher poll runs at once.
	// Key watcher.concurrency, flag --watch-concurrency. Default
	// ingress.DefaultWatchConcurrency (8).
	WatchConcurrency int
	// CatalogNotify listens for the commits the catalog trigger NOTIFYs
	// (PostgreSQL only). Key catalogNotify.enabled, flag --catalog-notify.
	// Default false.
	CatalogNotify bool
	// CatalogNotifyDB is the catalog's PostgreSQL URL. Flag
	// --catalog-notify-db. Default: DB.
	CatalogNotifyDB string
	// CatalogNotifySchema is the schema of iceberg_tables. Flag
	// --catalog-notify-schema. Default: that URL's current schema.
	CatalogNotifySchema string

	// MinIntervalFlags are --min-interval TYPE=DURATION values, which win
	// over TaskMinIntervals. Flag --min-interval, repeatable. Default: none.
	MinIntervalFlags []string
	// TaskMinIntervals is a type's cooldown when its policy sets none.
	// Keys task.TYPE.minIntervalMs. File only (see MinIntervalFlags).
	TaskMinIntervals map[policy.Type]time.Duration

	// ExpandThreads are the threads of the policy-expand pool. Key
	// scheduler.expand.threads, flag --expand-threads. Default
	// scheduler.DefaultThreads (4).
	ExpandThreads int
	// CronThreads are the threads of the cron-job pool. Key
	// scheduler.cron.threads, flag --cron-threads. Default
	// DefaultCronThreads (8).
	CronThreads int
	// CommitThreads are the threads of the commit-job pool. Key
	// scheduler.commit.threads, flag --commit-threads. Default
	// scheduler.DefaultThreads (4).
	CommitThreads int

	// RunnerPath is the tms-runner binary of the local submitter. Key
	// runner.path, flag --runner. Default: next to this binary, else on
	// PATH.
	RunnerPath string
	// MaxRunning is the runners the local submitter runs at once. Key
	// jobSubmitter.local.maxRunning, flag --max-running. Default
	// submit.DefaultLocalMaxRunning (4).
	MaxRunning int
	// LogDir is the folder of the local submitter's per-job runner logs.
	// Key jobSubmitter.local.logDir, flag --log-dir. Default ./tms-logs
	// (submit.DefaultLocalLogDir).
	LogDir string
	// NodeID is this node's id. Key node.id, flag --node-id. Default
	// host-pid-random.
	NodeID string

	// JobSubmitter is where jobs run: local, command or gravitino. Key
	// jobSubmitter.type, flag --job-submitter. Default DefaultJobSubmitter
	// (local).
	JobSubmitter string
	// SubmitCommand is the command submitter's JSON argv that starts a job
	// and prints its id. Key jobSubmitter.command.submit, flag
	// --submit-command. Default: none.
	SubmitCommand string
	// StatusCommand is the command submitter's JSON argv that prints a
	// job's state. Key jobSubmitter.command.status, flag --status-command.
	// Default: none.
	StatusCommand string
	// CancelCommand is the command submitter's JSON argv that cancels a
	// job. Key jobSubmitter.command.cancel, flag --cancel-command. Default:
	// none.
	CancelCommand string
	// SubmitIDRegex picks the job's id out of the submit command's stdout
	// (its first capture group). Key jobSubmitter.command.idRegex, flag
	// --submit-id-regex. Default: the whole stdout, one token.
	SubmitIDRegex string
	// GravitinoURI is Gravitino's base URI, http(s)://host:8090. Key
	// jobSubmitter.gravitino.uri, flag --gravitino-uri. Default: none.
	GravitinoURI string
	// GravitinoMetalake is the metalake holding the job template. Key
	// jobSubmitter.gravitino.metalake, flag --gravitino-metalake. Default:
	// none.
	GravitinoMetalake string
	// GravitinoJobTemplate is the registered job template each job runs.
	// Key jobSubmitter.gravitino.jobTemplateName, flag
	// --gravitino-job-template. Default: none.
	GravitinoJobTemplate string

	// ExpandBatch is the cron-job rows one policy-expand pick enqueues.
	// Key expand.enqueueBatchSize, flag --expand-batch. Default
	// flow.DefaultEnqueueBatchSize (100).
	ExpandBatch int
	// PollInterval is how often idle pools look for due tasks. Key
	// scheduler.pollIntervalMs, flag --poll-interval. Default
	// scheduler.DefaultPollInterval (10s).
	PollInterval time.Duration
	// HeartbeatInterval is the node and claim heartbeat interval. Key
	// scheduler.heartbeatIntervalMs, flag --heartbeat-interval. Default
	// scheduler.DefaultHeartbeatInterval (60s).
	HeartbeatInterval time.Duration
	// ReconcileInterval is how often the reconciler sweeps in-flight jobs.
	// Key reconciler.intervalMs, flag --reconcile-interval. Default
	// flow.DefaultReconcileInterval (1m).
	ReconcileInterval time.Duration

	file *File             // the file Apply read; nil without one
	src  map[string]string // flag name → the TMS_* variable that set it
	set  map[string]bool   // flags set on the command line
}

// RegisterFlowFlags binds the flags of the commands that run or feed the
// flow (serve, enqueue-commit): --db, --warehouse-dir, --catalog,
// --catalog-prop, --catalog-secret and --commit-delay.
func (c *Config) RegisterFlowFlags(fs *pflag.FlagSet) {
	fs.StringVar(&c.DB, "db", DBFromEnv(), "database URL: postgres://… or sqlite://PATH (env TMS_DB)")
	fs.StringVar(&c.WarehouseDir, "warehouse-dir", "", "local testdata-style catalog folder, known as catalog \"local\"")
	fs.StringVar(&c.CatalogName, "catalog", "", "name of the catalog given by --catalog-prop")
	fs.StringArrayVar(&c.CatalogProps, "catalog-prop", nil, "non-secret iceberg-go catalog property key=value (repeatable)")
	fs.StringArrayVar(&c.CatalogSecrets, "catalog-secret", nil, "credential catalog property key=env:NAME or key=file:PATH (repeatable); passed to runners through their environment only")
	fs.DurationVar(&c.CommitDelay, "commit-delay", flow.DefaultCommitDelay, "how long a commit-job waits for more commits to the table")
}

// RegisterFlags binds every flag of serve to c, with its default.
func (c *Config) RegisterFlags(fs *pflag.FlagSet) {
	c.RegisterFlowFlags(fs)
	fs.StringVar(&c.Listen, "listen", httpapi.DefaultListen, `address of the HTTP API (/healthz, /readyz, /metrics, /v1/…); "off" disables it`)
	fs.StringVar(&c.AdminToken, "admin-token", "", "bearer token of the /v1 resources, env:NAME or file:PATH (none: /v1 resources answer 403)")
	fs.StringVar(&c.ReadToken, "read-token", "", "optional read-only bearer token for GET /v1/…, env:NAME or file:PATH")
	fs.StringVar(&c.CommitToken, "commit-token", "", "bearer token of POST /v1/commit-events, env:NAME or file:PATH (the admin token works too)")
	fs.DurationVar(&c.WatchInterval, "watch-interval", 0, "poll the catalogs of tables with an onCommit policy this often, e.g. 60s (0: off)")
	fs.IntVar(&c.WatchConcurrency, "watch-concurrency", ingress.DefaultWatchConcurrency, "table loads one catalog-watcher poll runs at once")
	fs.BoolVar(&c.CatalogNotify, "catalog-notify", false, "listen for commits NOTIFYed by the catalog trigger (tms-coordinator migrate --catalog-trigger)")
	fs.StringVar(&c.CatalogNotifyDB, "catalog-notify-db", "", "PostgreSQL URL of the catalog's database (default: --db)")
	fs.StringVar(&c.CatalogNotifySchema, "catalog-notify-schema", "", "schema of iceberg_tables (default: that URL's current schema)")
	fs.StringVar(&c.ConfigPath, "config", os.Getenv("TMS_CONFIG"), "configuration file of "+Prefix+"* keys (env TMS_CONFIG); flags and TMS_* variables win over it")
	fs.StringArrayVar(&c.MinIntervalFlags, "min-interval", nil, "TYPE=DURATION: a type's cooldown when its policy sets no minIntervalMs (task.<type>.minIntervalMs; repeatable)")
	fs.IntVar(&c.ExpandThreads, "expand-threads", scheduler.DefaultThreads, "threads of the policy-expand pool")
	fs.IntVar(&c.CronThreads, "cron-threads", DefaultCronThreads, "threads of the cron-job pool")
	fs.IntVar(&c.CommitThreads, "commit-threads", scheduler.DefaultThreads, "threads of the commit-job pool")
	fs.StringVar(&c.RunnerPath, "runner", "", "tms-runner binary (default: next to this binary, else on PATH)")
	fs.IntVar(&c.MaxRunning, "max-running", submit.DefaultLocalMaxRunning, "runners running at once on this node")
	fs.StringVar(&c.LogDir, "log-dir", "./"+submit.DefaultLocalLogDir, "folder of the per-job runner logs")
	fs.StringVar(&c.NodeID, "node-id", "", "this node's id (default: host-pid-random)")
	fs.StringVar(&c.JobSubmitter, "job-submitter", DefaultJobSubmitter, "where jobs run: local (tms-runner as a child of this node), command (the submit/status/cancel commands) or gravitino (runs of a Gravitino job template) (jobSubmitter.type)")
	fs.StringVar(&c.SubmitCommand, "submit-command", "", `command submitter: JSON array of argv strings that starts a job and prints its id, e.g. ["kubectl", "create", "job", "tms-{{job_id}}", …]; placeholders {{job_id}} {{fence}} {{ledger_url}} {{catalog_name}} {{table_identifier}} {{types}} (jobSubmitter.command.submit)`)
	fs.StringVar(&c.StatusCommand, "status-command", "", "command submitter: JSON argv that prints queued|running|succeeded|failed|cancelled for {{external_id}}, or exits non-zero for unknown (jobSubmitter.command.status)")
	fs.StringVar(&c.CancelCommand, "cancel-command", "", "command submitter: JSON argv that cancels {{external_id}} (jobSubmitter.command.cancel)")
	fs.StringVar(&c.GravitinoURI, "gravitino-uri", "", "gravitino submitter: Gravitino's base URI, http(s)://host:8090 (jobSubmitter.gravitino.uri)")
	fs.StringVar(&c.GravitinoMetalake, "gravitino-metalake", "", "gravitino submitter: the metalake holding the job template (jobSubmitter.gravitino.metalake)")
	fs.StringVar(&c.GravitinoJobTemplate, "gravitino-job-template", "", "gravitino submitter: the registered job template each job runs, e.g. tms_runner (jobSubmitter.gravitino.jobTemplateName)")
	fs.StringVar(&c.SubmitIDRegex, "submit-id-regex", "", "command submitter: the first capture group of this regex on the submit command's stdout is the job's id (default: the whole stdout, one token) (jobSubmitter.command.idRegex)")
	fs.IntVar(&c.ExpandBatch, "expand-batch", flow.DefaultEnqueueBatchSize, "cron-job rows one policy-expand pick enqueues (expand.enqueueBatchSize)")
	fs.DurationVar(&c.PollInterval, "poll-interval", scheduler.DefaultPollInterval, "how often idle pools look for due tasks")
	fs.DurationVar(&c.HeartbeatInterval, "heartbeat-interval", scheduler.DefaultHeartbeatInterval, "node and claim heartbeat interval")
	fs.DurationVar(&c.ReconcileInterval, "reconcile-interval", flow.DefaultReconcileInterval, "how often the reconciler sweeps in-flight jobs")
}

// File is the configuration file Apply read, nil without one.
func (c *Config) File() *File { return c.file }
