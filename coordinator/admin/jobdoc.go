package admin

import (
	"encoding/json"
	"time"

	"github.com/tms-dev/tms/store"
)

// This file is the JSON documents of job rows, and of the tables and
// metrics rows they come with, as the HTTP API (/v1/jobs, /v1/tables) and
// the CLI (jobs and tables --json) print them: one spelling, camelCase.

// JobDoc is a job row in JSON, without its spec and outcomes (see
// JobDetail).
type JobDoc struct {
	ID               int64      `json:"id"`
	ExternalJobID    string     `json:"externalJobId"`
	Submitter        string     `json:"submitter"` // local, command or gravitino; empty if unknown
	TableID          int64      `json:"tableId"`
	PolicyID         int64      `json:"policyId"`
	Types            []string   `json:"types"`
	Trigger          string     `json:"trigger"`
	Status           string     `json:"status"`
	InFlight         bool       `json:"inFlight"`
	Fence            int64      `json:"fence"`
	BeforeSnapshotID *int64     `json:"beforeSnapshotId"`
	AfterSnapshotID  *int64     `json:"afterSnapshotId"`
	Error            string     `json:"error,omitempty"`
	CreatedAt        time.Time  `json:"createdAt"`
	StartedAt        *time.Time `json:"startedAt"`
	FinishedAt       *time.Time `json:"finishedAt"`
}

// JobDocOf returns j for printing.
func JobDocOf(j store.Job) JobDoc {
	return JobDoc{ID: j.ID, ExternalJobID: j.JobID, Submitter: j.Submitter, TableID: j.TableID, PolicyID: j.PolicyID, Types: j.Types,
		Trigger: string(j.Trigger), Status: string(j.Status), InFlight: j.InFlight(), Fence: j.Fence,
		BeforeSnapshotID: j.BeforeSnapshotID, AfterSnapshotID: j.AfterSnapshotID, Error: j.Error,
		CreatedAt: j.CreatedAt, StartedAt: optTime(j.StartedAt), FinishedAt: optTime(j.FinishedAt)}
}

// JobDocsOf returns jobs for printing.
func JobDocsOf(jobs []store.Job) []JobDoc {
	out := make([]JobDoc, len(jobs))
	for i, j := range jobs {
		out[i] = JobDocOf(j)
	}
	return out
}

// JobDetail is one job row with its table, the per-type outcomes the
// runner recorded (the outcomes column as stored, an array of
// store.Outcome; null until the job finished), its spec, and the table's
// metrics at the before and after snapshots (null where none).
type JobDetail struct {
	JobDoc
	Table         TableDoc        `json:"table"`
	Outcomes      json.RawMessage `json:"outcomes"`
	Spec          json.RawMessage `json:"spec"`
	MetricsBefore *MetricsDoc     `json:"metricsBefore"`
	MetricsAfter  *MetricsDoc     `json:"metricsAfter"`
}

// JobDetailOf returns job j of table t for printing; ms are the table's
// metrics rows (store.ListSnapshotMetrics).
func JobDetailOf(j store.Job, t store.Table, ms []store.SnapshotMetrics) JobDetail {
	return JobDetail{JobDoc: JobDocOf(j), Table: TableDocOf(t), Outcomes: rawOrNull(j.Outcomes), Spec: rawOrNull(j.Spec),
		MetricsBefore: MetricsDocOf(store.MetricsAt(ms, j.BeforeSnapshotID, j.PolicyID)),
		MetricsAfter:  MetricsDocOf(store.MetricsAt(ms, j.AfterSnapshotID, j.PolicyID))}
}

// TableDoc is a registered table (one incarnation) in JSON.
type TableDoc struct {
	ID        int64     `json:"id"`
	Name      string    `json:"name"` // CATALOG.NAMESPACE.TABLE
	Catalog   string    `json:"catalog"`
	Namespace string    `json:"namespace"`
	Table     string    `json:"table"`
	UUID      string    `json:"uuid"`
	CreatedAt time.Time `json:"createdAt"`
}

// TableDocOf returns t for printing.
func TableDocOf(t store.Table) TableDoc {
	return TableDoc{ID: t.ID, Name: t.Catalog + "." + t.Namespace + "." + t.Name, Catalog: t.Catalog,
		Namespace: t.Namespace, Table: t.Name, UUID: t.UUID, CreatedAt: t.CreatedAt}
}

// MetricsDoc is a metrics row in JSON.
type MetricsDoc struct {
	SnapshotID int64           `json:"snapshotId"`
	PolicyID   int64           `json:"policyId"`
	RecordedAt time.Time       `json:"recordedAt"`
	Value      json.RawMessage `json:"value"`
}

// MetricsDocOf returns m for printing, nil for nil.
func MetricsDocOf(m *store.SnapshotMetrics) *MetricsDoc {
	if m == nil {
		return nil
	}
	return &MetricsDoc{SnapshotID: m.SnapshotID, PolicyID: m.PolicyID, RecordedAt: m.RecordedAt, Value: m.Value}
}

// optTime is t, nil when zero.
func optTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// rawOrNull is v, or JSON null when empty.
func rawOrNull(v json.RawMessage) json.RawMessage {
	if len(v) == 0 {
		return json.RawMessage("null")
	}
	return v
}
