package httpapi_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/tms-dev/tms/coordinator/flow"
	"github.com/tms-dev/tms/coordinator/httpapi"
	"github.com/tms-dev/tms/coordinator/ingress"
	"github.com/tms-dev/tms/coordinator/scheduler"
	"github.com/tms-dev/tms/store"
	"github.com/tms-dev/tms/store/testdb"
)

// Benchmark shape: 64 clients on loopback post one event per request,
// spread over 1,000 tables, while an engine drains the commit-jobs as they
// become due.
const (
	benchClients = 64
	benchTables  = 1000
)

// BenchmarkWebhookIngest measures POST /v1/commit-events against
// PostgreSQL through a real listener: events/s, and the coalescing ratio
// (events per commit-job row created) with the default commit delay while
// a node runs the commit-jobs (a no-op handler) as they fall due. Run it
// with a fixed count, e.g. -benchtime 20000x.
func BenchmarkWebhookIngest(b *testing.B) {
	ctx := context.Background()
	dbURL := testdb.PostgresURL(b)
	_, err := store.Migrate(ctx, dbURL, zap.NewNop())
	require.NoError(b, err)
	st, err := store.Open(ctx, dbURL, zap.NewNop())
	require.NoError(b, err)
	defer st.Close()
	refs := make([]store.TableRef, benchTables)
	for i := range refs {
		refs[i] = store.TableRef{Catalog: "bench", Namespace: "db", Name: fmt.Sprint("t", i), UUID: fmt.Sprint("u", i)}
	}
	_, err = st.RegisterTables(ctx, refs)
	require.NoError(b, err)

	// A node that runs commit-jobs, so rows are consumed and re-created
	// as in production.
	var executed atomic.Int64
	eng, err := scheduler.New(st, scheduler.Config{NodeID: "bench", PollInterval: 100 * time.Millisecond},
		scheduler.Kind{Name: flow.KindCommitJob, Handler: func(context.Context, *scheduler.Execution) error {
			executed.Add(1)
			return nil
		}})
	require.NoError(b, err)
	srv, err := httpapi.New(httpapi.Config{Store: st, CommitToken: commitToken, Log: zap.NewNop()})
	require.NoError(b, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(b, err)
	runCtx, stop := context.WithCancel(ctx)
	var bg sync.WaitGroup
	bg.Go(func() { _ = eng.Run(runCtx) })
	bg.Go(func() { _ = srv.Serve(runCtx, ln) })
	defer func() {
		stop()
		bg.Wait()
	}()
	transport := &http.Transport{MaxIdleConnsPerHost: benchClients, MaxConnsPerHost: benchClients}
	defer transport.CloseIdleConnections()
	client := &http.Client{Transport: transport, Timeout: 30 * time.Second}
	endpoint := "http://" + ln.Addr().String() + "/v1/commit-events"
	run := rand.Text()[:8] // event ids stay unique across b.N rounds

	var next, enqueued, failed atomic.Int64
	var firstErr atomic.Value
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for range benchClients {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(b.N) {
					return
				}
				body := fmt.Sprintf(`{"catalog":"bench","namespace":"db","table":"t%d","snapshotId":%d,"eventId":"%s-%d"}`, i%benchTables, i, run, i)
				status, err := postEvent(client, endpoint, body)
				switch {
				case err != nil:
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err)
				case status == ingress.StatusEnqueued:
					enqueued.Add(1)
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if err, _ := firstErr.Load().(error); err != nil {
		b.Fatalf("%d of %d posts failed; first: %v", failed.Load(), b.N, err)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "events/s")
	b.ReportMetric(float64(b.N)/float64(max(1, enqueued.Load())), "events/commit-job")
	b.ReportMetric(float64(enqueued.Load()), "commit-jobs")
}

// postEvent posts one event and returns its status.
func postEvent(client *http.Client, endpoint, body string) (string, error) {
	req, err := http.NewRequest(http.MethodPost, endpoint, strings.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+commitToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var out struct {
		Results []ingress.EventResult
		Error   string
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusAccepted || len(out.Results) != 1 {
		return "", fmt.Errorf("status %d %q, results %+v, decode error %v", resp.StatusCode, out.Error, out.Results, err)
	}
	return out.Results[0].Status, nil
}
