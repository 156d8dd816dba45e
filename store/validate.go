package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode"
)

// This file holds the argument checks both backends run before any SQL, so
// a bad argument gives the same ErrInvalidArgument message on either.

func validateTableRef(ref TableRef) error {
	for _, f := range []struct{ name, value string }{
		{"catalog", ref.Catalog}, {"namespace", ref.Namespace}, {"name", ref.Name}, {"uuid", ref.UUID},
	} {
		if strings.TrimSpace(f.value) == "" {
			return fmt.Errorf("%w: table %s must not be empty", ErrInvalidArgument, f.name)
		}
	}
	return nil
}

// validateNewJob checks j and returns its types joined for the types column.
func validateNewJob(j NewJob) (types string, err error) {
	if j.TableID <= 0 {
		return "", fmt.Errorf("%w: job table id must be positive, got %d", ErrInvalidArgument, j.TableID)
	}
	if j.PolicyID < 0 {
		return "", fmt.Errorf("%w: job policy id must be >= 0 (0 = no policy), got %d", ErrInvalidArgument, j.PolicyID)
	}
	switch j.Trigger {
	case TriggerCron, TriggerCommit, TriggerManual:
	default:
		return "", fmt.Errorf("%w: job trigger %q is not one of cron, commit, manual", ErrInvalidArgument, j.Trigger)
	}
	if len(j.Spec) > 0 && !json.Valid(j.Spec) {
		return "", fmt.Errorf("%w: job spec is not valid JSON", ErrInvalidArgument)
	}
	return joinTypes(j.Types)
}

// joinTypes encodes the chain for the types column.
func joinTypes(types []string) (string, error) {
	if len(types) == 0 {
		return "", fmt.Errorf("%w: job needs at least one maintenance type", ErrInvalidArgument)
	}
	for _, t := range types {
		if t == "" || strings.ContainsFunc(t, func(r rune) bool { return r == ',' || unicode.IsSpace(r) }) {
			return "", fmt.Errorf("%w: maintenance type %q must be non-empty without commas or spaces", ErrInvalidArgument, t)
		}
	}
	return strings.Join(types, ","), nil
}

// splitTypes decodes the types column.
func splitTypes(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

func validateFinish(f Finish) error {
	if !f.Status.Terminal() {
		return fmt.Errorf("%w: finish status %q is not terminal (succeeded, failed, skipped, cancelled, lost)", ErrInvalidArgument, f.Status)
	}
	if len(f.Outcomes) > 0 {
		if !json.Valid(f.Outcomes) {
			return fmt.Errorf("%w: finish outcomes are not valid JSON", ErrInvalidArgument)
		}
		if t := bytes.TrimSpace(f.Outcomes); t[0] != '[' {
			return fmt.Errorf("%w: finish outcomes must be a JSON array", ErrInvalidArgument)
		}
	}
	return nil
}

func validateMetrics(m SnapshotMetrics) error {
	if m.TableID <= 0 {
		return fmt.Errorf("%w: metrics table id must be positive, got %d", ErrInvalidArgument, m.TableID)
	}
	if m.PolicyID < 0 {
		return fmt.Errorf("%w: metrics policy id must be >= 0 (0 = no policy), got %d", ErrInvalidArgument, m.PolicyID)
	}
	return validateObject("metrics value", m.Value)
}

// validateObject accepts exactly one JSON object.
func validateObject(what string, v json.RawMessage) error {
	if !json.Valid(v) {
		return fmt.Errorf("%w: %s is not valid JSON", ErrInvalidArgument, what)
	}
	if t := bytes.TrimSpace(v); len(t) == 0 || t[0] != '{' {
		return fmt.Errorf("%w: %s must be a JSON object", ErrInvalidArgument, what)
	}
	return nil
}

func validateLimit(limit int) error {
	if limit <= 0 {
		return fmt.Errorf("%w: list limit must be positive, got %d", ErrInvalidArgument, limit)
	}
	return nil
}

// fenceError classifies a fenced write that changed no row, from the lookup
// made in the same transaction: no row is ErrNotFound; a row whose fence
// moved on, or that is finished, is ErrStaleFence.
func fenceError(op string, id, fence int64, exists bool, current int64, finished bool) error {
	switch {
	case !exists:
		return fmt.Errorf("%w: %s: job %d", ErrNotFound, op, id)
	case finished:
		return fmt.Errorf("%w: %s: job %d is already finished", ErrStaleFence, op, id)
	case current == fence:
		// The fence matches and the row is open, so the write's extra
		// condition failed: StartJob on a row another runner started.
		return fmt.Errorf("%w: %s: job %d was already started by another runner holding the same fence", ErrStaleFence, op, id)
	default:
		return fmt.Errorf("%w: %s: job %d has fence %d, write carried %d", ErrStaleFence, op, id, current, fence)
	}
}

func notFound(what string, id int64) error {
	return fmt.Errorf("%w: %s %d", ErrNotFound, what, id)
}
