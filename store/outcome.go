package store

import "encoding/json"

// Outcome is one element of a job row's outcomes column: what one
// maintenance type of the job did. The runner writes a JSON array of them
// (Finish.Outcomes, one per type of the row); the console, the HTTP API, the
// CLI and JobStats read them back. The JSON spelling is the column's schema
// and must not change: rows already in a ledger are read with it, and
// JobStats reads "type" and "outcome" in SQL.
type Outcome struct {
	// Type is the maintenance type (policy.Type: compaction,
	// snapshot-expiry, …).
	Type string `json:"type"`
	// Outcome is what the type did (chain.Outcome: done, skipped,
	// ended-drift, conflict, failed).
	Outcome string `json:"outcome"`
	// Reason says why, for a type that skipped or ended early; Error is a
	// failed type's error.
	Reason string `json:"reason,omitempty"`
	Error  string `json:"error,omitempty"`
	// BeforeSnapshotID and AfterSnapshotID are the table's snapshots
	// around the type; 0 (absent) when not known or nothing was committed.
	BeforeSnapshotID int64 `json:"before_snapshot_id,omitempty"`
	AfterSnapshotID  int64 `json:"after_snapshot_id,omitempty"`
	// DurationMs is the type's wall time in milliseconds; nil when the
	// element does not record it. The runner always records it (0 for a
	// type that did not run).
	DurationMs *int64 `json:"duration_ms,omitempty"`
}

// DecodeOutcomes decodes the row's outcomes column: nil for NULL, an error
// when the column is not an array of outcome objects (a row some other
// writer closed; Outcomes holds it as stored).
func (j Job) DecodeOutcomes() ([]Outcome, error) {
	if len(j.Outcomes) == 0 {
		return nil, nil
	}
	var out []Outcome
	if err := json.Unmarshal(j.Outcomes, &out); err != nil {
		return nil, err
	}
	return out, nil
}
