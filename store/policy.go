package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
)

// This file declares the policy API: policies with versioned content
// (policy, policy_version) and where they are attached (policy_attachment).
// policy_ops.go implements Policies once for both backends; Store embeds
// it.
//
// The store does not know what a policy's content means: it stores a JSON
// object and the policy type as text. Package coordinator validates both
// before they get here.
//
// Resolution rules, the same on both backends (the SQL is shared, see
// attachmentCovers and attachmentRank):
//
//   - An attachment covers a table when the catalogs are equal and it is a
//     catalog attachment; or it is a namespace attachment whose namespace is
//     the table's namespace or a parent of it ("db" covers "db" and
//     "db.sales", not "dbx"); or it is a table attachment naming the table.
//   - For each policy type the nearest covering attachment wins: table, then
//     the deepest namespace, then catalog. At most one policy of a type may
//     be attached to one object (ErrConflict otherwise), so there is exactly
//     one winner.
//   - The winner wins whether or not its policy is enabled: a disabled
//     policy attached nearer switches its type off for the tables it covers
//     instead of letting a farther policy through. Disabling a policy
//     therefore never changes which policy governs a table; detaching does.
//   - Of a table name dropped and recreated, only the newest incarnation
//     (the highest maintained_table id) is a table of a policy.

// ErrConflict means a write collides with an existing row: a live policy
// already has the name, or another policy of the same type is already
// attached to the object. Nothing was changed.
var ErrConflict = errors.New("conflict")

// ObjectLevel says what a policy is attached to.
type ObjectLevel string

// The attachment levels, farthest first.
const (
	LevelCatalog   ObjectLevel = "catalog"
	LevelNamespace ObjectLevel = "namespace"
	LevelTable     ObjectLevel = "table"
)

// PolicyObject is a catalog, a namespace or a table a policy is attached to.
type PolicyObject struct {
	// Level must agree with the names given: a catalog has only Catalog, a
	// namespace also Namespace, a table all three.
	Level ObjectLevel
	// Catalog is the catalog name as configured in TMS.
	Catalog string
	// Namespace is the namespace, levels joined with "."; empty for a
	// catalog.
	Namespace string
	// Table is the table name; empty unless Level is LevelTable.
	Table string
}

// String returns the object's dotted name: catalog, catalog.namespace or
// catalog.namespace.table.
func (o PolicyObject) String() string {
	parts := []string{o.Catalog}
	if o.Namespace != "" {
		parts = append(parts, o.Namespace)
	}
	if o.Table != "" {
		parts = append(parts, o.Table)
	}
	return strings.Join(parts, ".")
}

// NewPolicy is what CreatePolicy stores.
type NewPolicy struct {
	// Name identifies the policy among live ones. Required, at most 255
	// characters, no white space at either end.
	Name string
	// Comment is free text; may be empty.
	Comment string
	// Type is the policy type, e.g. "system_iceberg_compaction". Required;
	// the store does not check it against a list.
	Type string
	// Enabled says whether the policy acts. The zero value creates a
	// disabled policy.
	Enabled bool
	// Content is version 1's content, a JSON object. Required.
	Content json.RawMessage
}

// Policy is a row of policy with the content of its current version.
type Policy struct {
	ID      int64
	Name    string
	Comment string
	Type    string
	Enabled bool
	// Version is the current version, 1 after CreatePolicy, incremented by
	// every AlterPolicy that sets content.
	Version int
	// Content is the current version's content. It is semantically equal to
	// what was stored, not necessarily byte-equal (PostgreSQL normalises
	// jsonb).
	Content   json.RawMessage
	CreatedAt time.Time // UTC
	// UpdatedAt is when the policy last changed (content, comment, enabled,
	// deletion), in UTC.
	UpdatedAt time.Time
	// DeletedAt is when DeletePolicy deleted the policy, zero for a live one.
	// Only GetPolicyByID and DeletePolicy return deleted policies.
	DeletedAt time.Time
}

// Deleted reports whether the policy was deleted.
func (p Policy) Deleted() bool { return !p.DeletedAt.IsZero() }

// PolicyChange is what AlterPolicy changes. At least one field must be set.
type PolicyChange struct {
	// Content, when set, becomes a new version (the current version + 1).
	// It must be a JSON object.
	Content json.RawMessage
	// Comment, when not nil, replaces the comment without a new version.
	Comment *string
}

// PolicyVersion is a row of policy_version.
type PolicyVersion struct {
	PolicyID  int64
	Version   int
	Content   json.RawMessage
	CreatedAt time.Time // UTC
}

// Attachment is a row of policy_attachment.
type Attachment struct {
	PolicyID   int64
	PolicyName string
	PolicyType string
	Object     PolicyObject
	CreatedAt  time.Time // UTC
}

// EffectivePolicy is the policy that governs one maintenance type of a
// table, and the attachment it reaches the table through.
type EffectivePolicy struct {
	// Policy is the winning policy with its current content. It may be
	// disabled, which means the type is switched off for the table.
	Policy Policy
	// Attachment is the nearest attachment of the policy's type covering
	// the table; Attachment.Object says whether it was attached to the
	// table itself, a namespace or the catalog.
	Attachment Attachment
}

// Policies is the policy API. Writes that change what the coordinator
// schedules return the changed rows, so the caller (the coordinator's policy
// handlers) can create, move or cancel the policy's policy-expand task.
// Mutations find the policy by name among live policies and return
// ErrNotFound for an unknown or deleted name. Implementations are safe for
// concurrent use, also from several processes on one database.
type Policies interface {
	// CreatePolicy stores p as version 1. ErrConflict if a live policy has
	// the name; ErrInvalidArgument for a bad name, type or content.
	CreatePolicy(ctx context.Context, p NewPolicy) (Policy, error)
	// AlterPolicy applies c: new content becomes a new version, a comment
	// replaces the old one. It returns the policy as it is afterwards.
	AlterPolicy(ctx context.Context, name string, c PolicyChange) (Policy, error)
	// SetPolicyEnabled enables or disables the policy. changed is false if
	// it already was in that state (and then nothing was written).
	SetPolicyEnabled(ctx context.Context, name string, enabled bool) (p Policy, changed bool, err error)
	// DeletePolicy marks the policy deleted and removes its attachments, in
	// one transaction, and returns it as deleted. Its versions stay readable
	// and its name may be used again.
	DeletePolicy(ctx context.Context, name string) (Policy, error)
	// GetPolicy returns the live policy called name. ErrNotFound if none.
	GetPolicy(ctx context.Context, name string) (Policy, error)
	// GetPolicyByID returns policy id, also when it was deleted (see
	// Policy.Deleted): ledger rows and tasks refer to policies by id and may
	// outlive them. ErrNotFound if there never was one.
	GetPolicyByID(ctx context.Context, id int64) (Policy, error)
	// GetPolicyVersion returns one version of a policy (deleted or not).
	// ErrNotFound if there is no such version.
	GetPolicyVersion(ctx context.Context, id int64, version int) (PolicyVersion, error)
	// ListPolicies returns the live policies by name.
	ListPolicies(ctx context.Context) ([]Policy, error)

	// Attach attaches the live policy called name to obj. Attaching it again
	// is a no-op that returns the existing row with created false. If
	// another policy of the same type is attached to obj, it returns
	// ErrConflict naming that policy. The object need not be a known table:
	// attachments come first, table discovery follows them.
	Attach(ctx context.Context, name string, obj PolicyObject) (a Attachment, created bool, err error)
	// Detach removes the attachment of the policy called name to obj and
	// returns it. ErrNotFound if the policy is unknown or not attached there.
	Detach(ctx context.Context, name string, obj PolicyObject) (Attachment, error)
	// ListAttachments returns the attachments of policy id by object name.
	// An unknown or deleted policy has none (empty, no error).
	ListAttachments(ctx context.Context, policyID int64) ([]Attachment, error)

	// EffectivePolicies returns, for each policy type with an attachment
	// covering the table catalog.namespace.table, the winning policy (see
	// the resolution rules above), ordered by policy type. The table does
	// not have to be registered. Disabled winners are included.
	EffectivePolicies(ctx context.Context, catalog, namespace, table string) ([]EffectivePolicy, error)
	// TablesForPolicy returns one bounded batch of the registered tables
	// governed by policy id — covered by one of its attachments with no
	// nearer attachment of another policy of the same type — ascending by
	// id. Only the newest incarnation of a table name counts.
	//
	// It examines at most TablesScanWindow(limit) maintained_table rows with
	// id greater than afterTableID and returns up to limit (positive) of
	// them, so a call's work is bounded however few tables the policy
	// covers. next is the afterTableID of the following call, 0 when the
	// walk is complete; a batch may be empty while next is not 0 (a stretch
	// of ids the policy does not cover). Start a walk with 0. An unknown or
	// deleted policy has no tables.
	//
	// The walk sees tables in id order, so one registered while a walk is
	// under way is included if its id is above the cursor; a table whose
	// insert commits with an id below the cursor is seen by the next walk.
	TablesForPolicy(ctx context.Context, policyID, afterTableID int64, limit int) (tables []Table, next int64, err error)
}

// Compile-time checks that both backends implement Policies.
var (
	_ Policies = (*postgresStore)(nil)
	_ Policies = (*sqliteStore)(nil)
)

// maxPolicyNameLen bounds policy names (Gravitino's own limit is lower).
const maxPolicyNameLen = 255

func validatePolicyName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: policy name must not be empty", ErrInvalidArgument)
	case strings.TrimSpace(name) != name:
		return fmt.Errorf("%w: policy name %q must not start or end with white space", ErrInvalidArgument, name)
	case len(name) > maxPolicyNameLen:
		return fmt.Errorf("%w: policy name is %d bytes long, at most %d allowed", ErrInvalidArgument, len(name), maxPolicyNameLen)
	}
	return nil
}

func validateNewPolicy(p NewPolicy) error {
	if err := validatePolicyName(p.Name); err != nil {
		return err
	}
	if strings.TrimSpace(p.Type) == "" {
		return fmt.Errorf("%w: policy %q: type must not be empty", ErrInvalidArgument, p.Name)
	}
	return validatePolicyContent(p.Name, p.Content)
}

func validatePolicyChange(name string, c PolicyChange) error {
	if err := validatePolicyName(name); err != nil {
		return err
	}
	if c.Content == nil && c.Comment == nil {
		return fmt.Errorf("%w: policy %q: nothing to change (no content, no comment)", ErrInvalidArgument, name)
	}
	if c.Content != nil {
		return validatePolicyContent(name, c.Content)
	}
	return nil
}

// validatePolicyContent requires a JSON object.
func validatePolicyContent(name string, content json.RawMessage) error {
	t := bytes.TrimSpace(content)
	if len(t) == 0 || t[0] != '{' || !json.Valid(t) {
		return fmt.Errorf("%w: policy %q: content must be a JSON object", ErrInvalidArgument, name)
	}
	return nil
}

// validatePolicyObject checks that obj's names agree with its level.
func validatePolicyObject(obj PolicyObject) error {
	blank := func(s string) bool { return strings.TrimSpace(s) == "" }
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s object %q: %s", ErrInvalidArgument, obj.Level, obj.String(), fmt.Sprintf(format, args...))
	}
	if blank(obj.Catalog) {
		return bad("catalog must not be empty")
	}
	for _, f := range []struct{ name, value string }{{"catalog", obj.Catalog}, {"namespace", obj.Namespace}, {"table", obj.Table}} {
		if strings.ContainsFunc(f.value, unicode.IsControl) {
			return bad("%s contains a control character", f.name)
		}
	}
	switch obj.Level {
	case LevelCatalog:
		if obj.Namespace != "" || obj.Table != "" {
			return bad("a catalog object has no namespace or table")
		}
	case LevelNamespace:
		if blank(obj.Namespace) || obj.Table != "" {
			return bad("a namespace object has a namespace and no table")
		}
	case LevelTable:
		if blank(obj.Namespace) || blank(obj.Table) {
			return bad("a table object needs a namespace and a table name")
		}
	default:
		return fmt.Errorf("%w: object level %q is not one of catalog, namespace, table", ErrInvalidArgument, obj.Level)
	}
	if obj.Namespace != "" && (strings.HasPrefix(obj.Namespace, ".") || strings.HasSuffix(obj.Namespace, ".") || strings.Contains(obj.Namespace, "..")) {
		return bad("namespace %q has an empty level", obj.Namespace)
	}
	return nil
}

// attachmentCovers is the SQL condition "attachment a covers the table
// (cat, ns, name)", where cat, ns and name are SQL expressions (columns or
// placeholders). A namespace attachment covers its namespace and every
// namespace below it; the comparison uses substr, not LIKE, so '_' and '%'
// in names are plain characters.
func attachmentCovers(a, cat, ns, name string) string {
	return fmt.Sprintf(`(%[1]s.catalog = %[2]s AND (%[1]s.object_level = 'catalog'
		OR (%[1]s.object_level = 'namespace' AND (%[3]s = %[1]s.namespace
			OR substr(%[3]s, 1, length(%[1]s.namespace) + 1) = %[1]s.namespace || '.'))
		OR (%[1]s.object_level = 'table' AND %[3]s = %[1]s.namespace AND %[4]s = %[1]s.table_name)))`,
		a, cat, ns, name)
}

// attachmentRank is the SQL expression of how near attachment a is to a
// table it covers: higher is nearer. A table attachment beats any namespace
// one, a deeper namespace a shallower one (the covering namespaces of one
// table are prefixes of each other, so the longer is the deeper), and any
// namespace the catalog.
func attachmentRank(a string) string {
	return fmt.Sprintf(`(CASE %[1]s.object_level WHEN 'table' THEN 1000000000
		WHEN 'namespace' THEN 1 + length(%[1]s.namespace) ELSE 0 END)`, a)
}

// TablesScanWindow is how many maintained_table rows one TablesForPolicy
// call with limit examines at most: ten times limit, at least 100.
func TablesScanWindow(limit int) int { return max(10*limit, 100) }

// tablesForPolicySQL is TablesForPolicy's query in dialect d, placeholders
// 1: policy id, 2: after table id, 3: limit, 4: scan window. The window
// subquery, a LIMIT over the primary key, is what bounds the work: without
// it PostgreSQL, misjudging how many rows the attachment conditions keep,
// would filter every row above the cursor and sort them on each call. The
// attachment EXISTS ends in d.noPullUp(): as a hash semi join PostgreSQL
// lost the window's id order, so every call filtered all of the scan window
// and sorted it instead of stopping at the limit.
func tablesForPolicySQL(d sqlDialect) string {
	p := d.param
	return `
		SELECT t.id, t.catalog, t.namespace, t.name, t.table_uuid, t.created_at
		FROM (SELECT id, catalog, namespace, name, table_uuid, created_at FROM maintained_table
			WHERE id > ` + p(2) + ` ORDER BY id LIMIT ` + p(4) + `) t
		WHERE NOT EXISTS (SELECT 1 FROM maintained_table n
			WHERE n.catalog = t.catalog AND n.namespace = t.namespace AND n.name = t.name AND n.id > t.id)
		  AND EXISTS (SELECT 1 FROM policy_attachment a
			WHERE a.policy_id = ` + p(1) + ` AND ` + attachmentCovers("a", "t.catalog", "t.namespace", "t.name") + `
			  AND NOT EXISTS (SELECT 1 FROM policy_attachment b
				WHERE b.policy_type = a.policy_type AND b.policy_id <> a.policy_id
				  AND ` + attachmentCovers("b", "t.catalog", "t.namespace", "t.name") + `
				  AND ` + attachmentRank("b") + ` > ` + attachmentRank("a") + `)` + d.noPullUp() + `)
		ORDER BY t.id
		LIMIT ` + p(3)
}

// tablesWindowSQL returns the highest id and the number of rows of the
// window tablesForPolicySQL examined, in dialect d (1: after table id, 2:
// scan window).
func tablesWindowSQL(d sqlDialect) string {
	p := d.param
	return `SELECT coalesce(max(id), 0), count(*) FROM (SELECT id FROM maintained_table
		WHERE id > ` + p(1) + ` ORDER BY id LIMIT ` + p(2) + `) w`
}

// tablesNext computes TablesForPolicy's next cursor. window reads the
// examined window's highest id and row count; it is only consulted when
// the batch is not full.
func tablesNext(tables []Table, limit, scan int, window func() (maxID int64, rows int, err error)) (int64, error) {
	if len(tables) == limit {
		return tables[limit-1].ID, nil
	}
	maxID, rows, err := window()
	if err != nil || rows < scan {
		return 0, err // the window reached the last table: the walk is done
	}
	return maxID, nil
}

// policyCols are the columns scanPolicy reads: the policy row p joined with
// its current version v.
const policyCols = `p.id, p.name, p.comment, p.policy_type, p.enabled, p.current_version,
	p.created_at, p.updated_at, p.deleted_at, v.content`

// policyFrom joins a policy with its current version.
const policyFrom = `policy p JOIN policy_version v ON v.policy_id = p.id AND v.version = p.current_version`

// attachmentCols are the columns of an attachment a joined with its policy p.
const attachmentCols = `a.policy_id, p.name, a.policy_type, a.object_level, a.catalog, a.namespace, a.table_name, a.created_at`

// effectivePoliciesSQL is EffectivePolicies' query: every covering
// attachment with its live policy, nearest first within each type. p
// renders placeholder i (1: catalog, 2: namespace, 3: table).
func effectivePoliciesSQL(p func(int) string) string {
	return `
		SELECT ` + policyCols + `, ` + attachmentCols + `
		FROM policy_attachment a JOIN policy p ON p.id = a.policy_id
		JOIN policy_version v ON v.policy_id = p.id AND v.version = p.current_version
		WHERE p.deleted_at IS NULL AND ` + attachmentCovers("a", p(1), p(2), p(3)) + `
		ORDER BY a.policy_type, ` + attachmentRank("a") + ` DESC`
}

// nearestPerType keeps the first row of each policy type of rows ordered by
// type, nearest first.
func nearestPerType(rows []EffectivePolicy) []EffectivePolicy {
	out := make([]EffectivePolicy, 0, len(rows))
	for _, r := range rows {
		if n := len(out); n > 0 && out[n-1].Policy.Type == r.Policy.Type {
			continue
		}
		out = append(out, r)
	}
	return out
}

func policyNotFound(name string) error {
	return fmt.Errorf("%w: policy %q", ErrNotFound, name)
}

func policyNameTaken(name string) error {
	return fmt.Errorf("%w: policy %q already exists", ErrConflict, name)
}

func attachmentTaken(obj PolicyObject, typ, other string) error {
	return fmt.Errorf("%w: policy %q of type %s is already attached to %s %s; detach it first",
		ErrConflict, other, typ, obj.Level, obj.String())
}

func notAttached(name string, obj PolicyObject) error {
	return fmt.Errorf("%w: policy %q is not attached to %s %s", ErrNotFound, name, obj.Level, obj.String())
}

func validateTablesForPolicy(limit int) error {
	if limit <= 0 {
		return fmt.Errorf("%w: tables-for-policy limit must be positive, got %d", ErrInvalidArgument, limit)
	}
	return nil
}
