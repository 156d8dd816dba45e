package chain

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"

	"github.com/apache/iceberg-go/catalog/rest"
	"github.com/apache/iceberg-go/table"

	"github.com/tms-dev/tms/catalogs"
)

// A commit whose answer was lost.
//
// A REST catalog can apply a commit and still fail to answer it: the
// connection drops, a proxy gives up (502, 504), the server fails after
// its write (500; the REST spec calls all of these CommitStateUnknown). The
// error is then no evidence either way, so the chain asks the table. It
// reloads it, and when the table holds what the attempt staged (the
// snapshot it adds; for an expiry, exactly the snapshots it keeps), the
// commit landed and the type goes on as after any commit. When it does not,
// and the error says the request may not have been applied (a 5xx, a
// dropped or refused connection, a timeout), the attempt is made again on
// the reloaded table within the same rebase budget. Every attempt asserts
// the snapshot it was built on, so at most one of them lands; a first
// attempt that lands late makes the next one fail its assertion, and the
// check after that failure (or before the next attempt) finds it.

// staged is what one commit attempt would make of the table.
type staged struct {
	// snapshot is the snapshot the attempt adds, 0 when it adds none.
	snapshot int64
	// keeps are the snapshot ids of the staged metadata: for an attempt
	// that adds none (an expiry), the table it wants.
	keeps map[int64]bool
	// base is the metadata location the attempt was built on.
	base string
}

// stage records what txn, built on cur, would commit.
func stage(cur *table.Table, txn *table.Transaction) (staged, error) {
	st, err := txn.StagedTable()
	if err != nil {
		return staged{}, err
	}
	out := staged{keeps: map[int64]bool{}, base: cur.MetadataLocation()}
	had := map[int64]bool{}
	for _, snap := range cur.Metadata().Snapshots() {
		had[snap.SnapshotID] = true
	}
	for _, snap := range st.Metadata().Snapshots() {
		out.keeps[snap.SnapshotID] = true
		if !had[snap.SnapshotID] {
			out.snapshot = snap.SnapshotID
		}
	}
	return out, nil
}

// landedIn reports whether tbl holds the commit of one of the attempts.
func landedIn(tbl *table.Table, attempts []staged) bool {
	meta := tbl.Metadata()
	for _, a := range attempts {
		if a.snapshot != 0 {
			if meta.SnapshotByID(a.snapshot) != nil {
				return true
			}
			continue
		}
		if tbl.MetadataLocation() == a.base {
			continue // nothing was committed on the base
		}
		snaps := meta.Snapshots()
		if len(snaps) != len(a.keeps) {
			continue
		}
		same := true
		for _, snap := range snaps {
			if !a.keeps[snap.SnapshotID] {
				same = false
				break
			}
		}
		if same {
			return true
		}
	}
	return false
}

// afterFailedCommit reloads the table after a commit returned err and
// tells what the commit loop does next: landed (the table holds one of
// the attempts: fresh is the committed table), or retry (the catalog may
// not have applied it, and the table shows it did not). A table that
// cannot be loaded is neither: the commit's state is unknown, and the
// written files are kept (see cleanup).
func (s *stepState) afterFailedCommit(ctx context.Context, err error, attempts []staged) (fresh *table.Table, landed, retry bool) {
	if ctx.Err() != nil {
		return nil, false, false
	}
	fresh, lerr := catalogs.LoadTable(ctx, s.r.cat, s.r.ident)
	if lerr != nil {
		return nil, false, false
	}
	if landedIn(fresh, attempts) {
		s.lostAnswers++
		return fresh, true, false
	}
	if retryable(err) {
		s.retriedCommits++
		return fresh, false, true
	}
	return fresh, false, false
}

// retryable reports whether a commit error says the request may not have
// reached the catalog or may not have been applied, so that trying again
// can succeed: a REST 5xx (ErrCommitStateUnknown, ErrServiceUnavailable,
// ErrServerError) or a transport failure. A refusal (4xx, a conflict, a
// bad request) is not.
func retryable(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	if errors.Is(err, rest.ErrCommitStateUnknown) || errors.Is(err, rest.ErrServiceUnavailable) || errors.Is(err, rest.ErrServerError) {
		return true
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// lostAnswerText is what the reason of a done type says about its commits
// that returned an error.
func (s *stepState) lostAnswerText() string {
	out := ""
	if s.retriedCommits > 0 {
		out += fmt.Sprintf("; %d commits retried after the catalog had not applied them", s.retriedCommits)
	}
	if s.lostAnswers > 0 {
		out += fmt.Sprintf("; the catalog's answer to %d commits was lost, the reloaded table shows they landed", s.lostAnswers)
	}
	return out
}
