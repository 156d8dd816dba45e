package store

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// This file declares the commit-event idempotency keys (table commit_event):
// TxWriter.RecordCommitEvent records one in the transaction that upserts the
// table's commit-job, Scheduler.WithTx opens such a transaction outside any
// claim, and Store.PurgeCommitEvents drops old keys. Recording and purging
// are written here once for both backends (on sqlStore's seam, sqlstore.go);
// WithTx, whose transactions differ, is in commit_events_postgres.go and
// commit_events_sqlite.go.

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

// recordCommitEvent is TxWriter.RecordCommitEvent in the transaction q: it
// inserts the event's key unless it is there.
func (s *sqlStore) recordCommitEvent(ctx context.Context, q dbQ, ev CommitEvent) (bool, error) {
	if err := validateCommitEvent(ev); err != nil {
		return false, err
	}
	var snapshot any // NULL unless the sender said
	if ev.SnapshotID != nil {
		snapshot = *ev.SnapshotID
	}
	ph := s.b.param
	n, err := q.exec(ctx, `
		INSERT INTO commit_event (event_id, table_id, snapshot_id, received_at) VALUES (`+ph(1)+`, `+ph(2)+`, `+ph(3)+`, `+ph(4)+`)
		ON CONFLICT (event_id) DO NOTHING`,
		ev.EventID, ev.TableID, snapshot, s.b.timeArg(orNow(ev.ReceivedAt, s.clock)))
	if err != nil {
		return false, s.b.wrap("record commit event", err)
	}
	return n == 1, nil
}

// PurgeCommitEvents deletes the keys received before before.
func (s *sqlStore) PurgeCommitEvents(ctx context.Context, before time.Time) (int64, error) {
	var n int64
	err := s.b.inTx(ctx, func(q dbQ) error {
		var err error
		n, err = q.exec(ctx, `DELETE FROM commit_event WHERE received_at < `+s.b.param(1), s.b.timeArg(utc(before)))
		return err
	})
	if err != nil {
		return 0, s.b.wrap("purge commit events", err)
	}
	return n, nil
}
