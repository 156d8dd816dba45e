package store_test

import (
	"testing"

	"github.com/tms-dev/tms/store"
)

// BenchmarkLedger runs store.BenchLedger with b.N job rows on each backend
// and reports rows/s. For the figure in the README run it with
// -benchtime=10000x.
func BenchmarkLedger(b *testing.B) {
	for _, bc := range []struct {
		name string
		url  func(testing.TB) string
	}{
		{"postgres", pgSchemaURL},
		{"sqlite", sqliteURL},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s := openMigrated(b, bc.url(b))
			b.ResetTimer()
			rate, err := store.BenchLedger(b.Context(), s, b.N)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(rate, "rows/s")
		})
	}
}

func TestBenchLedgerSmoke(t *testing.T) {
	t.Parallel()
	for _, s := range []store.Store{openMigrated(t, pgSchemaURL(t)), openMigrated(t, sqliteURL(t))} {
		rate, err := store.BenchLedger(t.Context(), s, 20)
		if err != nil {
			t.Fatalf("%s: %v", s.Backend(), err)
		}
		if rate <= 0 {
			t.Fatalf("%s: rate %v", s.Backend(), rate)
		}
		_, err = store.BenchLedger(t.Context(), s, 0)
		if err == nil {
			t.Fatalf("%s: n=0 accepted", s.Backend())
		}
	}
}
