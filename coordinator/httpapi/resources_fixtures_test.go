package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/coordinator/flow"
	"github.com/tms-dev/tms/coordinator/httpapi"
	"github.com/tms-dev/tms/coordinator/submit"
	"github.com/tms-dev/tms/store"
)

// resNow is the resources' clock in tests.
var resNow = time.Date(2030, 6, 1, 12, 0, 0, 0, time.UTC)

// fakeSubmitter stands in for the external job system: it records Cancel
// calls and answers them from its table.
type fakeSubmitter struct {
	mu        sync.Mutex
	known     map[string]error // Cancel's answer per external id; absent: ErrUnknownJob
	cancelled []string
	// queued are jobs waiting for a slot: Cancel takes one off the queue
	// and it ends cancelled without a runner, as the local submitter's do.
	queued map[string]bool
}

func (f *fakeSubmitter) Submit(context.Context, submit.JobRequest) (string, error) {
	return "", errors.New("fake submitter: Submit is not used by the resources")
}

func (f *fakeSubmitter) Status(_ context.Context, id string) (submit.JobStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if queued, ok := f.queued[id]; ok {
		if queued {
			return submit.JobStatus{State: submit.JobQueued, ExitCode: -1}, nil
		}
		return submit.JobStatus{State: submit.JobCancelled, ExitCode: -1, Message: "cancelled before it started"}, nil
	}
	return submit.JobStatus{State: submit.JobUnknown, ExitCode: -1}, nil
}

func (f *fakeSubmitter) Cancel(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cancelled = append(f.cancelled, id)
	if f.queued[id] {
		f.queued[id] = false
	}
	err, ok := f.known[id]
	if !ok {
		return fmt.Errorf("%w: %s", submit.ErrUnknownJob, id)
	}
	return err
}

func (f *fakeSubmitter) calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.cancelled...)
}

// resBundle is one test's resources handler over its own database.
type resBundle struct {
	t       *testing.T
	st      store.Store
	sch     store.Scheduler
	sub     *fakeSubmitter
	handler http.Handler
}

// resSetup migrates a fresh database of backend and builds the handler.
func resSetup(t *testing.T, backend string) *resBundle {
	t.Helper()
	_, st, log := openBackend(t, backend)
	sub := &fakeSubmitter{known: map[string]error{}}
	h, err := httpapi.NewResources(httpapi.ResourcesConfig{Store: st, Submitter: sub, Log: log, Now: func() time.Time { return resNow }})
	require.NoError(t, err)
	return &resBundle{t: t, st: st, sch: st, sub: sub, handler: h}
}

// call sends a request straight to the handler and returns the status and
// body.
func (b *resBundle) call(method, path, body string) (int, string) {
	b.t.Helper()
	req := httptest.NewRequestWithContext(b.t.Context(), method, path, strings.NewReader(body))
	rec := httptest.NewRecorder()
	b.handler.ServeHTTP(rec, req)
	if rec.Code != http.StatusMethodNotAllowed && rec.Body.Len() > 0 {
		require.Equal(b.t, "application/json", rec.Header().Get("Content-Type"), "%s %s: %s", method, path, rec.Body)
	}
	return rec.Code, rec.Body.String()
}

// must sends a request that must answer code and decodes the answer into
// out (may be nil).
func (b *resBundle) must(code int, method, path, body string, out any) {
	b.t.Helper()
	got, resp := b.call(method, path, body)
	require.Equal(b.t, code, got, "%s %s: %s", method, path, resp)
	if out != nil {
		require.NoError(b.t, json.Unmarshal([]byte(resp), out), resp)
	}
}

// refuse sends a request that must answer code with an error containing
// want.
func (b *resBundle) refuse(code int, method, path, body, want string) {
	b.t.Helper()
	got, resp := b.call(method, path, body)
	require.Equal(b.t, code, got, "%s %s: %s", method, path, resp)
	var e struct{ Error string }
	require.NoError(b.t, json.Unmarshal([]byte(resp), &e), resp)
	require.Contains(b.t, e.Error, want, "%s %s", method, path)
}

// expandRows returns the policy-expand rows.
func (b *resBundle) expandRows() []store.Task {
	b.t.Helper()
	ts, err := b.sch.ListTasks(context.Background(), flow.KindPolicyExpand, 100)
	require.NoError(b.t, err)
	return ts
}

// table registers catalog.namespace.name with a fresh uuid.
func (b *resBundle) table(catalog, namespace, name, uuid string) store.Table {
	b.t.Helper()
	t, err := b.st.RegisterTable(context.Background(), store.TableRef{Catalog: catalog, Namespace: namespace, Name: name, UUID: uuid})
	require.NoError(b.t, err)
	return t
}

// job creates a job row for (table, policy).
func (b *resBundle) job(tableID, policyID int64) store.Job {
	b.t.Helper()
	j, err := b.st.CreateJob(context.Background(), store.NewJob{TableID: tableID, PolicyID: policyID,
		Types: []string{"compaction", "snapshot-expiry"}, Trigger: store.TriggerCommit})
	require.NoError(b.t, err)
	return j
}

// policyDoc is what the API answers for a policy.
type policyDoc struct {
	ID              int64           `json:"id"`
	Name            string          `json:"name"`
	Comment         string          `json:"comment"`
	PolicyType      string          `json:"policyType"`
	MaintenanceType string          `json:"maintenanceType"`
	Enabled         bool            `json:"enabled"`
	Version         int             `json:"version"`
	Content         json.RawMessage `json:"content"`
	DeletedAt       *time.Time      `json:"deletedAt"`
	Attachments     []attachmentDoc `json:"attachments"`
}

type attachmentDoc struct {
	Policy, Level, Object string
}

// jobDoc is what the API answers for a job row.
type jobDoc struct {
	ID               int64           `json:"id"`
	ExternalJobID    string          `json:"externalJobId"`
	Submitter        *string         `json:"submitter"`
	TableID          int64           `json:"tableId"`
	Status           string          `json:"status"`
	InFlight         bool            `json:"inFlight"`
	Fence            int64           `json:"fence"`
	Types            []string        `json:"types"`
	BeforeSnapshotID *int64          `json:"beforeSnapshotId"`
	AfterSnapshotID  *int64          `json:"afterSnapshotId"`
	Error            string          `json:"error"`
	Outcomes         json.RawMessage `json:"outcomes"`
	Table            struct {
		Name string `json:"name"`
	} `json:"table"`
	MetricsBefore *metricsDoc `json:"metricsBefore"`
	MetricsAfter  *metricsDoc `json:"metricsAfter"`
}

type metricsDoc struct {
	SnapshotID int64           `json:"snapshotId"`
	Value      json.RawMessage `json:"value"`
}

// get reads a job row back.
func (b *resBundle) get(id int64) store.Job {
	b.t.Helper()
	j, err := b.st.GetJob(context.Background(), id)
	require.NoError(b.t, err)
	return j
}

// answer sets what Cancel answers for external id (nil: it stops the job).
func (f *fakeSubmitter) answer(id string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.known[id] = err
}

// queue makes id a job waiting for a slot.
func (f *fakeSubmitter) queue(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.queued == nil {
		f.queued = map[string]bool{}
	}
	f.queued[id] = true
	f.known[id] = nil
}
