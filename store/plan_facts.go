package store

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// This file holds the bulk reads of the coordinator's plan: for a page of
// tables, in a handful of queries, what the flow's gates read one table at
// a time (EffectivePolicies, FindTable, TableInFlightJobs, LastFinished,
// GetTask) and the latest metrics the thresholds decide on. The decisions
// themselves stay in the flow and in policy.

// MaxPlanTables bounds the tables of one PlanFacts call.
const MaxPlanTables = MaxQueryLimit

// TablePolicy is a (table, policy) pair.
type TablePolicy struct{ TableID, PolicyID int64 }

// PlanFacts are what the plan reads about a set of tables.
type PlanFacts struct {
	// Effective maps a table id to its effective policies, as
	// EffectivePolicies returns them for the table's name.
	Effective map[int64][]EffectivePolicy
	// Superseded holds the tables whose name has a newer incarnation (they
	// get no more jobs).
	Superseded map[int64]bool
	// InFlight maps a table id to its in-flight job rows.
	InFlight map[int64][]Job
	// LastFinished maps a (table, policy) to LastFinished's answer; absent
	// means zero.
	LastFinished map[TablePolicy]time.Time
	// Metrics maps a (table, effective policy) to the pair's newest metrics
	// row (by recorded_at, then snapshot id); pairs without a row are
	// absent.
	Metrics map[TablePolicy]SnapshotMetrics
	// Latest maps a table id to its newest metrics row of any policy (by
	// recorded_at, policy id, snapshot id, as ListTableStatus orders them).
	Latest map[int64]SnapshotMetrics
	// GCDisabled holds the tables whose runner last saw gc.enabled=false
	// (RecordTableFacts).
	GCDisabled map[int64]bool
}

// PlanReads are the plan's bulk reads.
type PlanReads interface {
	// PlanFacts reads the facts of up to MaxPlanTables tables (unknown ids
	// have none). ErrInvalidArgument for too many ids.
	PlanFacts(ctx context.Context, tableIDs []int64) (PlanFacts, error)
	// GetTasks returns the scheduled task rows among keys (up to
	// MaxPlanTables × 10), as GetTask would; missing rows are absent.
	GetTasks(ctx context.Context, keys []TaskKey) (map[TaskKey]Task, error)
}

var (
	_ PlanReads = (*postgresStore)(nil)
	_ PlanReads = (*sqliteStore)(nil)
)

// inList renders "(p(from), …, p(from+n-1))".
func inList(p func(int) string, from, n int) string {
	var b strings.Builder
	b.WriteByte('(')
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(p(from + i))
	}
	b.WriteByte(')')
	return b.String()
}

func anyArgs[T any](vs []T) []any {
	out := make([]any, len(vs))
	for i, v := range vs {
		out[i] = v
	}
	return out
}

// PlanFacts reads the plan's facts of tableIDs.
func (s *sqlStore) PlanFacts(ctx context.Context, tableIDs []int64) (PlanFacts, error) {
	f := PlanFacts{Effective: map[int64][]EffectivePolicy{}, Superseded: map[int64]bool{}, InFlight: map[int64][]Job{},
		LastFinished: map[TablePolicy]time.Time{}, Metrics: map[TablePolicy]SnapshotMetrics{}, Latest: map[int64]SnapshotMetrics{}}
	if len(tableIDs) > MaxPlanTables {
		return f, fmt.Errorf("%w: plan facts of %d tables; at most %d at once", ErrInvalidArgument, len(tableIDs), MaxPlanTables)
	}
	if len(tableIDs) == 0 {
		return f, nil
	}
	ids := slices.Clone(tableIDs)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	p, args, r := s.b.param, anyArgs(ids), s.b.read()
	in := inList(p, 1, len(ids))

	// Effective policies: EffectivePolicies' resolution over every table at once.
	var eff []struct {
		table int64
		e     EffectivePolicy
	}
	err := r.query(ctx, func(row scanner) error {
		var x struct {
			table int64
			e     EffectivePolicy
		}
		pol, err := scanPolicy(row, append(attachmentDest(&x.e.Attachment), &x.table)...)
		x.e.Policy = pol
		eff = append(eff, x)
		return err
	}, `SELECT `+policyCols+`, `+attachmentCols+`, t.id
		FROM maintained_table t
		JOIN policy_attachment a ON `+attachmentCovers("a", "t.catalog", "t.namespace", "t.name")+`
		JOIN policy p ON p.id = a.policy_id
		JOIN policy_version v ON v.policy_id = p.id AND v.version = p.current_version
		WHERE t.id IN `+in+` AND p.deleted_at IS NULL
		ORDER BY t.id, a.policy_type, `+attachmentRank("a")+` DESC`, args...)
	if err != nil {
		return f, s.b.wrap("plan facts: effective policies", err)
	}
	for i := 0; i < len(eff); {
		j := i
		var rows []EffectivePolicy
		for ; j < len(eff) && eff[j].table == eff[i].table; j++ {
			rows = append(rows, eff[j].e)
		}
		f.Effective[eff[i].table] = nearestPerType(rows)
		i = j
	}

	err = r.query(ctx, func(row scanner) error {
		var id int64
		err := row.Scan(&id)
		f.Superseded[id] = true
		return err
	}, `SELECT t.id FROM maintained_table t WHERE t.id IN `+in+` AND EXISTS (SELECT 1 FROM maintained_table n
		WHERE n.catalog = t.catalog AND n.namespace = t.namespace AND n.name = t.name AND n.id > t.id)`, args...)
	if err != nil {
		return f, s.b.wrap("plan facts: incarnations", err)
	}

	f.GCDisabled = map[int64]bool{}
	err = r.query(ctx, func(row scanner) error {
		var id int64
		err := row.Scan(&id)
		f.GCDisabled[id] = true
		return err
	}, `SELECT t.id FROM maintained_table t WHERE t.id IN `+in+` AND t.gc_enabled IS NOT NULL AND NOT t.gc_enabled`, args...)
	if err != nil {
		return f, s.b.wrap("plan facts: gc.enabled", err)
	}

	jobs, err := collect(ctx, r, scanJob, `SELECT `+jobCols+` FROM table_maintenance_job
		WHERE finished_at IS NULL AND table_id IN `+in+` ORDER BY id`, args...)
	if err != nil {
		return f, s.b.wrap("plan facts: in-flight jobs", err)
	}
	for _, j := range jobs {
		f.InFlight[j.TableID] = append(f.InFlight[j.TableID], j)
	}

	err = r.query(ctx, func(row scanner) error {
		var k TablePolicy
		var at time.Time
		err := row.Scan(&k.TableID, &k.PolicyID, scanTime(&at))
		f.LastFinished[k] = at
		return err
	}, `SELECT table_id, policy_id, max(finished_at) FROM table_maintenance_job
		WHERE finished_at IS NOT NULL AND table_id IN `+in+` GROUP BY table_id, policy_id`, args...)
	if err != nil {
		return f, s.b.wrap("plan facts: last finished", err)
	}

	// The table's newest row is table_latest_metrics' (kept by
	// UpsertSnapshotMetrics); a pair's newest is one index probe each, only
	// for the pairs of the effective policies, in one statement.
	latest, err := collect(ctx, r, scanMetrics, `SELECT table_id, policy_id, snapshot_id, metrics_value, recorded_at
		FROM table_latest_metrics WHERE table_id IN `+in, args...)
	if err != nil {
		return f, s.b.wrap("plan facts: latest metrics", err)
	}
	for _, m := range latest {
		f.Latest[m.TableID] = m
	}
	var pairs []TablePolicy
	for _, id := range ids {
		for _, e := range f.Effective[id] {
			k := TablePolicy{id, e.Policy.ID}
			if m, ok := f.Latest[id]; ok && m.PolicyID == k.PolicyID {
				f.Metrics[k] = m // the table's newest row is the pair's
				continue
			}
			pairs = append(pairs, k)
		}
	}
	for len(pairs) > 0 { // at most 200 probes a statement
		chunk := pairs[:min(len(pairs), 200)]
		pairs = pairs[len(chunk):]
		probes := make([]string, len(chunk))
		pargs := make([]any, 0, 2*len(chunk))
		for i, k := range chunk {
			probes[i] = `SELECT * FROM (SELECT table_id, policy_id, snapshot_id, metrics_value, recorded_at
				FROM table_snapshot_metrics WHERE table_id = ` + p(2*i+1) + ` AND policy_id = ` + p(2*i+2) + `
				ORDER BY recorded_at DESC, snapshot_id DESC LIMIT 1) p` + strconv.Itoa(i)
			pargs = append(pargs, k.TableID, k.PolicyID)
		}
		ms, err := collect(ctx, r, scanMetrics, strings.Join(probes, "\nUNION ALL\n"), pargs...)
		if err != nil {
			return f, s.b.wrap("plan facts: metrics", err)
		}
		for _, m := range ms {
			f.Metrics[TablePolicy{m.TableID, m.PolicyID}] = m
		}
	}
	return f, nil
}

// newerMetrics orders metrics rows as ListTableStatus does: by
// recorded_at, then policy id, then snapshot id.
func newerMetrics(a, b SnapshotMetrics) bool {
	if !a.RecordedAt.Equal(b.RecordedAt) {
		return a.RecordedAt.After(b.RecordedAt)
	}
	if a.PolicyID != b.PolicyID {
		return a.PolicyID > b.PolicyID
	}
	return a.SnapshotID > b.SnapshotID
}

// GetTasks reads the task rows among keys.
func (s *sqlStore) GetTasks(ctx context.Context, keys []TaskKey) (map[TaskKey]Task, error) {
	out := map[TaskKey]Task{}
	if len(keys) > 10*MaxPlanTables {
		return out, fmt.Errorf("%w: %d task keys; at most %d at once", ErrInvalidArgument, len(keys), 10*MaxPlanTables)
	}
	byName := map[string][]string{}
	for _, k := range keys {
		byName[k.Name] = append(byName[k.Name], k.Instance)
	}
	if len(byName) == 0 {
		return out, nil
	}
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	slices.Sort(names)
	var conds []string
	var args []any
	for _, n := range names {
		inst := byName[n]
		conds = append(conds, `(task_name = `+s.b.param(len(args)+1)+` AND task_instance IN `+inList(s.b.param, len(args)+2, len(inst))+`)`)
		args = append(append(args, n), anyArgs(inst)...)
	}
	err := s.b.read().query(ctx, func(row scanner) error {
		var t Task
		var picked int64
		err := row.Scan(&t.Name, &t.Instance, &t.Data, scanTime(&t.ExecutionTime), &picked, &t.PickedBy,
			scanTime(&t.LastHeartbeat), &t.ConsecutiveFailures, &t.Version)
		t.Picked = picked != 0
		out[t.TaskKey] = t
		return err
	}, `SELECT task_name, task_instance, task_data, execution_time, CASE WHEN picked THEN 1 ELSE 0 END, coalesce(picked_by, ''),
		last_heartbeat, consecutive_failures, version
		FROM scheduled_tasks WHERE `+strings.Join(conds, " OR "), args...)
	if err != nil {
		return nil, s.b.wrap("get tasks", err)
	}
	return out, nil
}
