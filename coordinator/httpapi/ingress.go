package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"go.uber.org/zap"

	"github.com/tms-dev/tms/store"
)

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

// SourceWebhook labels the metrics of events posted to /v1/commit-events.
const SourceWebhook = "webhook"

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

// commitEvents handles POST /v1/commit-events: authenticate, read and
// validate the whole body, resolve the tables, then record every event of a
// known table and upsert its commit-job in one transaction.
func (s *Server) commitEvents(w http.ResponseWriter, r *http.Request) {
	const disabled = "the commit webhook is disabled: no commit token and no admin token are configured (serve --commit-token env:NAME or file:PATH)"
	if !authorize(w, r, disabled, s.commit, s.admin) {
		s.metrics.rejected("unauthorized")
		return
	}
	events, code, err := decodeEvents(w, r)
	if err != nil {
		reason := "bad-request"
		if code == http.StatusRequestEntityTooLarge {
			reason = "too-large"
		}
		s.metrics.rejected(reason)
		writeError(w, code, err.Error())
		return
	}
	results, err := s.ingest(r.Context(), events)
	if err != nil {
		s.metrics.rejected("store-error")
		s.cfg.Log.Warn("commit events not recorded", zap.Int("events", len(events)), zap.Error(err))
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, "commit events not recorded, retry: "+err.Error())
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]any{"results": results})
}

// decodeEvents reads the body: one event object or an array of them, at
// most MaxBodyBytes, no unknown fields, every required field set. It
// returns the HTTP status to answer with on an error.
func decodeEvents(w http.ResponseWriter, r *http.Request) ([]CommitEvent, int, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return nil, http.StatusRequestEntityTooLarge, fmt.Errorf("request body exceeds the %d-byte (64 KiB) limit; send fewer events per request", MaxBodyBytes)
		}
		return nil, http.StatusBadRequest, fmt.Errorf("read request body: %w", err)
	}
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) == 0 {
		return nil, http.StatusBadRequest, errors.New("empty body: send a commit event object or an array of them")
	}
	var events []CommitEvent
	if trimmed[0] == '[' {
		var raw []json.RawMessage
		if err := strictDecode(trimmed, &raw); err != nil {
			return nil, http.StatusBadRequest, fmt.Errorf("malformed JSON: %w", err)
		}
		if len(raw) == 0 {
			return nil, http.StatusBadRequest, errors.New("empty array: send at least one commit event")
		}
		for i, m := range raw {
			ev, err := decodeEvent(m)
			if err != nil {
				return nil, http.StatusBadRequest, fmt.Errorf("event [%d]: %w", i, err)
			}
			events = append(events, ev)
		}
	} else {
		ev, err := decodeEvent(trimmed)
		if err != nil {
			return nil, http.StatusBadRequest, err
		}
		events = []CommitEvent{ev}
	}
	return events, 0, nil
}

// decodeEvent decodes and validates one event object.
func decodeEvent(b []byte) (CommitEvent, error) {
	var ev CommitEvent
	if err := strictDecode(b, &ev); err != nil {
		return ev, err
	}
	for _, f := range []struct{ name, value string }{
		{"eventId", ev.EventID}, {"catalog", ev.Catalog}, {"namespace", string(ev.Namespace)}, {"table", ev.Table},
	} {
		if strings.TrimSpace(f.value) == "" {
			return ev, fmt.Errorf("field %q is required", f.name)
		}
	}
	if len(ev.EventID) > store.MaxEventIDLen {
		return ev, fmt.Errorf("field \"eventId\" is %d bytes, at most %d allowed", len(ev.EventID), store.MaxEventIDLen)
	}
	return ev, nil
}

// strictDecode decodes one JSON value into v, refusing unknown fields and
// trailing data, with messages that name the field.
func strictDecode(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return explainJSON(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("malformed JSON: unexpected data after the JSON value")
	}
	return nil
}

// explainJSON turns encoding/json's errors into messages for a sender.
func explainJSON(err error) error {
	if te, ok := errors.AsType[*json.UnmarshalTypeError](err); ok {
		if te.Field == "" {
			return fmt.Errorf("malformed JSON: want an object or an array of objects, got a JSON %s", te.Value)
		}
		return fmt.Errorf("field %q: want a JSON %s, got a JSON %s", te.Field, jsonKind(te.Type.Kind().String()), te.Value)
	}
	if msg, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return fmt.Errorf("unknown field %s (allowed: catalog, namespace, table, snapshotId, eventId)", msg)
	}
	if _, ok := errors.AsType[*json.SyntaxError](err); ok || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return fmt.Errorf("malformed JSON: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
	return err
}

// jsonKind names a Go kind as a JSON type.
func jsonKind(k string) string {
	switch k {
	case "int64", "int", "float64":
		return "number"
	case "struct", "map":
		return "object"
	case "slice":
		return "array"
	}
	return k
}

// ingest resolves each event's table, then has the batcher record the
// events of known tables and upsert their commit-jobs in one transaction.
func (s *Server) ingest(ctx context.Context, events []CommitEvent) ([]EventResult, error) {
	results := make([]EventResult, len(events))
	type tableKey struct{ catalog, namespace, table string }
	tables := map[tableKey]int64{}
	req := &ingestRequest{done: make(chan error, 1)}
	for i, ev := range events {
		results[i].EventID = ev.EventID
		k := tableKey{ev.Catalog, string(ev.Namespace), ev.Table}
		id, seen := tables[k]
		if !seen {
			tbl, err := s.cfg.Store.FindTable(ctx, k.catalog, k.namespace, k.table)
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
		if err := s.batch.submit(ctx, req); err != nil {
			return nil, err
		}
	}
	for _, res := range results {
		s.metrics.commitResult(SourceWebhook, res.Status)
	}
	return results, nil
}
