// Package testdata owns the table recipes of TMS and the builder that
// materialises them as real Apache Iceberg tables — parquet data and delete
// files, avro manifests and manifest lists, metadata JSON — written by
// iceberg-go into a local testdata-style catalog (catalogs.OpenLocal: a SQLite
// SQL catalog at DIR/catalog.db, the warehouse at DIR/warehouse). It exists for
// tests, `tms-runner replay`, the demo and benchmarks. Production code paths
// must not depend on it, and it never writes to any catalog other than the
// local one in the directory it is given.
//
// A recipe (Recipe) is declarative: format version, day partitioning, appends
// and rows per append, files per append, delete commits, planted orphans. Build
// turns recipes into tables in namespace "tms"; BuildT does the same into
// t.TempDir() for other packages' tests. After a build, DIR holds:
//
//	catalog.db                        the SQL catalog
//	warehouse/tms.db/<table>/data     parquet data and delete files
//	warehouse/tms.db/<table>/metadata metadata JSON, manifest lists, manifests
//	orphans.json                      planted orphan files (see OrphanFile)
//
// Content is deterministic: rows come from a PCG generator seeded from the
// recipe name, ids are 0..n-1 in append order, and the ids each delete commit
// removes come from a second seeded stream. Building a recipe twice at the
// same scale gives the same live rows (ExpectedRows lists them); snapshot ids,
// file names, UUIDs and timestamps differ between builds.
//
// Every table gets write.target-file-size-bytes = 512 MiB (iceberg-go's
// default, written out so readers need not know it), so every file a recipe
// writes is "small". Manifest merging (commit.manifest-merge.enabled) is left
// off, so every append adds exactly one manifest.
//
// Build times at scale 1 on a shared 2-core machine, without the race
// detector (under -race expect 3–15x): tms.small_files ~4 s, tms.partitioned
// ~0.5 s, tms.deletes ~0.5 s, tms.many_snapshots ~2 s, tms.orphans ~0.2 s (all
// defaults ~8 s); tms.bench_10k ~15–22 s, nearly all of it creating and
// closing 10,000 parquet files.
//
// Foreign recipes (ForeignRecipes, BuildForeign, BuildForeignT; see
// foreign.go) are tables laid out the way other engines leave them —
// foreign.migrated, foreign.name-mapped, foreign.evolved, foreign.defaults,
// foreign.cross-partition-eq-deletes, foreign.relative, foreign.file-uri,
// foreign.hadoop-sidecars — each with its own builder, the rows it wrote
// (ForeignTable.Expected, the oracle a faithful reader must match), planted
// orphans and files orphan cleanup must keep. They are built one per
// directory and are not part of Build.
//
// Note that the go command leaves directories named testdata out of ./...
// patterns: name this package explicitly (go test ./testdata/).
package testdata
