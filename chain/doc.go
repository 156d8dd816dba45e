// Package chain owns the maintenance chain of one Iceberg table: the
// maintenance types (compaction, delete-rewrite, manifest-rewrite, snapshot-expiry,
// orphan-cleanup), their fixed order, the decision of each type from its S0
// metrics and policy content, the work done with iceberg-go, and the safety
// around every commit: a drift check against S0, the caller's BeforeCommit
// gate, conflict classification, and deletion of every file an attempt
// wrote that no commit claimed.
//
// Chain must not talk to the ledger or to any database: it has no SQL and
// knows nothing of jobs or fences. The runner connects it to the ledger
// through Hooks (Sampled to record metrics, BeforeCommit to check the fence,
// ProtectedSnapshots to learn the snapshots other in-flight jobs planned
// from). It does not choose catalogs either; callers pass an open one.
//
// # Order and outcomes
//
// Run executes the steps it is given in chain order. For each type it loads
// the table, samples S0 (Hooks.Sampled "before"), decides (the reason is
// kept either way), and works. A type that committed is sampled again
// (Hooks.Sampled "after"). There is no re-sample loop: a type whose table
// moved ends ended-drift and the next type runs.
//
// Compaction checks drift where the design puts it, after S0 and the
// decision and before any work starts; once its files are written it
// commits with optimistic concurrency (rebase.go): the snapshots that
// landed since S0 are classified, and when they only appended data (or
// added delete files that cannot apply to its input files) the same
// rewrite is rebuilt on the new head and committed, at most maxRebases
// times, with the verifier and Hooks.BeforeCommit run again for every
// attempt; a snapshot that removed an input file, added a delete file that
// may apply to one, or a schema or spec change ends it conflict. Manifest
// rewrite and snapshot expiry, which write only metadata, plan again on the
// new metadata when the table changed before their commit, at most
// maxRebases times, and end ended-drift when the head no longer descends
// from their base; Hooks.BeforeCommit runs before every attempt.
//
// A commit that returned an error is judged by the table, not by the error
// (lostanswer.go): a REST catalog may apply a commit and lose its answer.
// The chain reloads the table; one that holds what an attempt staged is
// that commit landed, and the type goes on as after any commit. Otherwise a
// REST 5xx or a transport failure is tried again within the same budget.
//
// A dry run decides and plans but writes and deletes nothing; every type
// that would work ends skipped with a reason starting "dry run: would".
//
// # Tables other engines wrote
//
// Compaction does not use iceberg-go's ExecuteCompactionGroup as it is: its
// scan reads a column that a data file does not store as NULL even when the
// file's identity-partition tuple holds the value (Spark's migrate/add_files
// and Hive-style files), and the rewrite would move every row to partition
// col=null. Each group is read through package internal/faithful instead
// (iceberg-go's scan plus the identity fill and refusals of what cannot be
// read exactly, decided from each file's Parquet footer before anything is
// written) and written with iceberg-go's WriteRecords as that function does
// (rewrite.go). Before every commit a verifier that reads no rows compares
// the new files with the replaced ones from metadata: per-partition record
// counts, partition tuples, and the null counts and bounds of identity
// columns (verify.go); a mismatch fails the type and nothing is committed.
//
// A delete file leaves the table with a rewrite only when it can no longer
// apply to a live data file (deletes.go). Which ones die is decided per
// commit over every data file that commit removes, never per file group:
// a merge-on-read DELETE writes one position-delete file for all the files
// it touched, and removing it with the group that rewrote some of them
// would bring back its rows in the others. The verifier then proves each
// removal from the delete file itself (its referenced data file, equal
// file_path bounds, or its file_path column read with arrow-go's Parquet
// reader) against the data files that stay, compared by canonical
// location; a delete file whose targets cannot be read is kept, and named
// in the detail.
//
// # Conflicts in iceberg-go v0.7.0
//
// The SQL catalog checks the commit's requirements (AssertRefSnapshotID on
// main) against the table it loads inside CommitTable. A concurrent commit
// that landed before that load makes the check fail with a plain
// "requirement failed: branch main has changed" error that wraps no
// sentinel, so Table.doCommit does not retry it whatever
// commit.retry.num-retries says. Only a commit that lands between that check
// and the compare-and-swap UPDATE yields an error wrapping
// table.ErrCommitFailed; doCommit retries those only when
// commit.retry.num-retries is above its default of 0, re-validating against
// the new head (a rewrite whose input files were deleted meanwhile fails
// with table.ErrCommitDiverged) and rebuilding the manifest list. Chain
// classifies all three as Conflict. In every non-done outcome it reloads
// the table, keeps what the table references (a commit that reported an
// error may have landed), and deletes the rest of what the attempt wrote:
// data files, manifests and manifest lists (recorded through a wrapping
// FileIO) and a metadata.json the catalog wrote for the failed commit.
//
// # Policies
//
// A step's policy content is read with package policy (ParseCompaction and
// its siblings), the one definition of every field, its spellings, default
// and range; docs/policies.md is generated from it. Chain decides from the
// parsed options and S0: compaction works when data-file-mse ≥
// minDataFileMse or, with at least one delete file, delete-file-number ≥
// minDeleteFileNumber; manifest-rewrite when there are minManifestNumber
// manifests averaging below maxAvgManifestSizeBytes, or maxManifestNumber
// at any size. The compaction `where` filter selects the data files that
// may hold matching rows (by partition and column bounds, like a scan);
// selected files are rewritten whole, so rows outside the filter in a
// selected file are kept, never dropped.
//
// Snapshot expiry and orphan planning use the wall clock (time.Now), as
// iceberg-go does; Options.Now only feeds the sampler's snapshot ages.
//
// # One notion of the same file
//
// Every comparison of two file locations goes through package
// internal/location, never a raw string compare: mixed writers spell one
// object differently (file:/abs, file:///abs and /abs; s3a:// and s3://),
// and a file dropped under one spelling and added back under another is
// still live. Snapshot expiry deletes a file only the expired snapshots
// reference only when no retained reference names it under any spelling,
// scheme or authority and its location parses; a retained reference under
// another spelling fails the type before it commits unless the policy's
// prefix-mismatch-mode is ignore or delete, which both keep the file
// (expiry_deletes.go).
//
// # Orphan cleanup
//
// Orphan cleanup does not use iceberg-go's PlanOrphanFiles (see
// cleanOrphans). A table with gc.enabled=false is skipped before anything
// is listed, as Iceberg Java refuses it. By default (policy scope
// table-paths, orphanscope.go) it lists only the table's own folders:
// write.data.path (default <location>/data), write.metadata.path (default
// <location>/metadata), Iceberg Java's write.object-storage.path and
// write.folder-storage.path when set, and every folder under the location
// its metadata references a file in; a folder inside another is listed
// once, and a folder that does not exist yet is empty. Every other file
// under the location (a table created with a LOCATION inside this one, an
// export) is left alone and counted in the detail (outside_table_paths,
// with listed_roots); a table at a bucket or filesystem root, or at the
// warehouse when the caller passes Options.Warehouse, has only its folders
// listed and nothing counted. Scope location lists the whole location as
// Iceberg Java does, and is refused for a table at such a root and for a
// table whose data or metadata path lies outside its location. Under
// either scope nothing below another table's root is planned: a listed
// folder holding table metadata that is not this table's
// (orphanforeign.go), another registered table's recorded location, and the
// files another registered table references under its recorded outside
// folders (orphanbrought.go) are left alone. The listing skips hidden names as
// Iceberg Java's DeleteOrphanFiles does (a name starting with "_" or ".",
// unless it starts with "<field>=" for a partition field of any spec whose
// name starts that way), and compares canonical paths
// (location.Normaliser: absolute, cleaned, file: spellings and bare local
// paths equal, the policy's scheme and authority equivalences) with every
// file the table references. A last guard aborts
// the whole cleanup, deleting nothing, when a planned orphan is the current
// metadata file, shares a referenced file's base name, or is a
// metadata-shaped file in a metadata folder named like a metadata log
// entry.
//
// On local storage the listing follows a symbolic link to a folder (a
// table's data/ moved to another disk) and lists it under the link's path,
// the spelling the metadata uses, once per folder and never through a link
// to a folder containing the link or the table (a cycle); a file the
// metadata names through a link is referenced. A link itself is never a
// candidate: links to files, dangling links and skipped folder links are
// named in the detail (skipped_links), and deletion checks right before
// each Remove that the path has not become a link.
package chain
