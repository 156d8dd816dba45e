package flow

import (
	"fmt"
	"strconv"

	"github.com/tms-dev/tms/store"
)

// The task kinds of the maintenance flow, and the key of each row: the
// one place a scheduled_tasks row's (task_name, task_instance) is spelled
// (see docs/architecture.md).
const (
	KindPolicyExpand = "policy-expand"
	KindCronJob      = "cron-job"
	KindCommitJob    = "commit-job"
	KindReconcile    = "reconcile"
	KindSync         = "sync"
)

// SyncKey and ReconcileKey are the singleton rows of the sync and
// reconcile kinds; every serve node inserts them if missing.
var (
	SyncKey      = store.TaskKey{Name: KindSync, Instance: "singleton"}
	ReconcileKey = store.TaskKey{Name: KindReconcile, Instance: "singleton"}
)

// ExpandKey is the policy-expand row of a policy.
func ExpandKey(policyID int64) store.TaskKey {
	return store.TaskKey{Name: KindPolicyExpand, Instance: strconv.FormatInt(policyID, 10)}
}

// CronJobKey is the cron-job row of a (table, policy).
func CronJobKey(tableID, policyID int64) store.TaskKey {
	return store.TaskKey{Name: KindCronJob, Instance: fmt.Sprintf("table:%d:%d", tableID, policyID)}
}

// CommitJobKey is the commit-job row of a table.
func CommitJobKey(tableID int64) store.TaskKey {
	return store.TaskKey{Name: KindCommitJob, Instance: strconv.FormatInt(tableID, 10)}
}
