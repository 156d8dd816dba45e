package gravitinotest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ---- HTTP ----

// bufferedResponse holds an answer until the server decides how to deliver
// it (after a delay, or not at all).
type bufferedResponse struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (b *bufferedResponse) Header() http.Header { return b.header }

func (b *bufferedResponse) WriteHeader(code int) {
	if b.status == 0 {
		b.status = code
	}
}

func (b *bufferedResponse) Write(p []byte) (int, error) {
	b.WriteHeader(http.StatusOK)
	return b.body.Write(p)
}

// ServeHTTP records the request, applies any fault, and answers it.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, maxBody))
	idx, fault, latency, closed := s.begin(r, body)
	if closed {
		http.Error(w, "gravitinotest: server closed", http.StatusServiceUnavailable)
		s.finish(idx, http.StatusServiceUnavailable)
		return
	}
	bw := &bufferedResponse{header: http.Header{}}
	switch fault.Kind {
	case Status503:
		writeJSON(bw, http.StatusServiceUnavailable, ErrorResponse{
			Code: CodeInternalError, Type: "RuntimeException",
			Message: "Service unavailable (fault injected by gravitinotest)", Stack: []string{},
		})
	case Status401:
		s.writeUnauthorized(bw, r, "The provided credentials did not support", "")
	case NotJSON:
		bw.Header().Set("Content-Type", "text/html")
		bw.WriteHeader(http.StatusOK)
		bw.body.WriteString("<html><body><h1>gateway</h1></body></html>\n")
	default:
		s.route(bw, r, body)
	}
	d := latency
	if fault.Kind == Slow {
		d += fault.Delay
	}
	s.pause(r.Context(), d)
	if fault.Kind == ResetAfterApply {
		s.finish(idx, 0)
		resetConn(w)
		return
	}
	for k, v := range bw.header {
		w.Header()[k] = v
	}
	if bw.status == 0 {
		bw.status = http.StatusOK
	}
	w.Header().Set("Content-Length", strconv.Itoa(bw.body.Len()))
	w.WriteHeader(bw.status)
	_, _ = w.Write(bw.body.Bytes())
	s.finish(idx, bw.status)
}

// begin records the request and takes the first matching fault.
func (s *Server) begin(r *http.Request, body []byte) (idx int, f Fault, latency time.Duration, closed bool) {
	auth := r.Header.Get("Authorization")
	scheme, _, _ := strings.Cut(auth, " ")
	rec := Request{
		Time: time.Now(), Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery,
		Header: r.Header.Clone(), Accept: r.Header.Get("Accept"), ContentType: r.Header.Get("Content-Type"),
		HasAuthorization: auth != "", AuthScheme: scheme, Body: body,
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		for i, pf := range s.faults {
			if (pf.Method == "" || strings.EqualFold(pf.Method, r.Method)) && strings.HasSuffix(r.URL.Path, pf.Path) {
				f = *pf
				pf.Count--
				if pf.Count == 0 {
					s.faults = slices.Delete(s.faults, i, i+1)
				}
				break
			}
		}
	}
	rec.Fault = f.Kind
	s.requests = append(s.requests, rec)
	return len(s.requests) - 1, f, s.latency, s.closed
}

// finish records the answered status of request idx.
func (s *Server) finish(idx, status int) {
	s.mu.Lock()
	if idx < len(s.requests) {
		s.requests[idx].Status = status
	}
	s.mu.Unlock()
}

// pause waits d, or less if the client leaves or the server closes.
func (s *Server) pause(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	case <-s.closing:
	}
}

// resetConn closes the client's connection with a TCP reset, answering
// nothing.
func resetConn(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic(http.ErrAbortHandler)
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

// route authenticates and dispatches a request.
func (s *Server) route(w http.ResponseWriter, r *http.Request, body []byte) {
	p := r.URL.Path
	if s.cfg.Auth == AuthOAuth2 && p == s.cfg.OAuth2TokenPath {
		s.serveToken(w, r, body)
		return
	}
	if !strings.HasPrefix(p, "/api/") {
		http.NotFound(w, r)
		return
	}
	principal, msg, challenge := s.authenticate(r)
	if msg != "" {
		s.writeUnauthorized(w, r, msg, challenge)
		return
	}
	var segs []string
	for _, seg := range strings.Split(strings.TrimSuffix(strings.TrimPrefix(r.URL.EscapedPath(), "/api/"), "/"), "/") {
		u, err := url.PathUnescape(seg)
		if err != nil {
			http.NotFound(w, r)
			return
		}
		segs = append(segs, u)
	}
	if len(segs) < 4 || len(segs) > 5 || segs[0] != "metalakes" || segs[2] != "jobs" ||
		(segs[3] != "templates" && segs[3] != "runs") {
		http.NotFound(w, r)
		return
	}
	m, item := segs[1], ""
	if len(segs) == 5 {
		item = segs[4]
	}
	var allowed []string
	switch {
	case segs[3] == "templates" && item == "":
		allowed = []string{http.MethodGet, http.MethodPost}
	case segs[3] == "templates":
		allowed = []string{http.MethodGet, http.MethodDelete}
	default:
		allowed = []string{http.MethodGet, http.MethodPost}
	}
	if !slices.Contains(allowed, r.Method) {
		w.Header().Set("Allow", strings.Join(allowed, ", "))
		http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
		return
	}
	takesBody := r.Method == http.MethodPost && !(segs[3] == "runs" && item != "")
	if s.cfg.EnforceMediaTypes {
		if !acceptsGravitino(r.Header.Values("Accept")) {
			w.WriteHeader(http.StatusNotAcceptable)
			return
		}
		if takesBody && !isJSONType(r.Header.Get("Content-Type")) {
			w.WriteHeader(http.StatusUnsupportedMediaType)
			return
		}
	}
	var status int
	var out any
	switch {
	case segs[3] == "templates" && item == "" && r.Method == http.MethodGet:
		status, out = s.listTemplates(m, strings.EqualFold(r.URL.Query().Get("details"), "true"))
	case segs[3] == "templates" && item == "":
		status, out = s.registerTemplate(m, body, principal)
	case segs[3] == "templates" && r.Method == http.MethodGet:
		status, out = s.getTemplate(m, item)
	case segs[3] == "templates":
		status, out = s.deleteTemplate(m, item)
	case item == "" && r.Method == http.MethodGet:
		q := r.URL.Query()
		var tpl *string
		if q.Has("jobTemplateName") {
			v := q.Get("jobTemplateName")
			tpl = &v
		}
		status, out = s.listJobs(m, tpl)
	case item == "":
		status, out = s.runJob(m, body, principal)
	case r.Method == http.MethodGet:
		status, out = s.getJob(m, item)
	default:
		status, out = s.cancelJob(m, item, principal)
	}
	writeJSON(w, status, out)
}

// writeJSON writes v as an application/json answer, without HTML escaping
// (as Jackson).
func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		http.Error(w, "gravitinotest: encode answer: "+err.Error(), http.StatusInternalServerError)
		return
	}
	if w.Header().Get("Content-Type") == "" {
		w.Header().Set("Content-Type", "application/json")
	}
	w.WriteHeader(status)
	_, _ = w.Write(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
}

// acceptsGravitino reports whether an Accept header admits MediaType (no
// header admits anything).
func acceptsGravitino(values []string) bool {
	if len(values) == 0 {
		return true
	}
	for _, v := range values {
		for _, part := range strings.Split(v, ",") {
			mt, params, _ := strings.Cut(strings.TrimSpace(part), ";")
			mt = strings.ToLower(strings.TrimSpace(mt))
			if zeroQuality(params) {
				continue
			}
			if mt == "*/*" || mt == "application/*" || mt == MediaType {
				return true
			}
		}
	}
	return false
}

// zeroQuality reports a "q=0" among media-type parameters.
func zeroQuality(params string) bool {
	for _, p := range strings.Split(params, ";") {
		k, v, _ := strings.Cut(strings.TrimSpace(p), "=")
		if strings.EqualFold(strings.TrimSpace(k), "q") {
			q, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return err == nil && q == 0
		}
	}
	return false
}

// isJSONType reports whether a Content-Type is JSON (application/json or
// any +json type).
func isJSONType(ct string) bool {
	mt, _, _ := strings.Cut(ct, ";")
	mt = strings.ToLower(strings.TrimSpace(mt))
	return mt == "application/json" || strings.HasSuffix(mt, "+json")
}

// ---- errors, in ExceptionHandlers' form ----

// failure is an error answer.
type failure struct {
	status int
	body   ErrorResponse
}

// objectFailure is JobTemplateExceptionHandler's or JobExceptionHandler's
// answer: what is "job template" or "job".
func objectFailure(status, code int, typ, what, op, object, metalake, reason string) failure {
	obj := ""
	if strings.TrimSpace(object) != "" {
		obj = " [" + object + "]"
	}
	return failure{status, ErrorResponse{
		Code: code, Type: typ, Stack: []string{},
		Message: fmt.Sprintf("Failed to operate %s(s)%s operation [%s] under object [%s], reason [%s]", what, obj, op, metalake, reason),
	}}
}

// internalFailure is BaseExceptionHandler's answer to an unexpected error.
func internalFailure(op, object, metalake, reason string) failure {
	obj := ""
	if strings.TrimSpace(object) != "" {
		obj = " [" + object + "]"
	}
	return failure{http.StatusInternalServerError, ErrorResponse{
		Code: CodeInternalError, Type: "RuntimeException", Stack: []string{},
		Message: fmt.Sprintf("Failed to operate object%s operation [%s] under [%s], reason [%s]", obj, op, metalake, reason),
	}}
}

// malformed is the JsonParseException/JsonMappingException mappers' answer.
func malformed() failure {
	return failure{http.StatusBadRequest, ErrorResponse{
		Code: CodeIllegalArguments, Type: "IllegalArgumentException", Message: "Malformed json request", Stack: []string{},
	}}
}

func (f failure) answer() (int, any) { return f.status, f.body }

// noMetalake is NoSuchMetalakeException, as the handler for what reports it.
func noMetalake(what, op, object, m string) (int, any) {
	return objectFailure(http.StatusNotFound, CodeNotFound, "NoSuchMetalakeException", what, op, object, m,
		fmt.Sprintf("Metalake %s does not exist", m)).answer()
}

func noTemplate(what, op, object, m, name string) (int, any) {
	return objectFailure(http.StatusNotFound, CodeNotFound, "NoSuchJobTemplateException", what, op, object, m,
		fmt.Sprintf("Job template with name %s under metalake %s does not exist", name, m)).answer()
}

// ---- small helpers ----

// formatTime is an RFC 3339 UTC time with milliseconds.
func formatTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func orEmptyMap(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

func cloneMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
