package policy_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tms-dev/tms/policy"
)

// The parsers a user feeds, fuzzed (`make fuzz`); the checked-in corpora
// under testdata/fuzz run as ordinary tests in `make test`.

var fuzzTypes = []policy.Type{policy.Compaction, policy.ManifestRewrite, policy.SnapshotExpiry, policy.OrphanCleanup}

// FuzzPolicyContent: any content either parses or is refused with a
// *policy.Error naming a field under "content"; never a panic.
func FuzzPolicyContent(f *testing.F) {
	for i, c := range []string{
		`{"schedule": {"crontab": "0 3 * * *", "timezone": "Europe/Berlin"}, "minIntervalMs": 3600000}`,
		`{"schedule": {"onCommit": true}, "jobOptions": {"spark.executor.memory": "4g"}, "rewriteOptions": {"min-input-files": "5"}}`,
		`{"schedule": {"crontab": "@every 30s"}, "retain-last": 3, "older-than": "5d"}`,
		`{"schedule": {"crontab": "*/2 * * * * *"}, "older-than": "72h"}`,
		`{"schedule": {}}`, `null`, `[]`, `{"schedule": {"crontab": "CRON_TZ=UTC 0 3 * * *"}}`,
	} {
		f.Add(uint8(i), []byte(c))
	}
	f.Fuzz(func(t *testing.T, typ uint8, content []byte) {
		ty := fuzzTypes[int(typ)%len(fuzzTypes)]
		c, err := policy.ParseContent(ty, content)
		if err != nil {
			var pe *policy.Error
			if !errors.As(err, &pe) || !strings.HasPrefix(pe.Field, "content") || pe.Msg == "" {
				t.Fatalf("%s: error %q (%T) does not name a content field", ty, err, err)
			}
			return
		}
		if c.Type != ty {
			t.Fatalf("parsed type %s, want %s", c.Type, ty)
		}
		// What parsed once parses again the same.
		again, err := policy.ParseContent(ty, content)
		if err != nil || again.Type != c.Type || again.Schedule.OnCommit != c.Schedule.OnCommit {
			t.Fatalf("second parse differs: %v", err)
		}
	})
}

// FuzzPolicyDocument: a whole Gravitino-shaped policy document (the CLI's
// --content-file is its content; the API takes the document). Accepted
// documents round-trip: their re-encoding is accepted with the same type.
func FuzzPolicyDocument(f *testing.F) {
	f.Add([]byte(`{"name": "compact", "policyType": "system_iceberg_compaction", "enabled": true,
		"content": {"schedule": {"crontab": "0 3 * * *"}}}`))
	f.Add([]byte(`{"name": "expire", "policyType": "snapshot-expiry", "content": {"schedule": {"onCommit": true}}} trailing`))
	f.Add([]byte(`{"name": "-bad", "policyType": "x"}`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		spec, c, err := policy.Decode(bytes.NewReader(doc))
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error")
			}
			return
		}
		b, err := json.Marshal(spec)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		spec2, c2, err := policy.Decode(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("an accepted document re-encoded is refused: %v\n%s", err, b)
		}
		if spec2.PolicyType != spec.PolicyType || c2.Type != c.Type || spec2.Name != spec.Name {
			t.Fatalf("round trip changed the policy: %+v vs %+v", spec2, spec)
		}
	})
}

// FuzzCron: a crontab and time zone either parse, and then every next
// instant is strictly later, or are refused; never a panic or a loop.
func FuzzCron(f *testing.F) {
	for _, c := range [][2]string{
		{"0 3 * * *", "Europe/Berlin"}, {"*/2 * * * * *", ""}, {"@every 30s", "UTC"}, {"@hourly", "America/New_York"},
		{"0 2 * 3 0", "Europe/Berlin"}, {"TZ=UTC 0 * * * *", ""}, {"61 * * * *", ""}, {"0 3 * * *", "Mars/Olympus"},
	} {
		f.Add(c[0], c[1])
	}
	start := time.Date(2026, 3, 29, 0, 30, 0, 0, time.UTC) // a DST change in Europe
	f.Fuzz(func(t *testing.T, spec, tz string) {
		s, err := policy.ParseCron(spec, tz)
		if err != nil {
			return
		}
		at := start
		for range 5 {
			next := s.Next(at)
			if next.IsZero() {
				return // never fires again (e.g. Feb 30)
			}
			if !next.After(at) {
				t.Fatalf("%q in %q: next after %s is %s", spec, tz, at, next)
			}
			at = next
		}
	})
}
