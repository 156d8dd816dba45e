package jobspec

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/tms-dev/tms/policy"
)

// FuzzJobSpec: a job row's spec either parses, and then its re-encoding
// parses to the same spec, or is refused wrapping ErrInvalidSpec; a
// credential-shaped key anywhere is refused, naming its path.
func FuzzJobSpec(f *testing.F) {
	f.Add([]byte(`{"catalog": {"warehouse-dir": "/data/td"}, "table": "tms.small_files", "steps": [{"type": "compaction"}]}`))
	f.Add([]byte(`{"catalog": {"name": "prod", "properties": {"type": "rest", "uri": "http://c"}}, "table": "db.t",
		"steps": [{"type": "compaction", "policy": {"rewriteOptions": {"min-input-files": "2"}}}, {"type": "snapshot-expiry"}]}`))
	f.Add([]byte(`{"catalog": {"name": "prod", "properties": {"type": "rest", "token": "x"}}, "table": "db.t", "steps": [{"type": "compaction"}]}`))
	f.Add([]byte(`{"catalog": {}, "table": "t", "steps": []}`))
	f.Add([]byte(`{"unknown": {"s3.secret-access-key": "k"}}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		s, err := Parse(raw)
		if err != nil {
			if !errors.Is(err, ErrInvalidSpec) {
				t.Fatalf("error does not wrap ErrInvalidSpec: %v", err)
			}
			return
		}
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		again, err := Parse(b)
		if err != nil {
			t.Fatalf("an accepted spec re-encoded is refused: %v\n%s", err, b)
		}
		// Policies are raw JSON: compare them by meaning.
		for i := range s.Steps {
			s.Steps[i].Policy, again.Steps[i].Policy = normalJSON(s.Steps[i].Policy), normalJSON(again.Steps[i].Policy)
		}
		if !reflect.DeepEqual(s, again) {
			t.Fatalf("round trip changed the spec:\n%+v\n%+v", s, again)
		}
		for k := range s.Catalog.Properties {
			if policy.IsCredentialKey(k) {
				t.Fatalf("accepted credential-shaped key %q", k)
			}
		}
		if strings.TrimSpace(s.Table) == "" {
			t.Fatal("accepted a spec without a table")
		}
	})
}

func normalJSON(raw json.RawMessage) json.RawMessage {
	if raw == nil {
		return nil
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return raw
	}
	b, _ := json.Marshal(v)
	return b
}
