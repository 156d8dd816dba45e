// Package browsertest drives a real headless Chromium through ChromeDriver's
// W3C WebDriver HTTP API, for tests of the console's pages: it starts
// chromedriver on a free port, opens one session and speaks the protocol
// with net/http (no client library). Chromium and ChromeDriver are Debian's
// (`apt-get install chromium chromium-driver`); .ci/run installs them.
package browsertest

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/tms-dev/tms/internal/freeport"
	"github.com/tms-dev/tms/internal/testkit"
)

// The binaries Debian installs.
const (
	ChromiumPath     = "/usr/bin/chromium"
	ChromeDriverPath = "/usr/bin/chromedriver"
)

// elementKey is the W3C key of an element reference.
const elementKey = "element-6066-11e4-a52e-4f735466cecf"

// Browser is one WebDriver session.
type Browser struct {
	t       testing.TB
	base    string // http://127.0.0.1:PORT/session/ID
	client  *http.Client
	shotDir string
}

// Element is a reference to an element of the current page.
type Element struct {
	b  *Browser
	id string
}

// Start starts chromedriver and a headless Chromium session; both end with
// the test. Screenshots go to shotDir (created).
func Start(t testing.TB, shotDir string) *Browser {
	t.Helper()
	testkit.NeedsService(t, "Chromium")
	for _, p := range []string{ChromiumPath, ChromeDriverPath} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("browsertest: %s is missing (apt-get install -y chromium chromium-driver): %v", p, err)
		}
	}
	port, err := freeport.One()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(ChromeDriverPath, "--port="+strconv.Itoa(port))
	logf, err := os.Create(filepath.Join(t.TempDir(), "chromedriver.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("browsertest: start chromedriver: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		_ = logf.Close()
	})
	root := "http://127.0.0.1:" + strconv.Itoa(port)
	b := &Browser{t: t, client: &http.Client{Timeout: 60 * time.Second}, shotDir: shotDir}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := b.client.Get(root + "/status")
		if err == nil {
			_ = resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("browsertest: chromedriver did not answer on %s: %v", root, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	caps := map[string]any{"capabilities": map[string]any{"alwaysMatch": map[string]any{
		"browserName": "chrome",
		"goog:chromeOptions": map[string]any{"binary": ChromiumPath, "args": []string{
			"--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
			"--disable-component-update", "--no-first-run", "--disable-dev-shm-usage", "--window-size=1280,900"}},
	}}}
	var created struct {
		SessionID string `json:"sessionId"`
	}
	b.call(http.MethodPost, root+"/session", caps, &created)
	if created.SessionID == "" {
		t.Fatal("browsertest: chromedriver returned no session id")
	}
	b.base = root + "/session/" + created.SessionID
	t.Cleanup(func() {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodDelete, b.base, nil)
		if resp, err := b.client.Do(req); err == nil {
			_ = resp.Body.Close()
		}
	})
	if shotDir != "" {
		if err := os.MkdirAll(shotDir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

// call sends a WebDriver command and decodes its "value" into out.
func (b *Browser) call(method, url string, body, out any) {
	b.t.Helper()
	var r io.Reader
	if body != nil {
		j, err := json.Marshal(body)
		if err != nil {
			b.t.Fatal(err)
		}
		r = bytes.NewReader(j)
	}
	req, err := http.NewRequestWithContext(context.Background(), method, url, r)
	if err != nil {
		b.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := b.client.Do(req)
	if err != nil {
		b.t.Fatalf("browsertest: %s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		b.t.Fatal(err)
	}
	var env struct {
		Value json.RawMessage `json:"value"`
	}
	if err := json.Unmarshal(raw, &env); err != nil {
		b.t.Fatalf("browsertest: %s %s: answer is not JSON: %.200s", method, url, raw)
	}
	if resp.StatusCode != http.StatusOK {
		b.t.Fatalf("browsertest: %s %s: HTTP %d: %.500s", method, url, resp.StatusCode, env.Value)
	}
	if out != nil {
		if err := json.Unmarshal(env.Value, out); err != nil {
			b.t.Fatalf("browsertest: %s %s: decode %.200s: %v", method, url, env.Value, err)
		}
	}
}

// Open navigates to url and waits for the page to load.
func (b *Browser) Open(url string) {
	b.t.Helper()
	b.call(http.MethodPost, b.base+"/url", map[string]string{"url": url}, nil)
}

// URL is the current page's URL.
func (b *Browser) URL() string {
	b.t.Helper()
	var u string
	b.call(http.MethodGet, b.base+"/url", nil, &u)
	return u
}

// Title is the current page's title.
func (b *Browser) Title() string {
	b.t.Helper()
	var s string
	b.call(http.MethodGet, b.base+"/title", nil, &s)
	return s
}

// FindAll returns the elements css selects (maybe none).
func (b *Browser) FindAll(css string) []Element {
	b.t.Helper()
	var refs []map[string]string
	b.call(http.MethodPost, b.base+"/elements", map[string]string{"using": "css selector", "value": css}, &refs)
	out := make([]Element, len(refs))
	for i, r := range refs {
		out[i] = Element{b: b, id: r[elementKey]}
	}
	return out
}

// Find returns the one element css selects first; the test fails if none.
func (b *Browser) Find(css string) Element {
	b.t.Helper()
	els := b.FindAll(css)
	if len(els) == 0 {
		b.t.Fatalf("browsertest: no element %q on %s", css, b.URL())
	}
	return els[0]
}

// Type sends text to the element.
func (e Element) Type(text string) {
	e.b.t.Helper()
	e.b.call(http.MethodPost, e.b.base+"/element/"+e.id+"/value", map[string]string{"text": text}, nil)
}

// Click clicks the element.
func (e Element) Click() {
	e.b.t.Helper()
	e.b.call(http.MethodPost, e.b.base+"/element/"+e.id+"/click", map[string]string{}, nil)
}

// Text is the element's rendered text.
func (e Element) Text() string {
	e.b.t.Helper()
	var s string
	e.b.call(http.MethodGet, e.b.base+"/element/"+e.id+"/text", nil, &s)
	return s
}

// Screenshot saves the viewport as NAME.png in the screenshot folder and
// returns its path.
func (b *Browser) Screenshot(name string) string {
	b.t.Helper()
	var s string
	b.call(http.MethodGet, b.base+"/screenshot", nil, &s)
	png, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		b.t.Fatalf("browsertest: screenshot: %v", err)
	}
	path := filepath.Join(b.shotDir, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	return path
}

// String names the session, for messages.
func (b *Browser) String() string { return fmt.Sprintf("browser session %s", b.base) }
