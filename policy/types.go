package policy

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Type is a maintenance type. Its string form is the name used in policies,
// job specs, the ledger and on the command line.
type Type string

// The maintenance types, in chain order.
const (
	Compaction      Type = "compaction"
	DeleteRewrite   Type = "delete-rewrite"
	ManifestRewrite Type = "manifest-rewrite"
	SnapshotExpiry  Type = "snapshot-expiry"
	OrphanCleanup   Type = "orphan-cleanup"
)

// order is the fixed order in which a chain runs its types; orphan cleanup
// is always last because it must see the files the other types left.
var order = []Type{Compaction, DeleteRewrite, ManifestRewrite, SnapshotExpiry, OrphanCleanup}

// Types returns every maintenance type in chain order.
func Types() []Type { return slices.Clone(order) }

// Rank returns t's position in the chain order (compaction 0 … orphan
// cleanup 4), -1 for an unknown type: sort by it to run types in order.
func Rank(t Type) int { return slices.Index(order, t) }

// ParseTypes parses a comma-separated list of maintenance types such as
// "compaction,manifest-rewrite". Blanks around names are ignored, duplicates
// are dropped, and the result is sorted into chain order. An unknown or empty
// name is an error naming it, wrapping ErrInvalid.
func ParseTypes(s string) ([]Type, error) {
	seen := map[Type]bool{}
	for _, f := range strings.Split(s, ",") {
		name := Type(strings.TrimSpace(f))
		if name == "" {
			return nil, fmt.Errorf("%w: empty maintenance type in %q", ErrInvalid, s)
		}
		if !slices.Contains(order, name) {
			return nil, fmt.Errorf("%w: unknown maintenance type %q (want one of %s)", ErrInvalid, name, TypeList())
		}
		seen[name] = true
	}
	out := make([]Type, 0, len(seen))
	for _, t := range order {
		if seen[t] {
			out = append(out, t)
		}
	}
	return out, nil
}

// TypeList is the maintenance types in chain order, comma-separated, for
// messages.
func TypeList() string {
	names := make([]string, len(order))
	for i, t := range order {
		names[i] = string(t)
	}
	return strings.Join(names, ", ")
}

// JoinTypes joins types with commas, as the ledger's types column does.
func JoinTypes(ts []Type) string {
	s := make([]string, len(ts))
	for i, t := range ts {
		s[i] = string(t)
	}
	return strings.Join(s, ",")
}

// gravitinoTypes maps Gravitino's policy types to maintenance types, in chain
// order (see docs/policies.md).
var gravitinoTypes = []struct {
	name string
	typ  Type
}{
	{"system_iceberg_compaction", Compaction},
	{"system_iceberg_rewrite_position_deletes", DeleteRewrite},
	{"system_iceberg_rewrite_manifests", ManifestRewrite},
	{"system_iceberg_snapshot_expiration", SnapshotExpiry},
	{"system_iceberg_orphan_file_removal", OrphanCleanup},
}

// ParsePolicyType accepts a Gravitino policy type (system_iceberg_compaction)
// or a maintenance type name (compaction), case-insensitively, and returns
// both. An unknown name is an *Error on field policyType listing the valid
// ones.
func ParsePolicyType(s string) (policyType string, t Type, err error) {
	want := strings.ToLower(strings.TrimSpace(s))
	for _, pt := range gravitinoTypes {
		if want == pt.name || want == string(pt.typ) {
			return pt.name, pt.typ, nil
		}
	}
	valid := make([]string, len(gravitinoTypes))
	for i, pt := range gravitinoTypes {
		valid[i] = fmt.Sprintf("%s (%s)", pt.name, pt.typ)
	}
	return "", "", errf("policyType", "unknown policy type %q; want one of %s", s, strings.Join(valid, ", "))
}

// PolicyTypeList is the Gravitino policy types in chain order,
// comma-separated, for messages.
func PolicyTypeList() string {
	names := make([]string, len(gravitinoTypes))
	for i, pt := range gravitinoTypes {
		names[i] = pt.name
	}
	return strings.Join(names, ", ")
}

// PolicyTypeOf returns the Gravitino policy type of maintenance type t, or
// "" for an unknown t.
func PolicyTypeOf(t Type) string {
	for _, pt := range gravitinoTypes {
		if pt.typ == t {
			return pt.name
		}
	}
	return ""
}

// MaintenanceTypeOf returns the maintenance type of a Gravitino policy type
// exactly as stored (no aliases), and false for an unknown one.
func MaintenanceTypeOf(policyType string) (Type, bool) {
	for _, pt := range gravitinoTypes {
		if pt.name == policyType {
			return pt.typ, true
		}
	}
	return "", false
}

// OnCommitAllowed reports whether a policy of type t may run on commit:
// orphan-cleanup runs on a crontab only, because a file a writer has not
// committed yet looks like an orphan right after a commit.
func OnCommitAllowed(t Type) bool { return t != OrphanCleanup }

// DefaultMinInterval is the cooldown of a type when neither the policy's
// minIntervalMs nor the coordinator configuration sets one: a day for
// orphan-cleanup, an hour for the others.
func DefaultMinInterval(t Type) time.Duration {
	if t == OrphanCleanup {
		return 24 * time.Hour
	}
	return time.Hour
}
