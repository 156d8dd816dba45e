package flow

import (
	"context"
	"errors"
	"fmt"

	"go.uber.org/zap"

	"github.com/tms-dev/tms/coordinator/scheduler"
	"github.com/tms-dev/tms/policy"
	"github.com/tms-dev/tms/store"
)

// ---- cron-job ----

// cronJob runs one (table, policy) if no job is in flight on the table and
// the policy's cooldown has passed.
func (f *Flow) cronJob(ctx context.Context, x *scheduler.Execution) error {
	var tableID, policyID int64
	if _, err := fmt.Sscanf(x.Task.Instance, "table:%d:%d", &tableID, &policyID); err != nil {
		f.skip(KindCronJob, "bad instance")
		return x.Complete(ctx, nil)
	}
	// A busy table is the common case when policies collide: defer before
	// reading the policy and the table.
	if busy, err := f.busy(ctx, tableID); err != nil || busy {
		if err != nil {
			return err
		}
		return f.deferBusy(ctx, x, KindCronJob, tableID, zap.Int64("table", tableID), zap.Int64("policy", policyID))
	}
	p, err := f.st.GetPolicyByID(ctx, policyID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && (p.Deleted() || !p.Enabled)) {
		f.skip(KindCronJob, "policy disabled", zap.Int64("policy", policyID))
		return x.Complete(ctx, nil)
	}
	if err != nil {
		return err
	}
	t, ok := policy.MaintenanceTypeOf(p.Type)
	if !ok {
		f.skip(KindCronJob, "unknown policy type", zap.Int64("policy", policyID))
		return x.Complete(ctx, nil)
	}
	c, err := policy.ParseContent(t, p.Content)
	if err != nil {
		f.skip(KindCronJob, "invalid policy", zap.Int64("policy", policyID), zap.Error(err))
		return x.Complete(ctx, nil)
	}
	tbl, err := f.liveTable(ctx, tableID)
	if errors.Is(err, store.ErrNotFound) || errors.Is(err, errSuperseded) {
		f.skip(KindCronJob, "table gone", zap.Int64("table", tableID), zap.Error(err))
		return x.Complete(ctx, nil)
	}
	if err != nil {
		return err
	}
	v, err := f.gate(ctx, tbl.ID, []gated{{p, c}}, x.Now())
	if err != nil {
		return err
	}
	fields := []zap.Field{zap.Int64("table", tableID), zap.Int64("policy", policyID)}
	switch {
	case len(v.run) == 0:
		return f.deferUntil(ctx, x, KindCronJob, "cooldown", v.until, nil, fields...)
	}
	return f.start(ctx, x, KindCronJob, tbl, v.run, store.TriggerCron)
}
