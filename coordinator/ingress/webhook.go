package ingress

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tms-dev/tms/coordinator/flow"
	"github.com/tms-dev/tms/internal/invalid"
	"github.com/tms-dev/tms/store"
)

// This file is the commit webhook's logic, below its HTTP handler
// (package httpapi decodes and authenticates the request): commit events
// resolved to maintained tables, recorded for idempotency, and turned into
// the tables' commit-jobs.

// What happened to one commit event (the "status" of its result).
const (
	// StatusEnqueued: the table had no commit-job row; one was created.
	StatusEnqueued = "enqueued"
	// StatusCoalesced: the table's commit-job row existed; the event was
	// folded into it.
	StatusCoalesced = "coalesced"
	// StatusDuplicate: the event id was seen before; nothing was done.
	StatusDuplicate = "duplicate"
	// StatusUnknownTable: TMS does not maintain the table (not registered,
	// so no policy reaches it); nothing was done.
	StatusUnknownTable = "unknown-table"
)

// CommitEvent is one element of the webhook's body.
type CommitEvent struct {
	// Catalog is the catalog name as configured in TMS. Required.
	Catalog string `json:"catalog"`
	// Namespace is the table's namespace, levels joined with "." ("db" or
	// "db.sales"), or a JSON array of levels (["db", "sales"]). Required.
	Namespace Namespace `json:"namespace"`
	// Table is the table name. Required.
	Table string `json:"table"`
	// SnapshotID is the snapshot the commit produced. Optional.
	SnapshotID *int64 `json:"snapshotId,omitempty"`
	// EventID identifies the event for idempotency: a repeat is answered
	// "duplicate". Required, at most 256 bytes.
	EventID string `json:"eventId"`
}

// Namespace is a namespace given as "a.b" or as ["a", "b"]; it holds the
// dotted form.
type Namespace string

// UnmarshalJSON accepts a string or an array of strings.
func (n *Namespace) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*n = Namespace(s)
		return nil
	}
	var levels []string
	if err := json.Unmarshal(b, &levels); err != nil {
		return errors.New(`field "namespace": want a string ("db.sales") or an array of strings (["db", "sales"])`)
	}
	for _, l := range levels {
		if strings.TrimSpace(l) == "" || strings.Contains(l, ".") {
			return fmt.Errorf(`field "namespace": level %q must not be empty or contain '.'`, l)
		}
	}
	*n = Namespace(strings.Join(levels, "."))
	return nil
}

// EventResult is what happened to one event.
type EventResult struct {
	EventID string `json:"eventId"`
	Status  string `json:"status"`
	// TableID is the maintained table the event resolved to; absent for
	// unknown tables.
	TableID int64 `json:"tableId,omitempty"`
}

// WebhookConfig configures a Webhook.
type WebhookConfig struct {
	// Store resolves tables and records events. Required.
	Store store.Store
	// CommitJobs upserts each event's commit-job, due after the flow's
	// commit delay so a burst of commits coalesces into one job
	// (flow.Flow.CommitJobs). The zero value makes them due at once.
	CommitJobs flow.CommitJobs
	// OnCommitJobDue, if set, is called after a transaction upserted
	// commit-jobs, with the time they fall due (see httpapi.Config).
	OnCommitJobDue func(at time.Time)
	// Now is the clock of due times and received_at. Defaults to time.Now.
	Now func() time.Time
}

// Webhook turns commit events into commit-jobs.
type Webhook struct {
	tables store.Store
	batch  *batcher
}

// NewWebhook returns the webhook over cfg.Store.
func NewWebhook(cfg WebhookConfig) (*Webhook, error) {
	if cfg.Store == nil {
		return nil, fmt.Errorf("%w: commit webhook: a store is required", invalid.ErrArgument)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Webhook{tables: cfg.Store, batch: &batcher{sch: cfg.Store, now: cfg.Now, commits: cfg.CommitJobs, onDue: cfg.OnCommitJobDue}}, nil
}

// Ingest resolves each event's table, then has the group commit record the
// events of known tables and upsert their commit-jobs in one transaction
// (shared with the other requests queued meanwhile). An event of a table
// TMS does not maintain is answered StatusUnknownTable.
func (w *Webhook) Ingest(ctx context.Context, events []CommitEvent) ([]EventResult, error) {
	results := make([]EventResult, len(events))
	type tableKey struct{ catalog, namespace, table string }
	tables := map[tableKey]int64{}
	req := &ingestRequest{done: make(chan error, 1)}
	for i, ev := range events {
		results[i].EventID = ev.EventID
		k := tableKey{ev.Catalog, string(ev.Namespace), ev.Table}
		id, seen := tables[k]
		if !seen {
			tbl, err := w.tables.FindTable(ctx, k.catalog, k.namespace, k.table)
			switch {
			case errors.Is(err, store.ErrNotFound):
			case err != nil:
				return nil, err
			default:
				id = tbl.ID
			}
			tables[k] = id
		}
		if id == 0 {
			results[i].Status = StatusUnknownTable
			continue
		}
		results[i].TableID = id
		req.events = append(req.events, store.CommitEvent{EventID: ev.EventID, TableID: id, SnapshotID: ev.SnapshotID})
		req.results = append(req.results, &results[i])
	}
	if len(req.events) > 0 {
		if err := w.batch.submit(ctx, req); err != nil {
			return nil, err
		}
	}
	return results, nil
}
