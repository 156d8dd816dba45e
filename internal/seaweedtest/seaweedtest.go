// Package seaweedtest runs a real object store and Iceberg REST catalog for
// tests: SeaweedFS's `weed mini` (an S3 gateway and its embedded Iceberg
// REST catalog, SigV4-authenticated, in one process), built from its pinned
// Go module by `make weed` into tmp/tools/weed. Tests that need it call
// Start; it never skips: a missing binary fails the test with how to build
// it.
//
// It is for tests only. It must not be imported by production code.
package seaweedtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/tms-dev/tms/catalogs"
	"github.com/tms-dev/tms/internal/freeport"
	"github.com/tms-dev/tms/internal/testkit"
)

// Bucket is the table bucket the REST catalog serves as its warehouse.
const Bucket = "lake"

// Region is the signing region of the REST catalog and the S3 gateway.
const Region = "us-east-1"

// Server is a running `weed mini`.
type Server struct {
	// S3Endpoint is the S3 gateway (http://127.0.0.1:PORT).
	S3Endpoint string
	// RESTURI is the Iceberg REST catalog.
	RESTURI string
	// FilerURL is SeaweedFS's filer HTTP API (the file tree behind S3).
	FilerURL string
	// FilerGRPC is the filer's gRPC address (host:port), for SetModTime.
	FilerGRPC string
	// AccessKey and SecretKey are the credentials the server accepts.
	AccessKey, SecretKey string
	// Dir is the server's data folder.
	Dir string
}

// Binary returns the path of the weed binary: $TMS_WEED, else
// tmp/tools/weed in the repository root.
func Binary() (string, error) {
	if p := os.Getenv("TMS_WEED"); p != "" {
		return p, nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && bytes.HasPrefix(b, []byte("module github.com/tms-dev/tms\n")) {
			return filepath.Join(dir, "tmp", "tools", "weed"), nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("seaweedtest: no TMS repository root above the working directory")
		}
		dir = parent
	}
}

// errPortTaken says weed could not bind a port it was given: another
// process took it between the probe and the bind. Start tries again with
// other ports.
var errPortTaken = errors.New("a port was taken before weed bound it")

// Start starts a fresh `weed mini` in a temporary folder, waits until its
// REST catalog answers a signed request, and stops it when t ends.
func Start(t testing.TB) *Server {
	t.Helper()
	testkit.NeedsService(t, "SeaweedFS")
	bin, err := Binary()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("seaweedtest: %s: %v (build it with `make weed`; .ci/run does)", bin, err)
	}
	for attempt := 1; ; attempt++ {
		s, log, err := start(t, bin)
		if err == nil {
			return s
		}
		if errors.Is(err, errPortTaken) && attempt < 3 {
			t.Logf("seaweedtest: attempt %d: %v; starting again on other ports", attempt, err)
			continue
		}
		t.Fatalf("seaweedtest: %v\n%s", err, tail(log, 4000))
	}
}

// start runs one weed mini on fresh ports and waits for it. On an error
// the process is already stopped; the log is returned for the message.
func start(t testing.TB, bin string) (*Server, []byte, error) {
	ports, err := freeport.Pick(12)
	if err != nil {
		return nil, nil, err
	}
	secret := make([]byte, 16)
	_, _ = rand.Read(secret)
	s := &Server{
		S3Endpoint: fmt.Sprintf("http://127.0.0.1:%d", ports[0]),
		RESTURI:    fmt.Sprintf("http://127.0.0.1:%d", ports[1]),
		FilerURL:   fmt.Sprintf("http://127.0.0.1:%d", ports[2]),
		FilerGRPC:  fmt.Sprintf("127.0.0.1:%d", ports[3]),
		AccessKey:  "tmstest",
		SecretKey:  hex.EncodeToString(secret),
		Dir:        t.TempDir(),
	}
	p := func(i int) string { return strconv.Itoa(ports[i]) }
	args := []string{"mini", "-dir=" + s.Dir, "-ip=127.0.0.1", "-ip.bind=127.0.0.1", "-tableBucket=" + Bucket,
		"-master.telemetry=false", "-webdav=false", "-s3.port.lance=0", "-admin.ui=false", "-admin.port.legacy=0",
		"-s3.port=" + p(0), "-s3.port.iceberg=" + p(1), "-filer.port=" + p(2), "-filer.port.grpc=" + p(3),
		"-s3.port.grpc=" + p(4), "-master.port=" + p(5), "-master.port.grpc=" + p(6), "-volume.port=" + p(7),
		"-volume.port.grpc=" + p(8), "-admin.port=" + p(9), "-admin.port.grpc=" + p(10), "-debug.port=" + p(11),
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = s.Dir
	cmd.Env = append(os.Environ(), "AWS_ACCESS_KEY_ID="+s.AccessKey, "AWS_SECRET_ACCESS_KEY="+s.SecretKey)
	logPath := filepath.Join(s.Dir, "weed.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, nil, err
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return nil, nil, fmt.Errorf("start %s: %w", bin, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stop := func() {
		_ = cmd.Process.Kill()
		<-exited
		_ = logf.Close()
	}
	if err := s.waitReady(exited, logPath); err != nil {
		stop()
		log, _ := os.ReadFile(logPath)
		return nil, log, err
	}
	t.Cleanup(stop)
	return s, nil, nil
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// waitReady polls the REST catalog with a signed list of namespaces. A
// bind failure in weed's log ends the wait at once with errPortTaken: weed
// mini keeps running without the part that failed (the admin server
// creates the table bucket), so the catalog would never become ready.
func (s *Server) waitReady(exited <-chan error, logPath string) error {
	deadline := time.Now().Add(90 * time.Second)
	var last error
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			return fmt.Errorf("weed mini exited: %v", err)
		default:
		}
		if log, _ := os.ReadFile(logPath); bytes.Contains(log, []byte("address already in use")) {
			return errPortTaken
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		cat, err := catalogs.Open(ctx, "seaweed", s.Props())
		if err == nil {
			_, err = cat.ListNamespaces(ctx, nil)
		}
		cancel()
		if err == nil {
			return nil
		}
		last = err
		time.Sleep(250 * time.Millisecond)
	}
	return fmt.Errorf("REST catalog at %s not ready after 90 s: %v", s.RESTURI, last)
}

// PublicProps are the catalog properties of the server without its
// secrets: what may go on a command line, in a job spec or a log.
func (s *Server) PublicProps() iceberg.Properties {
	return iceberg.Properties{
		"type": "rest", "uri": s.RESTURI, "warehouse": "s3://" + Bucket + "/",
		"rest.sigv4-enabled": "true", "rest.signing-region": Region, "rest.signing-name": "s3tables",
		"s3.endpoint": s.S3Endpoint, "s3.region": Region, "s3.force-virtual-addressing": "false",
	}
}

// SecretProps are the credentials, as TMS's credential sources carry them.
func (s *Server) SecretProps() iceberg.Properties {
	return iceberg.Properties{"s3.access-key-id": s.AccessKey, "s3.secret-access-key": s.SecretKey}
}

// Props are PublicProps and SecretProps together.
func (s *Server) Props() iceberg.Properties {
	p := s.PublicProps()
	for k, v := range s.SecretProps() {
		p[k] = v
	}
	return p
}

// SetModTime sets the modification time of the objects at locations
// (s3://BUCKET/KEY; the filer file /buckets/BUCKET/KEY) through the
// filer's gRPC API, with tmp/tools/weedtouch (built by `make weed`): S3
// itself cannot backdate an object. The S3 listing reports the new time.
func (s *Server) SetModTime(t testing.TB, when time.Time, locations ...string) {
	t.Helper()
	bin, err := Binary()
	if err != nil {
		t.Fatal(err)
	}
	bin = filepath.Join(filepath.Dir(bin), "weedtouch")
	args := []string{"-filer", s.FilerGRPC, "-mtime", when.UTC().Format(time.RFC3339)}
	for _, loc := range locations {
		key, ok := strings.CutPrefix(loc, "s3://")
		if !ok {
			t.Fatalf("seaweedtest: SetModTime: %q is not an s3:// location", loc)
		}
		args = append(args, "/buckets/"+key)
	}
	if out, err := exec.Command(bin, args...).CombinedOutput(); err != nil {
		t.Fatalf("seaweedtest: %s: %v\n%s (build it with `make weed`)", bin, err, out)
	}
}

// CatalogName is the name tests give the server's REST catalog.
const CatalogName = "lake"

// Catalog opens the server's REST catalog with its keys.
func (s *Server) Catalog(t testing.TB) catalog.Catalog {
	t.Helper()
	cat, err := catalogs.Open(context.Background(), CatalogName, s.Props())
	if err != nil {
		t.Fatalf("seaweedtest: open the REST catalog: %v", err)
	}
	return cat
}

// CreateTable creates a table called name with schema sc in a fresh
// namespace of cat (see Ident) and returns its identifier and the table.
func CreateTable(t testing.TB, cat catalog.Catalog, name string, sc *iceberg.Schema, opts ...catalog.CreateTableOpt) (table.Identifier, *table.Table) {
	t.Helper()
	ctx := context.Background()
	ident := Ident(name)
	if err := cat.CreateNamespace(ctx, table.Identifier{ident[0]}, nil); err != nil {
		t.Fatalf("seaweedtest: create namespace %s: %v", ident[0], err)
	}
	tbl, err := cat.CreateTable(ctx, ident, sc, opts...)
	if err != nil {
		t.Fatalf("seaweedtest: create table %v: %v", ident, err)
	}
	return ident, tbl
}

// CatalogArgs are the runner's flags for the server's catalog without its
// secrets: --catalog-name and a --catalog-prop for each of PublicProps, in
// key order.
func (s *Server) CatalogArgs() []string {
	out := []string{"--catalog-name", CatalogName}
	for _, k := range slices.Sorted(maps.Keys(s.PublicProps())) {
		out = append(out, "--catalog-prop", k+"="+s.PublicProps()[k])
	}
	return out
}

// SecretEnv are the server's keys as TMS_CATALOG_PROP_* variables
// (os.Environ() form), the way TMS's runners take credentials.
func (s *Server) SecretEnv() []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(s.SecretProps())) {
		out = append(out, "TMS_CATALOG_PROP_"+k+"="+s.SecretProps()[k])
	}
	return out
}

// Ident returns a fresh table identifier in a fresh namespace, so tests
// sharing a server do not meet.
func Ident(name string) table.Identifier {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return table.Identifier{"t" + hex.EncodeToString(b), name}
}

// PlainBucket creates an ordinary S3 bucket (not a table bucket: it takes
// any key, as AWS S3, MinIO or GCS do) and returns its s3:// location.
func (s *Server) PlainBucket(t testing.TB, name string) string {
	t.Helper()
	if _, err := s.s3Client().CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		t.Fatalf("seaweedtest: create bucket %s: %v", name, err)
	}
	return "s3://" + name
}

// SQLCatalog opens a catalog of the tests' own over the server's S3: a
// SQLite SQL catalog in dir whose warehouse is warehouse (an s3://…
// location, usually in a PlainBucket) and whose FileIO uses the server's
// S3 gateway and keys, as an engine with a catalog of its own writes to
// shared object storage. Props are its catalog properties.
func (s *Server) SQLCatalog(t testing.TB, dir, warehouse string) (catalog.Catalog, iceberg.Properties) {
	t.Helper()
	props, err := catalogs.LocalProps(dir)
	if err != nil {
		t.Fatal(err)
	}
	props["warehouse"] = warehouse
	for k, v := range s.Props() {
		if strings.HasPrefix(k, "s3.") {
			props[k] = v
		}
	}
	cat, err := catalogs.Open(context.Background(), "sql-on-s3", props)
	if err != nil {
		t.Fatalf("seaweedtest: open a SQL catalog on S3: %v", err)
	}
	return cat, props
}

// s3Client is an S3 client of the gateway with the server's keys.
func (s *Server) s3Client() *s3.Client {
	return s3.New(s3.Options{
		Region:       Region,
		BaseEndpoint: aws.String(s.S3Endpoint),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(s.AccessKey, s.SecretKey, ""),
	})
}

// splitLocation splits s3://BUCKET/KEY.
func splitLocation(t testing.TB, loc string) (bucket, key string) {
	t.Helper()
	rest, ok := strings.CutPrefix(loc, "s3://")
	if !ok {
		t.Fatalf("seaweedtest: %q is not an s3:// location", loc)
	}
	bucket, key, _ = strings.Cut(rest, "/")
	return bucket, key
}

// List returns the s3:// locations of every object under the folder loc
// (s3://BUCKET or s3://BUCKET/PREFIX), in key order, listed by the S3 API
// itself rather than by any FileIO.
func (s *Server) List(t testing.TB, loc string) []string {
	t.Helper()
	bucket, prefix := splitLocation(t, loc)
	if prefix != "" {
		prefix = strings.TrimSuffix(prefix, "/") + "/"
	}
	var out []string
	p := s3.NewListObjectsV2Paginator(s.s3Client(), &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(prefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		if err != nil {
			t.Fatalf("seaweedtest: list %s: %v", loc, err)
		}
		for _, o := range page.Contents {
			if k := aws.ToString(o.Key); !strings.HasSuffix(k, "/") {
				out = append(out, "s3://"+bucket+"/"+k)
			}
		}
	}
	return out
}

// Put writes data to the object at loc (s3://BUCKET/KEY).
func (s *Server) Put(t testing.TB, loc string, data []byte) {
	t.Helper()
	bucket, key := splitLocation(t, loc)
	if _, err := s.s3Client().PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(data)}); err != nil {
		t.Fatalf("seaweedtest: put %s: %v", loc, err)
	}
}
