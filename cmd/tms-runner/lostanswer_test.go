package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/internal/cli"
	"github.com/tms-dev/tms/internal/scanoracle"
	"github.com/tms-dev/tms/internal/seaweedtest"
)

// updateTablePath is the REST route of a table commit
// (POST /v1/{prefix}/namespaces/{namespace}/tables/{table}).
var updateTablePath = regexp.MustCompile(`/namespaces/[^/]+/tables/[^/]+$`)

// lossyProxy stands between the runner and the REST catalog and spoils the
// first table commit through it: "lose" forwards it, waits for the
// catalog's answer and drops the connection instead of passing it on (the
// catalog applied the commit, the runner hears nothing); "refuse" answers
// 503 without forwarding (the catalog never saw it). Everything else is
// passed through unchanged (the Host header too, which SigV4 signs).
type lossyProxy struct {
	target *url.URL
	rp     *httputil.ReverseProxy
	mode   string

	mu       sync.Mutex
	commits  int // table commits the runner sent
	upstream int // the status the catalog answered the spoiled commit with
}

func newLossyProxy(t *testing.T, target, mode string) (*lossyProxy, string) {
	u, err := url.Parse(target)
	require.NoError(t, err)
	p := &lossyProxy{target: u, rp: httputil.NewSingleHostReverseProxy(u), mode: mode}
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	return p, srv.URL
}

func (p *lossyProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || !updateTablePath.MatchString(r.URL.Path) {
		p.rp.ServeHTTP(w, r)
		return
	}
	p.mu.Lock()
	p.commits++
	first := p.commits == 1
	p.mu.Unlock()
	if !first {
		p.rp.ServeHTTP(w, r)
		return
	}
	switch p.mode {
	case "refuse":
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, `{"error": {"message": "the proxy is overloaded", "type": "ServiceUnavailableException", "code": 503}}`)
	case "lose":
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		out, err := http.NewRequestWithContext(r.Context(), r.Method, p.target.Scheme+"://"+p.target.Host+r.URL.RequestURI(), bytes.NewReader(body))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		out.Header = r.Header.Clone()
		out.Host = r.Host
		resp, err := http.DefaultClient.Do(out)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			p.mu.Lock()
			p.upstream = resp.StatusCode
			p.mu.Unlock()
		}
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			_ = conn.Close()
		}
	}
}

func (p *lossyProxy) counts() (commits, upstream int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.commits, p.upstream
}

// TestReplayCommitAnswerLost runs each committing type through the real
// binary on SeaweedFS's REST catalog behind a proxy that spoils its first
// commit. When the catalog applied the commit and the answer was lost, the
// runner finds its commit in the reloaded table and records the type done
// (not failed) with that snapshot, without committing again. When the
// catalog never saw it (503), the runner commits again and the type is
// done. Either way the rows read the same by iceberg-go's scan, and every
// file under the table's folders other than logged metadata.json files is
// one the table references: no attempt's files are left behind.
func TestReplayCommitAnswerLost(t *testing.T) {
	t.Parallel()
	s := seaweedtest.Start(t)
	cat := s.Catalog(t)
	policies := map[string]string{
		"compaction":       `{"minDataFileMse": 0}`,
		"manifest-rewrite": `{"minManifestNumber": 2}`,
		"snapshot-expiry":  `{"older-than": "0s", "retain-last": 1}`,
	}
	for _, typ := range []string{"compaction", "manifest-rewrite", "snapshot-expiry"} {
		for _, mode := range []string{"lose", "refuse"} {
			t.Run(typ+"/"+mode, func(t *testing.T) {
				proxy, uri := newLossyProxy(t, s.RESTURI, mode)
				d := dlS3Table(t, s, cat, strings.ReplaceAll(typ, "-", "_")+"_"+mode, nil)
				for i := range 6 { // compaction's min-input-files is 5
					d.appendIDs(t, i*100, 25)
				}
				for i, a := range d.args {
					if strings.HasPrefix(a, "uri=") {
						d.args[i] = "uri=" + uri
					}
				}
				want := dlRows(t, d.load(t))

				r, got := d.replay(t, typ, map[string]string{typ: policies[typ]})
				require.Equal(t, cli.ExitOK, r.code, "%s\n%s", r.stdout, r.stderr)
				outcome, reason := typeOf(t, r, got, typ)
				require.Equal(t, "done", outcome, reason)
				commits, upstream := proxy.counts()
				switch mode {
				case "lose":
					require.Equal(t, http.StatusOK, upstream, "the catalog applied the commit whose answer the proxy dropped")
					require.Equal(t, 1, commits, "the runner found its commit in the table and did not commit again")
					require.Contains(t, reason, "the catalog's answer to 1 commits was lost, the reloaded table shows they landed")
				case "refuse":
					require.Equal(t, 2, commits, "the refused commit was made again")
					require.Contains(t, reason, "1 commits retried after the catalog had not applied them")
				}

				tbl := d.load(t)
				require.Equal(t, got.Types[0].AfterSnapshotID, tbl.CurrentSnapshot().SnapshotID)
				if typ != "snapshot-expiry" { // an expiry keeps the head
					require.NotEqual(t, got.Types[0].BeforeSnapshotID, got.Types[0].AfterSnapshotID, "the commit is recorded")
				}
				requireCurrentFilesExist(t, tbl, typ+" through a lossy proxy")
				requireRows(t, want, tbl, typ+" through a lossy proxy")
				if typ == "snapshot-expiry" {
					require.Len(t, tbl.Metadata().Snapshots(), 1)
				}
				refs, err := scanoracle.ReferencedFiles(t.Context(), tbl, true)
				require.NoError(t, err)
				referenced := map[string]bool{}
				for _, f := range refs {
					referenced[f] = true
				}
				var unreferenced []string
				for _, f := range s.List(t, tbl.Location()) {
					if !referenced[f] && !strings.HasSuffix(f, ".metadata.json") {
						unreferenced = append(unreferenced, f)
					}
				}
				require.Empty(t, unreferenced, fmt.Sprintf("%s left files behind", typ))
			})
		}
	}
}
