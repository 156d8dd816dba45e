package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/tms-dev/tms/coordinator/admin"
	"github.com/tms-dev/tms/coordinator/scheduler"
	"github.com/tms-dev/tms/internal/cli"
	"github.com/tms-dev/tms/policy"
	"github.com/tms-dev/tms/store"
)

// This file is `tms-coordinator policy …`: create, alter, enable, disable
// and delete policies, attach and detach them, list and show them, and show
// the policies in force for a table. Every input is validated before the
// database is opened, so bad input writes nothing and exits 2 with a message
// naming the flag or the content field. The operations themselves, their
// validation and the policy-expand row kept in step, are
// admin.PolicyOps, which the HTTP API uses too; this file parses flags
// and prints.
//
// Objects are dotted names, CATALOG[.NAMESPACE[.TABLE]], read as
// admin.ParseObject says; --level namespace names a multi-level
// namespace (cat.a.b with --level namespace is namespace a.b).

const policyUsage = `usage: tms-coordinator policy COMMAND [flags]

commands:
  create   --name N --type TYPE --content-file F [--comment C] [--disabled]
  alter    --name N [--content-file F] [--comment C]
  enable   --name N
  disable  --name N
  delete   --name N
  attach   --name N --object CATALOG[.NAMESPACE[.TABLE]] [--level catalog|namespace|table]
  detach   --name N --object CATALOG[.NAMESPACE[.TABLE]] [--level catalog|namespace|table]
  list
  show     --name N | --effective CATALOG.NAMESPACE.TABLE

Every command takes --db URL (default sqlite://./tms.db, env TMS_DB) and --json.
TYPE is a Gravitino policy type (system_iceberg_compaction, system_iceberg_rewrite_position_deletes,
system_iceberg_rewrite_manifests, system_iceberg_snapshot_expiration, system_iceberg_orphan_file_removal)
or a maintenance type (compaction, delete-rewrite, manifest-rewrite, snapshot-expiry, orphan-cleanup).
The content file holds the
policy's content object: schedule {onCommit, crontab, timezone}, minIntervalMs, jobOptions,
rewriteOptions and the type's thresholds.
`

// policyCmd is one `policy` subcommand: its flags are added to fs, then run
// is called with the parsed flags' effect.
type policyCmd struct {
	flags func(fs *pflag.FlagSet, o *policyOpts)
	run   func(ctx context.Context, pc *policyCtx) error
}

// policyOpts holds every flag a policy subcommand may have.
type policyOpts struct {
	db, name, typ, contentFile, comment, object, level, effective string
	disabled, asJSON                                              bool
}

// policyCtx is what a subcommand runs with.
type policyCtx struct {
	env      cli.Env
	fs       *pflag.FlagSet
	opts     policyOpts
	catalogs admin.CatalogSet // set by open
}

var policyCommands = map[string]policyCmd{
	"create": {flags: func(fs *pflag.FlagSet, o *policyOpts) {
		nameFlag(fs, o)
		fs.StringVar(&o.typ, "type", "", "policy type: Gravitino's policyType or the maintenance type name (required)")
		fs.StringVar(&o.contentFile, "content-file", "", "JSON file with the policy content (required)")
		fs.StringVar(&o.comment, "comment", "", "free-text comment")
		fs.BoolVar(&o.disabled, "disabled", false, "create the policy disabled")
	}, run: policyCreate},
	"alter": {flags: func(fs *pflag.FlagSet, o *policyOpts) {
		nameFlag(fs, o)
		fs.StringVar(&o.contentFile, "content-file", "", "JSON file with the new content (a new version)")
		fs.StringVar(&o.comment, "comment", "", "new comment")
	}, run: policyAlter},
	"enable":  {flags: nameFlag, run: func(ctx context.Context, pc *policyCtx) error { return policySetEnabled(ctx, pc, true) }},
	"disable": {flags: nameFlag, run: func(ctx context.Context, pc *policyCtx) error { return policySetEnabled(ctx, pc, false) }},
	"delete":  {flags: nameFlag, run: policyDelete},
	"attach":  {flags: objectFlags, run: func(ctx context.Context, pc *policyCtx) error { return policyAttach(ctx, pc, true) }},
	"detach":  {flags: objectFlags, run: func(ctx context.Context, pc *policyCtx) error { return policyAttach(ctx, pc, false) }},
	"list":    {flags: func(*pflag.FlagSet, *policyOpts) {}, run: policyList},
	"show": {flags: func(fs *pflag.FlagSet, o *policyOpts) {
		fs.StringVar(&o.name, "name", "", "the policy to show")
		fs.StringVar(&o.effective, "effective", "", "show the policies in force for table CATALOG.NAMESPACE.TABLE")
	}, run: policyShow},
}

func nameFlag(fs *pflag.FlagSet, o *policyOpts) {
	fs.StringVar(&o.name, "name", "", "policy name (required)")
}

func objectFlags(fs *pflag.FlagSet, o *policyOpts) {
	nameFlag(fs, o)
	fs.StringVar(&o.object, "object", "", "CATALOG, CATALOG.NAMESPACE or CATALOG.NAMESPACE.TABLE (required)")
	fs.StringVar(&o.level, "level", "", "catalog, namespace or table; default: from the number of segments (1, 2, 3+)")
}

// runPolicy dispatches `tms-coordinator policy COMMAND`.
func runPolicy(ctx context.Context, env cli.Env) error {
	if len(env.Args) == 0 {
		fmt.Fprint(env.Stderr, policyUsage)
		return cli.Usagef("missing policy command")
	}
	sub := env.Args[0]
	if sub == "-h" || sub == "--help" || sub == "help" {
		_, err := fmt.Fprint(env.Stdout, policyUsage)
		return err
	}
	cmd, ok := policyCommands[sub]
	if !ok {
		fmt.Fprint(env.Stderr, policyUsage)
		return cli.Usagef("unknown policy command %q", sub)
	}
	pc := &policyCtx{env: env, fs: cli.NewFlags("tms-coordinator", "policy "+sub, env.Stderr)}
	pc.fs.StringVar(&pc.opts.db, "db", dbFromEnv(), "database URL: postgres://… or sqlite://PATH (env TMS_DB)")
	pc.fs.BoolVar(&pc.opts.asJSON, "json", false, "print JSON")
	cmd.flags(pc.fs, &pc.opts)
	if err := cli.Parse(pc.fs, env.Args[1:]); err != nil {
		return err
	}
	return cmd.run(ctx, pc)
}

// requireName checks --name before anything else happens.
func (pc *policyCtx) requireName() error {
	if !pc.fs.Changed("name") {
		return cli.Usagef("--name is required")
	}
	return flagError("--name", policy.ValidateName(pc.opts.name))
}

// open opens the store and the policy operations on it; the caller closes
// the store.
func (pc *policyCtx) open(ctx context.Context) (store.Store, *admin.PolicyOps, error) {
	s, err := store.Open(ctx, pc.opts.db, pc.env.Log)
	if err != nil {
		return nil, nil, classify(err)
	}
	ops, err := admin.NewPolicyOps(s, time.Now)
	if err != nil {
		_ = s.Close()
		return nil, nil, err
	}
	// Attachments are checked against the catalogs the live serve nodes
	// are configured with (each node says so at start).
	pc.catalogs = admin.LiveNodeCatalogs(s, defaultDeadAfter, time.Now)
	ops.CheckCatalogs(pc.catalogs)
	return s, ops, nil
}

// defaultDeadAfter is when a node counts as dead for the commands that
// read node liveness: serve's default heartbeat interval × missed limit.
const defaultDeadAfter = scheduler.DefaultHeartbeatInterval * scheduler.DefaultMissedHeartbeatsLimit

// flagError turns a validation error of the value of flag into a usage
// error that names the flag and keeps the message of the field.
func flagError(flag string, err error) error {
	if err == nil {
		return nil
	}
	var pe *policy.Error
	if errors.As(err, &pe) && (pe.Field == "name" || pe.Field == "policyType") {
		return cli.UsageError{Err: fmt.Errorf("%s: %s", flag, pe.Msg)}
	}
	return cli.UsageError{Err: fmt.Errorf("%s: %w", flag, err)}
}

// policyStoreError makes the answers to bad input (unknown policy, name
// taken, bad object) usage errors.
func policyStoreError(err error) error {
	if admin.IsInputError(err) {
		return cli.UsageError{Err: err}
	}
	return err
}

// contentError names --content-file in a content validation error.
func contentError(path string, err error) error {
	var pe *policy.Error
	if errors.As(err, &pe) {
		return cli.UsageError{Err: fmt.Errorf("--content-file %s: %w", path, err)}
	}
	return policyStoreError(err)
}

// readContent reads --content-file; Create and Alter validate it.
func readContent(path string) (json.RawMessage, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, cli.UsageError{Err: fmt.Errorf("--content-file: %w", err)}
	}
	return data, nil
}

func policyCreate(ctx context.Context, pc *policyCtx) error {
	if err := pc.requireName(); err != nil {
		return err
	}
	if !pc.fs.Changed("type") {
		return cli.Usagef("--type is required")
	}
	policyType, t, err := policy.ParsePolicyType(pc.opts.typ)
	if err != nil {
		return flagError("--type", err)
	}
	if pc.opts.contentFile == "" {
		return cli.Usagef("--content-file is required")
	}
	content, err := readContent(pc.opts.contentFile)
	if err != nil {
		return err
	}
	// Validated before the database is opened, so bad content writes nothing.
	if _, err := policy.ParseContent(t, content); err != nil {
		return contentError(pc.opts.contentFile, err)
	}
	s, ops, err := pc.open(ctx)
	if err != nil {
		return err
	}
	defer s.Close()
	enabled := !pc.opts.disabled
	p, err := ops.Create(ctx, policy.Document{
		Name: pc.opts.name, Comment: pc.opts.comment, PolicyType: policyType, Enabled: &enabled, Content: content,
	})
	if err != nil {
		return contentError(pc.opts.contentFile, err)
	}
	return pc.print(admin.PolicyDocOf(p, nil), "created policy %q (%s, version %d, %s)\n", p.Name, p.Type, p.Version, enabledWord(p.Enabled))
}

func policyAlter(ctx context.Context, pc *policyCtx) error {
	if err := pc.requireName(); err != nil {
		return err
	}
	if pc.opts.contentFile == "" && !pc.fs.Changed("comment") {
		return cli.Usagef("nothing to alter: give --content-file, --comment or both")
	}
	var change admin.PolicyAlter
	if pc.opts.contentFile != "" {
		var err error
		if change.Content, err = readContent(pc.opts.contentFile); err != nil {
			return err
		}
	}
	if pc.fs.Changed("comment") {
		change.Comment = &pc.opts.comment
	}
	s, ops, err := pc.open(ctx)
	if err != nil {
		return err
	}
	defer s.Close()
	p, err := ops.Alter(ctx, pc.opts.name, change)
	if err != nil {
		return contentError(pc.opts.contentFile, err)
	}
	return pc.print(admin.PolicyDocOf(p, nil), "altered policy %q (version %d)\n", p.Name, p.Version)
}

func policySetEnabled(ctx context.Context, pc *policyCtx, enabled bool) error {
	if err := pc.requireName(); err != nil {
		return err
	}
	s, ops, err := pc.open(ctx)
	if err != nil {
		return err
	}
	defer s.Close()
	p, changed, err := ops.SetEnabled(ctx, pc.opts.name, enabled)
	if err != nil {
		return policyStoreError(err)
	}
	format := "policy %q %s\n"
	if !changed {
		format = "policy %q was already %s\n"
	}
	return pc.print(admin.PolicyDocOf(p, nil), format, p.Name, enabledWord(enabled))
}

func policyDelete(ctx context.Context, pc *policyCtx) error {
	if err := pc.requireName(); err != nil {
		return err
	}
	s, ops, err := pc.open(ctx)
	if err != nil {
		return err
	}
	defer s.Close()
	p, err := ops.Delete(ctx, pc.opts.name)
	if err != nil {
		return policyStoreError(err)
	}
	return pc.print(admin.PolicyDocOf(p, nil), "deleted policy %q and its attachments\n", p.Name)
}

// objectNames are the flags ParseObject's errors name.
var objectNames = admin.ObjectNames{Object: "--object", Level: "--level"}

func policyAttach(ctx context.Context, pc *policyCtx, attach bool) error {
	if err := pc.requireName(); err != nil {
		return err
	}
	if !pc.fs.Changed("object") {
		return cli.Usagef("--object is required")
	}
	obj, err := admin.ParseObject(pc.opts.object, pc.opts.level, objectNames)
	if err != nil {
		return policyStoreError(err)
	}
	s, ops, err := pc.open(ctx)
	if err != nil {
		return err
	}
	defer s.Close()
	if !attach {
		a, err := ops.Detach(ctx, pc.opts.name, obj)
		if err != nil {
			return policyStoreError(err)
		}
		return pc.print(admin.AttachmentDocOf(a), "detached policy %q from %s %s\n", a.PolicyName, a.Object.Level, a.Object)
	}
	a, created, err := ops.Attach(ctx, pc.opts.name, obj)
	if err != nil {
		return policyStoreError(err)
	}
	if _, known, err := pc.catalogs(ctx); err == nil && !known {
		fmt.Fprintf(pc.env.Stderr, "tms-coordinator policy attach: note: no live serve node has said which catalogs it has, so catalog %q was not checked; status lists attachments whose catalog no node has\n", obj.Catalog)
	}
	format := "attached policy %q to %s %s\n"
	if !created {
		format = "policy %q was already attached to %s %s\n"
	}
	return pc.print(admin.AttachmentDocOf(a), format, a.PolicyName, a.Object.Level, a.Object)
}

func policyList(ctx context.Context, pc *policyCtx) error {
	s, ops, err := pc.open(ctx)
	if err != nil {
		return err
	}
	defer s.Close()
	out, err := ops.List(ctx)
	if err != nil {
		return err
	}
	if pc.opts.asJSON {
		return writeJSON(pc.env.Stdout, out)
	}
	if len(out) == 0 {
		_, err := fmt.Fprintln(pc.env.Stdout, "no policies")
		return err
	}
	w := tabwriter.NewWriter(pc.env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NAME\tTYPE\tENABLED\tVERSION\tTRIGGER\tATTACHED TO")
	for _, d := range out {
		var objs []string
		for _, a := range d.Attachments {
			objs = append(objs, a.Object)
		}
		fmt.Fprintf(w, "%s\t%s\t%t\t%d\t%s\t%s\n", d.Name, d.MaintenanceType, d.Enabled, d.Version,
			admin.TriggerSummary(d.Content), cmpOr(strings.Join(objs, ", "), "-"))
	}
	return w.Flush()
}

func policyShow(ctx context.Context, pc *policyCtx) error {
	byName, effective := pc.fs.Changed("name"), pc.fs.Changed("effective")
	if byName == effective {
		return cli.Usagef("give exactly one of --name and --effective")
	}
	var table store.PolicyObject
	if byName {
		if err := pc.requireName(); err != nil {
			return err
		}
	} else {
		var err error
		if table, err = admin.ParseTableName(pc.opts.effective, "--effective"); err != nil {
			return policyStoreError(err)
		}
	}
	s, ops, err := pc.open(ctx)
	if err != nil {
		return err
	}
	defer s.Close()
	if effective {
		return showEffective(ctx, pc, ops, table)
	}
	d, err := ops.Show(ctx, pc.opts.name)
	if err != nil {
		return policyStoreError(err)
	}
	if pc.opts.asJSON {
		return writeJSON(pc.env.Stdout, d)
	}
	w := tabwriter.NewWriter(pc.env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "name:\t%s\n", d.Name)
	fmt.Fprintf(w, "type:\t%s (%s)\n", d.PolicyType, d.MaintenanceType)
	fmt.Fprintf(w, "enabled:\t%t\n", d.Enabled)
	fmt.Fprintf(w, "version:\t%d\n", d.Version)
	fmt.Fprintf(w, "trigger:\t%s\n", admin.TriggerSummary(d.Content))
	if d.Comment != "" {
		fmt.Fprintf(w, "comment:\t%s\n", d.Comment)
	}
	fmt.Fprintf(w, "updated:\t%s\n", d.UpdatedAt.Format(time.RFC3339))
	if len(d.Attachments) == 0 {
		fmt.Fprintf(w, "attached to:\t-\n")
	}
	for i, a := range d.Attachments {
		label := ""
		if i == 0 {
			label = "attached to:"
		}
		fmt.Fprintf(w, "%s\t%s %s\n", label, a.Level, a.Object)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	pretty, err := json.MarshalIndent(d.Content, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(pc.env.Stdout, "content:\n%s\n", pretty)
	return err
}

func showEffective(ctx context.Context, pc *policyCtx, ops *admin.PolicyOps, table store.PolicyObject) error {
	doc, err := ops.Effective(ctx, table)
	if err != nil {
		return err
	}
	if pc.opts.asJSON {
		return writeJSON(pc.env.Stdout, doc)
	}
	if len(doc.Policies) == 0 {
		_, err := fmt.Fprintf(pc.env.Stdout, "no policy is attached to table %s, its namespaces or its catalog\n", doc.Table)
		return err
	}
	w := tabwriter.NewWriter(pc.env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "table %s\n", doc.Table)
	fmt.Fprintln(w, "TYPE\tPOLICY\tVERSION\tENABLED\tTRIGGER\tVIA")
	for _, r := range doc.Policies {
		fmt.Fprintf(w, "%s\t%s\t%d\t%t\t%s\t%s %s\n", r.MaintenanceType, r.Policy.Name, r.Policy.Version, r.Policy.Enabled,
			admin.TriggerSummary(r.Policy.Content), r.Via.Level, r.Via.Object)
	}
	return w.Flush()
}

func enabledWord(on bool) string {
	if on {
		return "enabled"
	}
	return "disabled"
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// print writes doc as JSON with --json, else the formatted line.
func (pc *policyCtx) print(doc any, format string, args ...any) error {
	if pc.opts.asJSON {
		return writeJSON(pc.env.Stdout, doc)
	}
	_, err := fmt.Fprintf(pc.env.Stdout, format, args...)
	return err
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
