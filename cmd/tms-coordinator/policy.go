package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/tms-dev/tms/chain"
	"github.com/tms-dev/tms/coordinator"
	"github.com/tms-dev/tms/internal/cli"
	"github.com/tms-dev/tms/store"
)

// This file is `tms-coordinator policy …`: create, alter, enable, disable
// and delete policies, attach and detach them, list and show them, and show
// the policies in force for a table. Every input is validated before the
// database is opened, so bad input writes nothing and exits 2 with a message
// naming the flag or the content field.
//
// Objects are dotted names. In CATALOG[.NAMESPACE[.TABLE]] the first segment
// is the catalog; with two segments the second is a namespace; with three or
// more the last is the table and the ones between are the namespace levels
// (cat.a.b.t is table t in namespace a.b). To attach to a multi-level
// namespace, say so with --level namespace (cat.a.b with --level namespace is
// namespace a.b). Names that themselves contain '.' cannot be written.

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
TYPE is a Gravitino policy type (system_iceberg_compaction, system_iceberg_rewrite_manifests,
system_iceberg_snapshot_expiration, system_iceberg_orphan_file_removal) or a maintenance type
(compaction, manifest-rewrite, snapshot-expiry, orphan-cleanup). The content file holds the
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
	env  cli.Env
	fs   *pflag.FlagSet
	opts policyOpts
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
	return flagError("--name", coordinator.ValidatePolicyName(pc.opts.name))
}

// open opens the store and its policy API; the caller closes the store.
func (pc *policyCtx) open(ctx context.Context) (store.Store, store.Policies, error) {
	s, err := store.Open(ctx, pc.opts.db, pc.env.Log)
	if err != nil {
		return nil, nil, classify(err)
	}
	ps, err := store.PoliciesOf(s)
	if err != nil {
		_ = s.Close()
		return nil, nil, err
	}
	return s, ps, nil
}

// syncExpand brings the policy's policy-expand row in step with it at once
// (a running serve's sync would within a minute).
func syncExpand(ctx context.Context, s store.Store, p store.Policy) error {
	sch, err := store.TasksOf(s)
	if err != nil {
		return err
	}
	if err := coordinator.SyncPolicyTask(ctx, sch, p, time.Now()); err != nil {
		return fmt.Errorf("policy %q saved, but its schedule row was not updated (serve's sync will retry): %w", p.Name, err)
	}
	return nil
}

// flagError turns a validation error of the value of flag into a usage
// error that names the flag and keeps the message of the field.
func flagError(flag string, err error) error {
	if err == nil {
		return nil
	}
	var pe *coordinator.PolicyError
	if errors.As(err, &pe) && (pe.Field == "name" || pe.Field == "policyType") {
		return cli.UsageError{Err: fmt.Errorf("%s: %s", flag, pe.Msg)}
	}
	return cli.UsageError{Err: fmt.Errorf("%s: %w", flag, err)}
}

// policyStoreError makes the store's answers to bad input usage errors.
func policyStoreError(err error) error {
	if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrInvalidArgument) {
		return cli.UsageError{Err: err}
	}
	return err
}

// readContent reads and validates --content-file for type t.
func readContent(path string, t chain.Type) (json.RawMessage, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, cli.UsageError{Err: fmt.Errorf("--content-file: %w", err)}
	}
	if _, err := coordinator.ParsePolicyContent(t, data); err != nil {
		return nil, cli.UsageError{Err: fmt.Errorf("--content-file %s: %w", path, err)}
	}
	return compactJSON(data), nil
}

// compactJSON drops the file's layout; content was validated, so it parses.
func compactJSON(data []byte) json.RawMessage {
	var b bytes.Buffer
	if err := json.Compact(&b, data); err != nil {
		return data
	}
	return b.Bytes()
}

func policyCreate(ctx context.Context, pc *policyCtx) error {
	if err := pc.requireName(); err != nil {
		return err
	}
	if !pc.fs.Changed("type") {
		return cli.Usagef("--type is required")
	}
	policyType, t, err := coordinator.ParsePolicyType(pc.opts.typ)
	if err != nil {
		return flagError("--type", err)
	}
	if pc.opts.contentFile == "" {
		return cli.Usagef("--content-file is required")
	}
	content, err := readContent(pc.opts.contentFile, t)
	if err != nil {
		return err
	}
	s, ps, err := pc.open(ctx)
	if err != nil {
		return err
	}
	defer s.Close()
	p, err := ps.CreatePolicy(ctx, store.NewPolicy{
		Name: pc.opts.name, Comment: pc.opts.comment, Type: policyType, Enabled: !pc.opts.disabled, Content: content,
	})
	if err != nil {
		return policyStoreError(err)
	}
	if err := syncExpand(ctx, s, p); err != nil {
		return err
	}
	return pc.print(policyJSON(p, nil), "created policy %q (%s, version %d, %s)\n", p.Name, p.Type, p.Version, enabledWord(p.Enabled))
}

func policyAlter(ctx context.Context, pc *policyCtx) error {
	if err := pc.requireName(); err != nil {
		return err
	}
	if pc.opts.contentFile == "" && !pc.fs.Changed("comment") {
		return cli.Usagef("nothing to alter: give --content-file, --comment or both")
	}
	s, ps, err := pc.open(ctx)
	if err != nil {
		return err
	}
	defer s.Close()
	cur, err := ps.GetPolicy(ctx, pc.opts.name)
	if err != nil {
		return policyStoreError(err)
	}
	var change store.PolicyChange
	if pc.opts.contentFile != "" {
		t, ok := coordinator.MaintenanceTypeOf(cur.Type)
		if !ok {
			return fmt.Errorf("policy %q has type %q, which this binary does not know", cur.Name, cur.Type)
		}
		if change.Content, err = readContent(pc.opts.contentFile, t); err != nil {
			return err
		}
	}
	if pc.fs.Changed("comment") {
		change.Comment = &pc.opts.comment
	}
	p, err := ps.AlterPolicy(ctx, pc.opts.name, change)
	if err != nil {
		return policyStoreError(err)
	}
	if err := syncExpand(ctx, s, p); err != nil {
		return err
	}
	return pc.print(policyJSON(p, nil), "altered policy %q (version %d)\n", p.Name, p.Version)
}

func policySetEnabled(ctx context.Context, pc *policyCtx, enabled bool) error {
	if err := pc.requireName(); err != nil {
		return err
	}
	s, ps, err := pc.open(ctx)
	if err != nil {
		return err
	}
	defer s.Close()
	p, changed, err := ps.SetPolicyEnabled(ctx, pc.opts.name, enabled)
	if err != nil {
		return policyStoreError(err)
	}
	if err := syncExpand(ctx, s, p); err != nil {
		return err
	}
	format := "policy %q %s\n"
	if !changed {
		format = "policy %q was already %s\n"
	}
	return pc.print(policyJSON(p, nil), format, p.Name, enabledWord(enabled))
}

func policyDelete(ctx context.Context, pc *policyCtx) error {
	if err := pc.requireName(); err != nil {
		return err
	}
	s, ps, err := pc.open(ctx)
	if err != nil {
		return err
	}
	defer s.Close()
	p, err := ps.DeletePolicy(ctx, pc.opts.name)
	if err != nil {
		return policyStoreError(err)
	}
	if err := syncExpand(ctx, s, p); err != nil {
		return err
	}
	return pc.print(policyJSON(p, nil), "deleted policy %q and its attachments\n", p.Name)
}

func policyAttach(ctx context.Context, pc *policyCtx, attach bool) error {
	if err := pc.requireName(); err != nil {
		return err
	}
	if !pc.fs.Changed("object") {
		return cli.Usagef("--object is required")
	}
	obj, err := parseObject(pc.opts.object, pc.opts.level)
	if err != nil {
		return err
	}
	s, ps, err := pc.open(ctx)
	if err != nil {
		return err
	}
	defer s.Close()
	if !attach {
		a, err := ps.Detach(ctx, pc.opts.name, obj)
		if err != nil {
			return policyStoreError(err)
		}
		return pc.print(attachmentJSON(a), "detached policy %q from %s %s\n", a.PolicyName, a.Object.Level, a.Object)
	}
	a, created, err := ps.Attach(ctx, pc.opts.name, obj)
	if err != nil {
		return policyStoreError(err)
	}
	format := "attached policy %q to %s %s\n"
	if !created {
		format = "policy %q was already attached to %s %s\n"
	}
	return pc.print(attachmentJSON(a), format, a.PolicyName, a.Object.Level, a.Object)
}

func policyList(ctx context.Context, pc *policyCtx) error {
	s, ps, err := pc.open(ctx)
	if err != nil {
		return err
	}
	defer s.Close()
	list, err := ps.ListPolicies(ctx)
	if err != nil {
		return err
	}
	out := make([]policyDoc, 0, len(list))
	for _, p := range list {
		as, err := ps.ListAttachments(ctx, p.ID)
		if err != nil {
			return err
		}
		out = append(out, policyJSON(p, as))
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
			triggerSummary(d.Content), cmpOr(strings.Join(objs, ", "), "-"))
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
		if table, err = parseTableName(pc.opts.effective); err != nil {
			return err
		}
	}
	s, ps, err := pc.open(ctx)
	if err != nil {
		return err
	}
	defer s.Close()
	if effective {
		return showEffective(ctx, pc, ps, table)
	}
	p, err := ps.GetPolicy(ctx, pc.opts.name)
	if err != nil {
		return policyStoreError(err)
	}
	as, err := ps.ListAttachments(ctx, p.ID)
	if err != nil {
		return err
	}
	d := policyJSON(p, as)
	if pc.opts.asJSON {
		return writeJSON(pc.env.Stdout, d)
	}
	w := tabwriter.NewWriter(pc.env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "name:\t%s\n", d.Name)
	fmt.Fprintf(w, "type:\t%s (%s)\n", d.PolicyType, d.MaintenanceType)
	fmt.Fprintf(w, "enabled:\t%t\n", d.Enabled)
	fmt.Fprintf(w, "version:\t%d\n", d.Version)
	fmt.Fprintf(w, "trigger:\t%s\n", triggerSummary(d.Content))
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

// effectiveDoc is `show --effective --json`.
type effectiveDoc struct {
	Table    string         `json:"table"`
	Policies []effectiveRow `json:"policies"`
}

type effectiveRow struct {
	MaintenanceType string        `json:"maintenanceType"`
	Policy          policyDoc     `json:"policy"`
	Via             attachmentDoc `json:"via"`
}

func showEffective(ctx context.Context, pc *policyCtx, ps store.Policies, table store.PolicyObject) error {
	eps, err := ps.EffectivePolicies(ctx, table.Catalog, table.Namespace, table.Table)
	if err != nil {
		return err
	}
	doc := effectiveDoc{Table: table.String(), Policies: []effectiveRow{}}
	for _, ep := range eps {
		d := policyJSON(ep.Policy, nil)
		doc.Policies = append(doc.Policies, effectiveRow{
			MaintenanceType: d.MaintenanceType, Policy: d, Via: attachmentJSON(ep.Attachment),
		})
	}
	// Chain order reads better than policy type order.
	slices.SortStableFunc(doc.Policies, func(a, b effectiveRow) int { return chainRank(a.MaintenanceType) - chainRank(b.MaintenanceType) })
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
			triggerSummary(r.Policy.Content), r.Via.Level, r.Via.Object)
	}
	return w.Flush()
}

func chainRank(t string) int {
	for i, c := range []chain.Type{chain.Compaction, chain.ManifestRewrite, chain.SnapshotExpiry, chain.OrphanCleanup} {
		if string(c) == t {
			return i
		}
	}
	return 99
}

// policyDoc is a policy as the CLI prints it in JSON: Gravitino's fields
// first, then the store's.
type policyDoc struct {
	Name            string          `json:"name"`
	Comment         string          `json:"comment"`
	PolicyType      string          `json:"policyType"`
	Enabled         bool            `json:"enabled"`
	Content         json.RawMessage `json:"content"`
	ID              int64           `json:"id"`
	MaintenanceType string          `json:"maintenanceType"`
	Version         int             `json:"version"`
	CreatedAt       time.Time       `json:"createdAt"`
	UpdatedAt       time.Time       `json:"updatedAt"`
	DeletedAt       *time.Time      `json:"deletedAt,omitempty"`
	Attachments     []attachmentDoc `json:"attachments,omitempty"`
}

type attachmentDoc struct {
	Policy string `json:"policy"`
	Level  string `json:"level"`
	Object string `json:"object"`
}

func policyJSON(p store.Policy, as []store.Attachment) policyDoc {
	t, _ := coordinator.MaintenanceTypeOf(p.Type)
	d := policyDoc{
		Name: p.Name, Comment: p.Comment, PolicyType: p.Type, Enabled: p.Enabled, Content: p.Content,
		ID: p.ID, MaintenanceType: string(t), Version: p.Version, CreatedAt: p.CreatedAt, UpdatedAt: p.UpdatedAt,
	}
	if p.Deleted() {
		d.DeletedAt = &p.DeletedAt
	}
	for _, a := range as {
		d.Attachments = append(d.Attachments, attachmentJSON(a))
	}
	return d
}

func attachmentJSON(a store.Attachment) attachmentDoc {
	return attachmentDoc{Policy: a.PolicyName, Level: string(a.Object.Level), Object: a.Object.String()}
}

// triggerSummary describes a stored content's schedule in a few words.
func triggerSummary(content json.RawMessage) string {
	var c struct {
		Schedule struct {
			OnCommit bool   `json:"onCommit"`
			Crontab  string `json:"crontab"`
			Timezone string `json:"timezone"`
		} `json:"schedule"`
	}
	_ = json.Unmarshal(content, &c)
	var parts []string
	if c.Schedule.OnCommit {
		parts = append(parts, "on commit")
	}
	if c.Schedule.Crontab != "" {
		cron := "cron " + c.Schedule.Crontab
		if c.Schedule.Timezone != "" {
			cron += " (" + c.Schedule.Timezone + ")"
		}
		parts = append(parts, cron)
	}
	return cmpOr(strings.Join(parts, ", "), "-")
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

// parseObject parses --object (see the file comment) with --level, if
// given, overriding the level the segment count implies.
func parseObject(s, level string) (store.PolicyObject, error) {
	segs, err := splitObject("--object", s)
	if err != nil {
		return store.PolicyObject{}, err
	}
	lvl := store.ObjectLevel(strings.ToLower(strings.TrimSpace(level)))
	if lvl == "" {
		switch len(segs) {
		case 1:
			lvl = store.LevelCatalog
		case 2:
			lvl = store.LevelNamespace
		default:
			lvl = store.LevelTable
		}
	}
	obj := store.PolicyObject{Level: lvl, Catalog: segs[0]}
	switch lvl {
	case store.LevelCatalog:
		if len(segs) != 1 {
			return obj, cli.Usagef("--object %q: a catalog is one segment, got %d", s, len(segs))
		}
	case store.LevelNamespace:
		if len(segs) < 2 {
			return obj, cli.Usagef("--object %q: a namespace is CATALOG.NAMESPACE[.LEVEL…]", s)
		}
		obj.Namespace = strings.Join(segs[1:], ".")
	case store.LevelTable:
		if len(segs) < 3 {
			return obj, cli.Usagef("--object %q: a table is CATALOG.NAMESPACE.TABLE", s)
		}
		obj.Namespace = strings.Join(segs[1:len(segs)-1], ".")
		obj.Table = segs[len(segs)-1]
	default:
		return obj, cli.Usagef("--level %q: want catalog, namespace or table", level)
	}
	return obj, nil
}

// parseTableName parses --effective CATALOG.NAMESPACE.TABLE.
func parseTableName(s string) (store.PolicyObject, error) {
	segs, err := splitObject("--effective", s)
	if err != nil {
		return store.PolicyObject{}, err
	}
	if len(segs) < 3 {
		return store.PolicyObject{}, cli.Usagef("--effective %q: want CATALOG.NAMESPACE.TABLE", s)
	}
	return store.PolicyObject{Level: store.LevelTable, Catalog: segs[0],
		Namespace: strings.Join(segs[1:len(segs)-1], "."), Table: segs[len(segs)-1]}, nil
}

func splitObject(flag, s string) ([]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, cli.Usagef("%s must not be empty", flag)
	}
	segs := strings.Split(s, ".")
	for _, seg := range segs {
		if strings.TrimSpace(seg) == "" {
			return nil, cli.Usagef("%s %q: empty segment", flag, s)
		}
		if strings.TrimSpace(seg) != seg {
			return nil, cli.Usagef("%s %q: white space around a segment", flag, s)
		}
	}
	return segs, nil
}
