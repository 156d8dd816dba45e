package store

import (
	"fmt"
	"strings"
	"time"
)

// This file declares the commit-event idempotency keys (table commit_event):
// TxWriter.RecordCommitEvent records one in the transaction that upserts the
// table's commit-job, Scheduler.WithTx opens such a transaction outside any
// claim, and Store.PurgeCommitEvents drops old keys. Both backends implement
// them in commit_events_postgres.go and commit_events_sqlite.go.

// MaxEventIDLen is the longest commit event id the store accepts, in bytes.
const MaxEventIDLen = 256

// CommitEvent is a row of commit_event: the idempotency key of one commit
// event, with what it resolved to.
type CommitEvent struct {
	// EventID is the sender's id of the event. Required, at most
	// MaxEventIDLen bytes.
	EventID string
	// TableID is the maintained_table row the event is about. Must be
	// positive.
	TableID int64
	// SnapshotID is the snapshot the commit produced; nil if the sender did
	// not say.
	SnapshotID *int64
	// ReceivedAt is when the event arrived. Zero means the store's clock.
	ReceivedAt time.Time
}

func validateCommitEvent(ev CommitEvent) error {
	switch {
	case strings.TrimSpace(ev.EventID) == "":
		return fmt.Errorf("%w: commit event id must not be empty", ErrInvalidArgument)
	case len(ev.EventID) > MaxEventIDLen:
		return fmt.Errorf("%w: commit event id is %d bytes, at most %d allowed", ErrInvalidArgument, len(ev.EventID), MaxEventIDLen)
	case ev.TableID <= 0:
		return fmt.Errorf("%w: commit event %q needs a table id, got %d", ErrInvalidArgument, ev.EventID, ev.TableID)
	}
	return nil
}
