package flow

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tms-dev/tms/internal/invalid"
	"github.com/tms-dev/tms/policy"
	"github.com/tms-dev/tms/sampler"
	"github.com/tms-dev/tms/store"
)

// This file is the plan: what would run now and why, per table and policy,
// a dry run of the decisions the cron-job and commit-job handlers and the
// runner take, on the ledger's current rows and the latest recorded sample.
// It enqueues nothing and writes nothing. The gates are the handlers'
// (minInterval, coolingEnd; a job in flight holds the table), the
// thresholds the runner's (policy.Decide); only the reads differ: the plan
// reads a page of tables at once (store.PlanReads).

// The plan's verdicts.
const (
	// PlanRun: if the trigger fired now, the job would start and the
	// thresholds call for work (or there is no sample yet: the runner
	// samples first).
	PlanRun = "run"
	// PlanSkip: a job would start, and the runner would skip the type on
	// the latest sample's metrics.
	PlanSkip = "skip"
	// PlanWait: a gate holds the type: a job in flight on the table, or the
	// policy's cooldown.
	PlanWait = "wait"
	// PlanOff: the policy is disabled or cannot be read.
	PlanOff = "off"
)

// Plan limits.
const (
	DefaultPlanLimit = 50
	MaxPlanLimit     = 500
)

// PlanQuery selects the tables of a plan.
type PlanQuery struct {
	// Table is one table, CATALOG.NAMESPACE.TABLE split into its parts
	// (the live incarnation); empty Catalog means a page of every table.
	Catalog, Namespace, Name string
	// Tables, when set, are the tables to plan (at most MaxPlanLimit; a
	// page of another listing, such as the console's tables page); AfterID
	// and Limit are then ignored.
	Tables []store.Table
	// AfterID pages the tables by id: those above it.
	AfterID int64
	// Limit is the page size in tables: 1 to MaxPlanLimit; 0 means
	// DefaultPlanLimit.
	Limit int
	// Now is the instant the plan is for; zero means the clock's now.
	Now time.Time
}

// Plan is a page of the plan.
type Plan struct {
	Now   time.Time  `json:"now"`
	Items []PlanItem `json:"items"`
	// Tables is how many tables the page read (old incarnations of
	// recreated tables and tables without policies included).
	Tables int `json:"tables"`
	// Next is the AfterID of the next page; 0 on the last.
	Next int64 `json:"next,omitempty"`
}

// PlanItem is the plan of one (table, policy).
type PlanItem struct {
	TableID  int64       `json:"tableId"`
	Table    string      `json:"table"`
	PolicyID int64       `json:"policyId"`
	Policy   string      `json:"policy"`
	Type     policy.Type `json:"type"`
	// Attached says where the policy is attached: "table …", "namespace
	// …" or "catalog …".
	Attached string `json:"attached"`
	// Triggers are "crontab <spec> (<zone>)" and/or "onCommit".
	Triggers []string `json:"triggers,omitempty"`
	// Verdict is PlanRun, PlanSkip, PlanWait or PlanOff; Reason says why.
	Verdict string `json:"verdict"`
	Reason  string `json:"reason"`
	// Thresholds is the threshold decision on the latest sample, also when
	// a gate holds the type; empty without a sample.
	Thresholds string `json:"thresholds,omitempty"`
	// Due is when the trigger next fires for this table, and DueBy what
	// says so; nil when it waits for a commit.
	Due   *time.Time `json:"due,omitempty"`
	DueBy string     `json:"dueBy,omitempty"`
	// Sample is the metrics row the thresholds read, nil if none.
	Sample *PlanSample `json:"sample,omitempty"`
}

// PlanSample names a metrics row.
type PlanSample struct {
	SnapshotID int64     `json:"snapshotId"`
	PolicyID   int64     `json:"policyId"`
	RecordedAt time.Time `json:"recordedAt"`
}

// Plan computes a page of the plan.
func (f *Flow) Plan(ctx context.Context, q PlanQuery) (Plan, error) {
	limit := q.Limit
	if limit == 0 {
		limit = DefaultPlanLimit
	}
	if limit < 1 || limit > MaxPlanLimit {
		return Plan{}, fmt.Errorf("%w: plan limit must be between 1 and %d, got %d", invalid.ErrArgument, MaxPlanLimit, limit)
	}
	if q.AfterID < 0 {
		return Plan{}, fmt.Errorf("%w: plan cursor must not be negative, got %d", invalid.ErrArgument, q.AfterID)
	}
	now := q.Now
	if now.IsZero() {
		now = time.Now()
	}
	now = now.UTC()
	var tables []store.Table
	switch {
	case q.Tables != nil:
		if len(q.Tables) > MaxPlanLimit {
			return Plan{}, fmt.Errorf("%w: plan of %d tables; at most %d at once", invalid.ErrArgument, len(q.Tables), MaxPlanLimit)
		}
		tables = q.Tables
	case q.Catalog != "":
		t, err := f.st.FindTable(ctx, q.Catalog, q.Namespace, q.Name)
		if err != nil {
			return Plan{}, err
		}
		tables = []store.Table{t}
	default:
		var err error
		if tables, err = f.st.ListTables(ctx, q.AfterID, limit); err != nil {
			return Plan{}, err
		}
	}
	out := Plan{Now: now, Items: []PlanItem{}, Tables: len(tables)}
	if q.Tables == nil && q.Catalog == "" && len(tables) == limit {
		out.Next = tables[len(tables)-1].ID
	}
	ids := make([]int64, len(tables))
	for i, t := range tables {
		ids[i] = t.ID
	}
	facts, err := f.st.PlanFacts(ctx, ids)
	if err != nil {
		return Plan{}, err
	}
	var keys []store.TaskKey
	for _, t := range tables {
		keys = append(keys, CommitJobKey(t.ID))
		for _, e := range facts.Effective[t.ID] {
			keys = append(keys, CronJobKey(t.ID, e.Policy.ID), ExpandKey(e.Policy.ID))
		}
	}
	tasks, err := f.st.GetTasks(ctx, keys)
	if err != nil {
		return Plan{}, err
	}
	for _, t := range tables {
		if facts.Superseded[t.ID] {
			continue // an old incarnation: its name's live row is planned
		}
		from := len(out.Items)
		for _, e := range facts.Effective[t.ID] {
			out.Items = append(out.Items, f.planItem(t, e, facts, tasks, now))
		}
		slices.SortStableFunc(out.Items[from:], func(a, b PlanItem) int { return policy.Rank(a.Type) - policy.Rank(b.Type) })
	}
	return out, nil
}

// planItem decides one (table, policy) as the handlers and the runner
// would.
func (f *Flow) planItem(t store.Table, e store.EffectivePolicy, facts store.PlanFacts, tasks map[store.TaskKey]store.Task, now time.Time) PlanItem {
	p := e.Policy
	it := PlanItem{TableID: t.ID, Table: t.Catalog + "." + t.Namespace + "." + t.Name, PolicyID: p.ID, Policy: p.Name,
		Attached: string(e.Attachment.Object.Level) + " " + e.Attachment.Object.String()}
	typ, ok := policy.MaintenanceTypeOf(p.Type)
	if !ok {
		it.Verdict, it.Reason = PlanOff, fmt.Sprintf("unknown policy type %q", p.Type)
		return it
	}
	it.Type = typ
	if !p.Enabled {
		it.Verdict, it.Reason = PlanOff, "policy disabled"
		return it
	}
	c, err := policy.ParseContent(typ, p.Content)
	if err != nil {
		it.Verdict, it.Reason = PlanOff, "invalid policy: "+err.Error()
		return it
	}
	it.Triggers, it.Due, it.DueBy = planDue(t.ID, p.ID, c, tasks, now)

	// Thresholds on the latest sample: the pair's own, else the table's.
	m, ok := facts.Metrics[store.TablePolicy{TableID: t.ID, PolicyID: p.ID}]
	if !ok {
		m, ok = facts.Latest[t.ID]
	}
	var threshold *policy.Verdict
	if ok {
		it.Sample = &PlanSample{SnapshotID: m.SnapshotID, PolicyID: m.PolicyID, RecordedAt: m.RecordedAt}
		var sm sampler.Metrics
		if err := json.Unmarshal(m.Value, &sm); err != nil {
			it.Thresholds = "unreadable metrics row: " + err.Error()
		} else if v, err := policy.Decide(typ, p.Content, sm); err != nil {
			it.Verdict, it.Reason = PlanOff, "invalid policy: "+err.Error()
			return it
		} else {
			if v.Work && typ == policy.Compaction {
				if opts, err := policy.ParseCompaction(p.Content); err == nil {
					if why, few := opts.FewCandidates(sm); few {
						v = policy.Verdict{Reason: v.Reason + ", but " + why}
					}
				}
			}
			it.Thresholds, threshold = v.Reason, &v
		}
	}

	// The gates, in the handlers' order.
	if open := facts.InFlight[t.ID]; len(open) > 0 {
		j := open[0]
		it.Verdict, it.Reason = PlanWait, fmt.Sprintf("job %d (%s) is in flight on the table (%s); this type waits for it to finish", j.ID, strings.Join(j.Types, ", "), j.Status)
		return it
	}
	d := f.minInterval(c)
	last := facts.LastFinished[store.TablePolicy{TableID: t.ID, PolicyID: p.ID}]
	if end := coolingEnd(last, now, d); !end.IsZero() {
		it.Verdict, it.Reason = PlanWait, fmt.Sprintf("cooldown until %s: the policy's last job finished at %s, minimum interval %s",
			end.Format(time.RFC3339), last.UTC().Format(time.RFC3339), d)
		return it
	}
	switch {
	case typ == policy.OrphanCleanup && facts.GCDisabled[t.ID]:
		it.Verdict, it.Reason = PlanSkip, "table property gc.enabled=false (as the runner last loaded the table): orphan cleanup deletes no file of it"
	case threshold == nil:
		it.Verdict, it.Reason = PlanRun, "no usable sample yet: the runner samples the table first and decides on it"
	case threshold.Work:
		it.Verdict, it.Reason = PlanRun, threshold.Reason
	default:
		it.Verdict, it.Reason = PlanSkip, threshold.Reason
	}
	return it
}

// planDue says when a type's triggers next fire for the table: a cron-job
// row already queued for it, else the policy-expand row (the crontab's
// next instant, when every table of the policy is queued), else the
// crontab itself; for onCommit the table's pending commit-job row if it
// owes this type. The earliest wins; nil when only a commit would start
// it.
func planDue(tableID, policyID int64, c policy.Content, tasks map[store.TaskKey]store.Task, now time.Time) (triggers []string, due *time.Time, by string) {
	set := func(at time.Time, why string) {
		if due == nil || at.Before(*due) {
			at = at.UTC()
			due, by = &at, why
		}
	}
	if s := c.Schedule; s.Cron != nil {
		triggers = append(triggers, fmt.Sprintf("crontab %s (%s)", s.Crontab, cmp.Or(s.Timezone, "UTC")))
		if row, ok := tasks[CronJobKey(tableID, policyID)]; ok {
			set(row.ExecutionTime, taskState("cron-job row", row))
		} else if row, ok := tasks[ExpandKey(policyID)]; ok {
			set(row.ExecutionTime, taskState("policy-expand row (the crontab's next instant)", row))
		} else if next := s.Cron.Next(now); !next.IsZero() {
			set(next, "crontab (no policy-expand row yet: serve writes it within a minute)")
		}
	}
	if c.Schedule.OnCommit {
		triggers = append(triggers, "onCommit")
		if row, ok := tasks[CommitJobKey(tableID)]; ok {
			owed, err := owedTypes(row.Data)
			if err != nil || owed == nil || slices.Contains(owed, c.Type) {
				set(row.ExecutionTime, taskState("commit-job row (a commit is pending)", row))
			}
		}
	}
	return triggers, due, by
}

// taskState names a task row and whether a node holds it.
func taskState(what string, t store.Task) string {
	if t.Picked {
		return what + ", claimed by " + t.PickedBy
	}
	return what
}
