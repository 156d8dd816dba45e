package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/tms-dev/tms/coordinator/admin"
	"github.com/tms-dev/tms/coordinator/flow"
	"github.com/tms-dev/tms/coordinator/submit"
	"github.com/tms-dev/tms/internal/invalid"
	"github.com/tms-dev/tms/policy"
	"github.com/tms-dev/tms/store"
)

// This file and resources_*.go are the REST resources /v1/policies,
// /v1/tables, /v1/jobs and /v1/plan (see docs/http-api.md). They do no
// authentication: the Server mounts them behind its token check. They
// trust nothing else: bodies are at most MaxResourceBodyBytes, unknown JSON
// fields and unknown query parameters are refused, and every bad value is a
// 400 naming the field. Policy operations go through admin.PolicyOps,
// the same code as `tms-coordinator policy …`, so the API validates and
// answers like the CLI and keeps policy-expand rows in step the same way.
//
// Errors are {"error": "..."}: 400 bad input, 404 unknown policy, table or
// job, 409 a conflict (name taken, job already finished), 413 a body over
// the limit, 500 a failure of the database (logged, not detailed), 502 a
// submitter that could not cancel.

// MaxResourceBodyBytes bounds a request body of the /v1 resources (1 MiB).
const MaxResourceBodyBytes = 1 << 20

// Page sizes of the list routes.
const (
	// DefaultListLimit is the page size when limit is not given.
	DefaultListLimit = 100
)

// ResourcesConfig configures NewResources.
type ResourcesConfig struct {
	// Store is the ledger, policies and scheduled tasks. Required.
	Store store.Store
	// Submitter cancels jobs (POST /v1/jobs/{id}/cancel). Required: the
	// one serve submits with.
	Submitter submit.Submitter
	// Log receives failures of the database and cancellations. Defaults to
	// a no-op logger.
	Log *zap.Logger
	// Now is the clock of policy-expand due times, relative since/until
	// and rows closed by cancel. Defaults to time.Now.
	Now func() time.Time
	// Catalogs, if set, are the configured catalogs: an attachment to
	// another catalog is refused (400 naming it) and policy documents mark
	// each attachment's catalogConfigured.
	Catalogs admin.CatalogSet
	// Plan answers GET /v1/plan (serve passes its flow's Plan). Nil: that
	// route answers 404.
	Plan func(ctx context.Context, q flow.PlanQuery) (flow.Plan, error)
}

// resources serves the /v1 resources.
type resources struct {
	st      store.Store
	ops     *admin.PolicyOps
	ledger  store.LedgerQueries
	sub     submit.Submitter
	log     *zap.Logger
	now     func() time.Time
	planFn  func(ctx context.Context, q flow.PlanQuery) (flow.Plan, error)
	handler http.Handler
}

// NewResources returns the handler of /v1/policies, /v1/tables and
// /v1/jobs and their subpaths (full paths, as the Server mounts it).
func NewResources(cfg ResourcesConfig) (http.Handler, error) {
	if cfg.Store == nil {
		return nil, errors.New("httpapi: ResourcesConfig.Store is required")
	}
	if cfg.Submitter == nil {
		return nil, errors.New("httpapi: ResourcesConfig.Submitter is required")
	}
	if cfg.Log == nil {
		cfg.Log = zap.NewNop()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	ops, err := admin.NewPolicyOps(cfg.Store, cfg.Now)
	if err != nil {
		return nil, fmt.Errorf("httpapi: %w", err)
	}
	if cfg.Catalogs != nil {
		ops.CheckCatalogs(cfg.Catalogs)
	}
	rs := &resources{st: cfg.Store, ops: ops, ledger: cfg.Store, sub: cfg.Submitter, log: cfg.Log, now: cfg.Now, planFn: cfg.Plan}
	mux := http.NewServeMux()
	for _, rt := range []struct {
		path    string
		methods map[string]http.HandlerFunc
	}{
		{"/v1/policies", map[string]http.HandlerFunc{"GET": rs.listPolicies, "POST": rs.createPolicy}},
		{"/v1/policies/{name}", map[string]http.HandlerFunc{"GET": rs.getPolicy, "PUT": rs.alterPolicy, "DELETE": rs.deletePolicy}},
		{"/v1/policies/{name}/enable", map[string]http.HandlerFunc{"POST": rs.setEnabled(true)}},
		{"/v1/policies/{name}/disable", map[string]http.HandlerFunc{"POST": rs.setEnabled(false)}},
		{"/v1/policies/{name}/attachments", map[string]http.HandlerFunc{"POST": rs.attach}},
		{"/v1/policies/{name}/attachments/{object}", map[string]http.HandlerFunc{"DELETE": rs.detach}},
		{"/v1/tables", map[string]http.HandlerFunc{"GET": rs.listTables}},
		{"/v1/tables/{table}", map[string]http.HandlerFunc{"GET": rs.getTable}},
		{"/v1/tables/{table}/effective-policies", map[string]http.HandlerFunc{"GET": rs.effectivePolicies}},
		{"/v1/jobs", map[string]http.HandlerFunc{"GET": rs.listJobs}},
		{"/v1/jobs/{id}", map[string]http.HandlerFunc{"GET": rs.getJob}},
		{"/v1/jobs/{id}/cancel", map[string]http.HandlerFunc{"POST": rs.cancelJob}},
		{"/v1/plan", map[string]http.HandlerFunc{"GET": rs.plan}},
	} {
		allowed := make([]string, 0, len(rt.methods))
		for m, h := range rt.methods {
			mux.HandleFunc(m+" "+rt.path, h)
			allowed = append(allowed, m)
		}
		slices.Sort(allowed)
		allow := strings.Join(allowed, ", ")
		// Any other method: 405 in JSON (a method-less pattern is less
		// specific than the method patterns above).
		mux.HandleFunc(rt.path, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", allow)
			writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("method %s not allowed on %s; allowed: %s", r.Method, r.URL.Path, allow))
		})
	}
	mux.HandleFunc("/v1/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "no such resource: "+r.URL.Path+" (see docs/http-api.md)")
	})
	rs.handler = mux
	return rs.handler, nil
}

// httpError is an error with the status to answer it with.
type httpError struct {
	code int
	msg  string
}

func (e *httpError) Error() string { return e.msg }

func badRequest(format string, args ...any) error {
	return &httpError{code: http.StatusBadRequest, msg: fmt.Sprintf(format, args...)}
}

// fail answers err: its status if it is an *httpError, else from the
// store's and the policy validation's classification. Failures of the
// database are logged and answered 500 without their detail.
func (rs *resources) fail(w http.ResponseWriter, r *http.Request, err error) {
	var he *httpError
	var ie *admin.InputError
	var pe *policy.Error
	switch {
	case errors.As(err, &he):
		writeError(w, he.code, he.msg)
	case errors.Is(err, store.ErrNotFound):
		writeError(w, http.StatusNotFound, err.Error())
	case errors.Is(err, store.ErrConflict):
		writeError(w, http.StatusConflict, err.Error())
	case errors.As(err, &ie), errors.As(err, &pe), errors.Is(err, invalid.ErrArgument):
		writeError(w, http.StatusBadRequest, err.Error())
	default:
		rs.log.Error("API request failed", zap.String("method", r.Method), zap.String("path", r.URL.Path), zap.Error(err))
		writeError(w, http.StatusInternalServerError, "internal error; the coordinator's log has the detail")
	}
}

// readBody reads a request body of at most MaxResourceBodyBytes.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxResourceBodyBytes))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return nil, &httpError{code: http.StatusRequestEntityTooLarge,
				msg: fmt.Sprintf("request body exceeds the %d-byte (1 MiB) limit", MaxResourceBodyBytes)}
		}
		return nil, badRequest("read request body: %v", err)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, badRequest("empty body: send a JSON object")
	}
	return body, nil
}

// decodeBody reads the body into v (a struct), refusing unknown fields and
// trailing data, with messages naming the field; allowed lists v's fields
// for the unknown-field message.
func decodeBody(w http.ResponseWriter, r *http.Request, v any, allowed string) error {
	body, err := readBody(w, r)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			return badRequest("unknown field %s (allowed: %s)", name, allowed)
		}
		return badRequest("%v", explainJSON(err))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return badRequest("malformed JSON: unexpected data after the JSON object")
	}
	return nil
}

// query checks that r has no query parameters beside allowed and returns
// them. A repeated parameter is refused too: only one value is used.
func query(r *http.Request, allowed ...string) (url.Values, error) {
	q := r.URL.Query()
	for k, vs := range q {
		if !slices.Contains(allowed, k) {
			if len(allowed) == 0 {
				return nil, badRequest("unknown query parameter %q: this route takes none", k)
			}
			return nil, badRequest("unknown query parameter %q (allowed: %s)", k, strings.Join(allowed, ", "))
		}
		if len(vs) > 1 {
			return nil, badRequest("query parameter %q given %d times; give it once", k, len(vs))
		}
	}
	return q, nil
}

// limitParam parses the limit parameter: 1 to store.MaxQueryLimit,
// DefaultListLimit when absent.
func limitParam(q url.Values) (int, error) {
	s := q.Get("limit")
	if s == "" {
		return DefaultListLimit, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > store.MaxQueryLimit {
		return 0, badRequest("limit %q: want a whole number from 1 to %d", s, store.MaxQueryLimit)
	}
	return n, nil
}

// idParam parses a positive row id given as field.
func idParam(field, s string) (int64, error) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 {
		return 0, badRequest("%s %q: want a positive whole number", field, s)
	}
	return id, nil
}

// timeParam parses a time given as field: RFC 3339 (2026-05-01T00:00:00Z)
// or a duration before now (24h, 90m).
func timeParam(field, s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, badRequest("%s %q: want an RFC 3339 time such as 2026-05-01T00:00:00Z or a duration before now such as 24h", field, s)
}

// jsonOK answers 200 with v.
func jsonOK(w http.ResponseWriter, v any) { writeJSON(w, http.StatusOK, v) }
