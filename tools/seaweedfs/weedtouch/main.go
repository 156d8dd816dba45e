// Command weedtouch sets the modification time of files in a SeaweedFS
// filer through the filer's own gRPC API (UpdateEntry). The
// object-storage tests use it to make planted orphan objects old: S3 has
// no way to set an object's modification time. `make weed` builds it into
// tmp/tools/weedtouch.
//
//	weedtouch -filer 127.0.0.1:GRPCPORT -mtime 2020-01-02T03:04:05Z /buckets/lake/ns/t/data/x.parquet ...
//
// An S3 object s3://BUCKET/KEY is the filer file /buckets/BUCKET/KEY.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path"
	"time"

	"github.com/seaweedfs/seaweedfs/weed/pb/filer_pb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

func main() {
	filer := flag.String("filer", "", "the filer's gRPC address, host:port")
	mtime := flag.String("mtime", "", "the modification time to set, RFC 3339")
	flag.Parse()
	when, err := time.Parse(time.RFC3339, *mtime)
	if *filer == "" || err != nil || flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: weedtouch -filer HOST:GRPCPORT -mtime RFC3339 FILER_PATH...")
		os.Exit(2)
	}
	conn, err := grpc.NewClient(*filer, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		fmt.Fprintln(os.Stderr, "weedtouch:", err)
		os.Exit(1)
	}
	defer conn.Close()
	client := filer_pb.NewSeaweedFilerClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, p := range flag.Args() {
		if err := touch(ctx, client, p, when); err != nil {
			fmt.Fprintf(os.Stderr, "weedtouch: %s: %v\n", p, err)
			os.Exit(1)
		}
	}
}

func touch(ctx context.Context, client filer_pb.SeaweedFilerClient, p string, when time.Time) error {
	dir, name := path.Split(path.Clean(p))
	dir = path.Clean(dir)
	resp, err := filer_pb.LookupEntry(ctx, client, &filer_pb.LookupDirectoryEntryRequest{Directory: dir, Name: name})
	if err != nil {
		return err
	}
	e := resp.Entry
	if e.Attributes == nil {
		e.Attributes = &filer_pb.FuseAttributes{}
	}
	e.Attributes.Mtime, e.Attributes.MtimeNs = when.Unix(), 0
	return filer_pb.UpdateEntry(ctx, client, &filer_pb.UpdateEntryRequest{Directory: dir, Entry: e})
}
