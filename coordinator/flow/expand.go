package flow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/tms-dev/tms/coordinator/scheduler"
	"github.com/tms-dev/tms/policy"
	"github.com/tms-dev/tms/store"
)

// ---- policy-expand ----

// expandState is a policy-expand row's task_data.
type expandState struct {
	// Crontab and Timezone are the schedule the row was planned with.
	Crontab  string `json:"crontab"`
	Timezone string `json:"timezone,omitempty"`
	// Cursor is the last table id enqueued in the instant being expanded;
	// zero when the next pick starts a new instant.
	Cursor int64 `json:"cursor,omitempty"`
}

// SyncPolicyTask makes the policy-expand row of p match p: an enabled live
// policy with a crontab has one, due at its next instant (moved when the
// crontab or time zone changed); any other policy has none. The policy
// commands call it after each change, and serve at start for every policy;
// the expand handler checks the policy again on each pick, so a row left
// behind by a crash does no harm.
func SyncPolicyTask(ctx context.Context, sch store.Scheduler, p store.Policy, now time.Time) error {
	key := ExpandKey(p.ID)
	want, c, err := wantsExpand(p)
	if err != nil {
		return err
	}
	if !want {
		err := sch.CancelTask(ctx, key)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		return err
	}
	data, _ := json.Marshal(expandState{Crontab: c.Schedule.Crontab, Timezone: c.Schedule.Timezone})
	next := c.Schedule.Cron.Next(now)
	cur, err := sch.GetTask(ctx, key)
	switch {
	case errors.Is(err, store.ErrNotFound):
		_, err = sch.ScheduleTask(ctx, store.NewTask{TaskKey: key, Data: data, ExecutionTime: next}, now)
		return err
	case err != nil:
		return err
	}
	var st expandState
	_ = json.Unmarshal(cur.Data, &st)
	if st.Crontab == c.Schedule.Crontab && st.Timezone == c.Schedule.Timezone {
		return nil
	}
	return sch.RescheduleTask(ctx, key, next, data)
}

// wantsExpand reports whether p needs a policy-expand row, with its parsed
// content.
func wantsExpand(p store.Policy) (bool, policy.Content, error) {
	if p.Deleted() || !p.Enabled {
		return false, policy.Content{}, nil
	}
	t, ok := policy.MaintenanceTypeOf(p.Type)
	if !ok {
		return false, policy.Content{}, fmt.Errorf("policy %q: unknown policyType %q", p.Name, p.Type)
	}
	c, err := policy.ParseContent(t, p.Content)
	if err != nil {
		return false, policy.Content{}, fmt.Errorf("policy %q: %w", p.Name, err)
	}
	return c.Schedule.Cron != nil, c, nil
}

// expand enqueues cron-job rows for one batch of the policy's tables.
//
// A pick that continues an instant (a cursor in its task data) trusts the
// schedule in the data: SyncPolicyTask rewrites or deletes the row whenever
// the policy changes, and such a change makes this claim's completion
// stale. A pick that starts an instant reads the policy first.
func (f *Flow) expand(ctx context.Context, x *scheduler.Execution) error {
	id, err := strconv.ParseInt(x.Task.Instance, 10, 64)
	if err != nil {
		return x.Complete(ctx, nil) // not ours to understand: drop it
	}
	var st expandState
	_ = json.Unmarshal(x.Task.Data, &st)
	var sched scheduler.Schedule
	if st.Cursor != 0 && st.Crontab != "" {
		sched, err = policy.ParseCron(st.Crontab, st.Timezone)
	}
	if st.Cursor == 0 || st.Crontab == "" || err != nil {
		c, ok, err := f.expandPolicy(ctx, id)
		if err != nil || !ok {
			if err == nil {
				err = x.Complete(ctx, nil)
			}
			return err
		}
		st.Crontab, st.Timezone, sched = c.Schedule.Crontab, c.Schedule.Timezone, c.Schedule.Cron
	}
	now := x.Now()
	data, _ := json.Marshal(expandState{Crontab: st.Crontab, Timezone: st.Timezone})
	// The batch goes from the policy's tables to cron-job rows in the
	// completion's own statement, without leaving the database.
	e := store.PolicyEnqueue{
		PolicyID: id, After: st.Cursor, Limit: f.cfg.EnqueueBatchSize, TaskName: KindCronJob,
		InstancePrefix: "table:", InstanceSuffix: ":" + strconv.FormatInt(id, 10), At: now,
	}
	m := store.ExpandMove{Now: now, Done: sched.Next(now), Data: data}
	return x.CompleteBy(ctx, func(ctx context.Context, claim store.Task) ([]string, error) {
		created, next, err := f.st.CompleteExpand(ctx, claim, e, m)
		var wake []string
		if err == nil && (next != 0 || !m.Done.After(m.Now)) {
			wake = append(wake, claim.Name) // more tables in the instant
		}
		if err == nil && created > 0 && !e.At.After(m.Now) {
			wake = append(wake, e.TaskName)
		}
		return wake, err
	})
}

// expandPolicy reads the policy of a policy-expand row: ok false when the
// row should go (policy gone, disabled or no longer a crontab policy).
func (f *Flow) expandPolicy(ctx context.Context, id int64) (policy.Content, bool, error) {
	p, err := f.st.GetPolicyByID(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		f.skip(KindPolicyExpand, "policy gone")
		return policy.Content{}, false, nil
	}
	if err != nil {
		return policy.Content{}, false, err
	}
	want, c, err := wantsExpand(p)
	if err != nil || !want {
		if err != nil {
			f.cfg.Log.Warn("policy-expand: policy content no longer valid; dropping its row", zap.Int64("policy", id), zap.Error(err))
		}
		f.skip(KindPolicyExpand, "policy disabled")
		return policy.Content{}, false, nil
	}
	return c, true, nil
}
