//go:build tools

// Package tools pins the SeaweedFS server (S3 gateway and Iceberg REST
// catalog) that the object-storage tests run; `make weed` builds it into
// tmp/tools/weed. It is a module of its own so that SeaweedFS's many
// dependencies stay out of TMS's go.mod.
package tools

import _ "github.com/seaweedfs/seaweedfs/weed"
