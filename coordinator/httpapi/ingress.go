package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"go.uber.org/zap"

	"github.com/tms-dev/tms/coordinator/ingress"
	"github.com/tms-dev/tms/store"
)

// SourceWebhook labels the metrics of events posted to /v1/commit-events.
const SourceWebhook = "webhook"

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
	results, err := s.webhook.Ingest(r.Context(), events)
	for _, res := range results {
		s.metrics.commitResult(SourceWebhook, res.Status)
	}
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
func decodeEvents(w http.ResponseWriter, r *http.Request) ([]ingress.CommitEvent, int, error) {
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
	var events []ingress.CommitEvent
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
		events = []ingress.CommitEvent{ev}
	}
	return events, 0, nil
}

// decodeEvent decodes and validates one event object.
func decodeEvent(b []byte) (ingress.CommitEvent, error) {
	var ev ingress.CommitEvent
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
