// Package policy is the one definition of a TMS maintenance policy, the
// Gravitino-shaped document {name, comment, policyType, enabled, content}:
// the maintenance types and their chain order, Gravitino's policy types,
// the content's fields (schedule, minIntervalMs, jobOptions, each type's
// thresholds and rewriteOptions) with their spellings, defaults and ranges
// (fields.go), the one rule for credential-shaped keys, the crontab and
// where-filter syntaxes, and the error type that names the offending field.
// docs/policies.md is generated from the same definitions (Reference).
//
// The coordinator validates whole documents with Decode and ParseContent and
// acts on the schedule, cooldown and job options; the runner's chain reads a
// type's options with ParseCompaction, ParseManifests, ParseExpiry and
// ParseOrphans. Neither parses policy JSON itself.
//
// What it must not do: touch tables, catalogs or databases, or know about
// jobs, ledgers and schedulers. Of TMS's packages it imports only sampler
// (the metrics a policy decides from, Decide) and the internal location and
// invalid packages, none of which reach back into the coordinator or the
// runner, so both sides can import it.
package policy
