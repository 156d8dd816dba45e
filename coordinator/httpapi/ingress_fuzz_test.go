package httpapi

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tms-dev/tms/store"
)

// FuzzCommitEvents: any webhook body, one event or a batch, is decoded
// into events whose required fields are all set, or refused with a 4xx and
// a message; never a panic. Oversized bodies are 413.
func FuzzCommitEvents(f *testing.F) {
	f.Add([]byte(`{"catalog": "lake", "namespace": "db.sales", "table": "orders", "snapshotId": 5, "eventId": "e-1"}`))
	f.Add([]byte(`[{"catalog": "lake", "namespace": ["db", "sales"], "table": "orders", "eventId": "e-2"},
		{"catalog": "lake", "namespace": "db", "table": "t", "eventId": "e-3"}]`))
	f.Add([]byte(`[]`))
	f.Add([]byte(`{"catalog": "lake", "namespace": "db", "table": "t", "eventId": " "}`))
	f.Add([]byte(`{"catalog": "lake", "namespace": 7, "table": "t", "eventId": "x", "extra": 1}`))
	f.Add([]byte(`  {"catalog": "lake", "namespace": "db", "table": "t", "eventId": "x"} {}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		r := httptest.NewRequest(http.MethodPost, "/v1/commit-events", bytes.NewReader(body))
		events, code, err := decodeEvents(httptest.NewRecorder(), r)
		if err != nil {
			if code < 400 || code > 499 || err.Error() == "" {
				t.Fatalf("refused with %d %q", code, err)
			}
			if len(body) > MaxBodyBytes && code != http.StatusRequestEntityTooLarge {
				t.Fatalf("a %d-byte body answered %d", len(body), code)
			}
			return
		}
		if len(events) == 0 {
			t.Fatal("accepted no events")
		}
		for _, ev := range events {
			for name, v := range map[string]string{"catalog": ev.Catalog, "namespace": string(ev.Namespace), "table": ev.Table, "eventId": ev.EventID} {
				if strings.TrimSpace(v) == "" {
					t.Fatalf("accepted an event without %s: %+v", name, ev)
				}
			}
			if len(ev.EventID) > store.MaxEventIDLen {
				t.Fatalf("accepted a %d-byte event id", len(ev.EventID))
			}
		}
	})
}
