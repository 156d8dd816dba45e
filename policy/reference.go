package policy

import (
	"fmt"
	"strings"
)

// Examples are one valid policy document per maintenance type, in chain
// order: the reference shows them and a test decodes each.
var Examples = map[Type]string{
	Compaction: `{
  "name": "compact-on-commit",
  "comment": "small files after every commit, and nightly",
  "policyType": "system_iceberg_compaction",
  "enabled": true,
  "content": {
    "schedule": {"onCommit": true, "crontab": "0 3 * * *", "timezone": "Europe/Berlin"},
    "minIntervalMs": 600000,
    "minDataFileMse": 1000000,
    "jobOptions": {"spark.executor.memory": "4g"},
    "rewriteOptions": {"target-file-size-bytes": "134217728", "min-input-files": "5"}
  }
}`,
	DeleteRewrite: `{
  "name": "merge-deletes-on-commit",
  "policyType": "system_iceberg_rewrite_position_deletes",
  "content": {
    "schedule": {"onCommit": true},
    "minIntervalMs": 300000,
    "minPositionDeleteFileNumber": 10
  }
}`,
	ManifestRewrite: `{
  "name": "manifests-hourly",
  "policyType": "system_iceberg_rewrite_manifests",
  "content": {
    "schedule": {"crontab": "@hourly"},
    "minManifestNumber": 50,
    "rewriteOptions": {"target-manifest-size-bytes": "8388608"}
  }
}`,
	SnapshotExpiry: `{
  "name": "expire-week",
  "policyType": "system_iceberg_snapshot_expiration",
  "content": {
    "schedule": {"onCommit": true},
    "rewriteOptions": {"older-than": "7d", "retain-last": "10", "clean-expired-files": "true"}
  }
}`,
	OrphanCleanup: `{
  "name": "orphans-weekly",
  "policyType": "system_iceberg_orphan_file_removal",
  "content": {
    "schedule": {"crontab": "0 4 * * 0", "timezone": "UTC"},
    "rewriteOptions": {"older-than": "72h", "equal-schemes": {"s3a,s3n": "s3"}, "prefix-mismatch-mode": "error"}
  }
}`,
}

// Reference returns docs/policies.md: every field of every policy type,
// generated from the definitions the parsers use (`make docs` writes it; a
// test fails when the file is stale).
func Reference() string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("# Maintenance policies\n\n")
	w("<!-- Generated from package policy by `make docs`; do not edit. A test fails when this file is stale. -->\n\n")
	w("A policy is a Gravitino-shaped document. The CLI (`tms-coordinator policy create --content-file`) and the HTTP API (`POST /v1/policies`) take it; attaching it to a catalog, namespace or table makes it apply there (the nearest attachment of each type wins).\n\n")
	w("| Field | Type | Default | Meaning |\n|---|---|---|---|\n")
	w("| `name` | string | required | Letters, digits, `_`, `-` and `.`, not starting with `-` or `.`, at most 128 characters. |\n")
	w("| `comment` | string | empty | Free text. |\n")
	w("| `policyType` | string | required | One of the policy types below; the maintenance type name (`compaction`) is accepted too. |\n")
	w("| `enabled` | boolean | `true` | A disabled policy triggers nothing. |\n")
	w("| `content` | object | required | The fields below. Unknown fields are refused, so a typo never falls back to a default silently. |\n\n")

	w("## Policy types\n\n| policyType | Maintenance type | Triggers |\n|---|---|---|\n")
	for _, t := range order {
		w("| `%s` | `%s` | %s |\n", PolicyTypeOf(t), t, triggers(t))
	}
	w("\nA job runs the types due for a table in this order (%s), one job per table at a time.\n\n", TypeList())

	w("## Values\n\n")
	w("Integers, numbers and booleans may be written as JSON strings too (`\"5\"`, `\"true\"`), as Gravitino stores `rewriteOptions`. ")
	w("A duration is a Go duration or whole days: `90m`, `72h`, `5d`. ")
	w("A field shown as `rewriteOptions.x` lives in the `rewriteOptions` object; its other spellings are accepted where the table says.\n\n")
	w("**Credentials never live in a policy.** A key of `jobOptions` or `rewriteOptions` that looks like one is refused, naming it: the key, lower-cased with `-`, `_`, `.` and spaces removed, contains one of %s. So is a `jobOptions` value that is a URL with a password. Credentials belong in the coordinator's `gravitinoAuth.*` and `ircAuth.*` configuration; the same rule refuses them in job specs and catalog properties.\n\n", quoteAll(credentialWords))

	w("## Fields every type takes\n\n")
	fieldTable(&b, commonFields, "")
	w("\nGravitino's own content keys %s are accepted and ignored.\n", quoteAll(names(gravitinoIgnored)))

	for _, t := range order {
		w("\n## %s (`%s`)\n\n", t, PolicyTypeOf(t))
		w("Triggers: %s.\n\n", triggers(t))
		w("%s\n\n", typeDoc[t])
		fieldTable(&b, Fields(t)[len(commonFields):], triggers(t))
		w("\nExample:\n\n```json\n%s\n```\n", Examples[t])
	}
	return b.String()
}

// typeDoc says when each type works and what it does.
var typeDoc = map[Type]string{
	Compaction:      "Rewrites small data files into files of the target size and applies delete files. It works when data-file-mse ≥ minDataFileMse or, with at least one delete file, delete-file-number ≥ minDeleteFileNumber. Rows are never changed: the new files are checked against the replaced ones before the commit.",
	DeleteRewrite:   "Merges the position-delete files of a partition into one (Spark's rewrite_position_delete_files), for merge-on-read tables whose every DELETE, UPDATE or MERGE adds small delete files that each read must open. It works on a partition holding at least minPositionDeleteFileNumber position-delete files (deletion vectors, one per data file already, are not merged). Entries that no longer apply (their data file is gone, or was written after the delete) are dropped; the new file keeps the highest data sequence number of the files it replaces, so it applies to exactly the rows they did. Before the commit the verifier re-reads the new file and checks that it deletes the same positions of the same live data files.",
	ManifestRewrite: "Rewrites the current snapshot's manifests into fewer, larger ones. It works when there are at least minManifestNumber manifests averaging below maxAvgManifestSizeBytes, or at least maxManifestNumber at any size.",
	SnapshotExpiry:  "Expires old snapshots and deletes the files only they referenced. Unset ages and counts fall back to the table's history.expire.* properties. Files are compared by canonical location, as orphan cleanup compares them: a file a retained snapshot references under another spelling (file:/p and file:///p, s3a:// and s3://) is never deleted, and prefix-mismatch-mode says whether the expiry fails or keeps it.",
	OrphanCleanup:   "Deletes files under the table location that no snapshot references and that are older than older-than. It skips hidden names as Iceberg's DeleteOrphanFiles does, and deletes nothing when a planned orphan looks like a live file.",
}

func triggers(t Type) string {
	if OnCommitAllowed(t) {
		return "onCommit, crontab"
	}
	return "crontab only"
}

func fieldTable(b *strings.Builder, fields []Field, trig string) {
	head := "| Field | Also spelled | Type | Default | Range | Meaning |"
	sep := "|---|---|---|---|---|---|"
	if trig != "" {
		head += " Triggers |"
		sep += "---|"
	}
	fmt.Fprintf(b, "%s\n%s\n", head, sep)
	for _, f := range fields {
		def := "`" + f.Default + "`"
		if f.Default == "" {
			def = f.Unset
		}
		kind := string(f.Kind)
		if len(f.Values) > 0 {
			kind = strings.Join(quoteEach(f.Values), ", ")
		}
		fmt.Fprintf(b, "| `%s` | %s | %s | %s | %s | %s |", f.Name, strings.Join(quoteEach(f.Aliases), ", "), kind, def, f.rangeText(), f.Doc)
		if trig != "" {
			fmt.Fprintf(b, " %s |", trig)
		}
		b.WriteString("\n")
	}
}

func names(fs []Field) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.Name
	}
	return out
}

func quoteEach(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = "`" + s + "`"
	}
	return out
}

func quoteAll(ss []string) string {
	q := quoteEach(ss)
	if len(q) < 2 {
		return strings.Join(q, "")
	}
	return strings.Join(q[:len(q)-1], ", ") + " and " + q[len(q)-1]
}
