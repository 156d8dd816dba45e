package admin

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tms-dev/tms/coordinator/flow"
	"github.com/tms-dev/tms/internal/invalid"
	"github.com/tms-dev/tms/policy"
	"github.com/tms-dev/tms/store"
)

// This file holds the policy operations that `tms-coordinator policy …` and
// the HTTP API both offer: create, alter, enable, disable, delete, attach,
// detach, list, show and effective. Both front ends call these, so they
// validate the same way, say the same things and keep the policy's
// policy-expand row in step the same way (SyncPolicyTask right after each
// change, instead of waiting for serve's periodic sync).
//
// Errors: validation errors are *policy.Error (content, name, type) or
// *InputError (object names); the store's answers wrap store.ErrNotFound
// (unknown policy, not attached), store.ErrConflict (name taken, another
// policy of the type attached) or invalid.ErrArgument. IsInputError
// tells them from failures of the database.

// PolicyOps runs policy operations on one store.
type PolicyOps struct {
	policies store.Policies
	tasks    store.Scheduler
	now      func() time.Time
	catalogs CatalogSet // nil: catalogs are not checked
}

// CatalogSet says which catalog names are configured: known is false when
// that cannot be told (no coordinator node has said), and nothing is
// checked then.
type CatalogSet func(ctx context.Context) (names []string, known bool, err error)

// CheckCatalogs makes Attach refuse an object of a catalog outside set,
// naming it, and the policy documents mark each attachment with whether
// its catalog is configured (AttachmentDoc.CatalogConfigured).
func (o *PolicyOps) CheckCatalogs(set CatalogSet) { o.catalogs = set }

// LiveNodeCatalogs is the CatalogSet of the coordinator nodes alive now
// (heartbeat younger than deadAfter): the union of the catalogs each one
// said it is configured with. Unknown when no live node said.
func LiveNodeCatalogs(sch store.Scheduler, deadAfter time.Duration, now func() time.Time) CatalogSet {
	return func(ctx context.Context) ([]string, bool, error) {
		nodes, err := sch.ListNodes(ctx)
		if err != nil {
			return nil, false, err
		}
		var names []string
		known := false
		for _, n := range nodes {
			if n.Catalogs == nil || now().Sub(n.LastHeartbeat) > deadAfter {
				continue
			}
			known = true
			names = append(names, n.Catalogs...)
		}
		slices.Sort(names)
		return slices.Compact(names), known, nil
	}
}

// markCatalogs sets CatalogConfigured on the attachments of docs.
func (o *PolicyOps) markCatalogs(ctx context.Context, docs []PolicyDoc) error {
	if o.catalogs == nil {
		return nil
	}
	names, known, err := o.catalogs(ctx)
	if err != nil || !known {
		return err
	}
	for i := range docs {
		for j := range docs[i].Attachments {
			a := &docs[i].Attachments[j]
			cat, _, _ := strings.Cut(a.Object, ".")
			ok := slices.Contains(names, cat)
			a.CatalogConfigured = &ok
		}
	}
	return nil
}

// NewPolicyOps returns the policy operations of st. now stamps the
// policy-expand rows' next instants; nil means time.Now.
func NewPolicyOps(st store.Store, now func() time.Time) (*PolicyOps, error) {
	if now == nil {
		now = time.Now
	}
	return &PolicyOps{policies: st, tasks: st, now: now}, nil
}

// IsInputError reports whether err is the caller's fault: bad input
// (*policy.Error, *InputError, invalid.ErrArgument), an unknown name
// (store.ErrNotFound) or a conflict (store.ErrConflict).
func IsInputError(err error) bool {
	var ie *InputError
	return errors.As(err, &ie) || errors.Is(err, policy.ErrInvalid) || errors.Is(err, store.ErrNotFound) ||
		errors.Is(err, store.ErrConflict) || errors.Is(err, invalid.ErrArgument)
}

// syncExpand brings the policy's policy-expand row in step with it at once
// (a running serve's sync would within a minute).
func (o *PolicyOps) syncExpand(ctx context.Context, p store.Policy) error {
	if err := flow.SyncPolicyTask(ctx, o.tasks, p, o.now()); err != nil {
		return fmt.Errorf("policy %q saved, but its schedule row was not updated (serve's sync will retry): %w", p.Name, err)
	}
	return nil
}

// Create validates spec (see policy.Document.Validate), stores it as version 1
// and creates its policy-expand row if it runs on a crontab.
func (o *PolicyOps) Create(ctx context.Context, spec policy.Document) (store.Policy, error) {
	if _, err := spec.Validate(); err != nil {
		return store.Policy{}, err
	}
	p, err := o.policies.CreatePolicy(ctx, store.NewPolicy{
		Name: spec.Name, Comment: spec.Comment, Type: spec.PolicyType, Enabled: *spec.Enabled, Content: CompactJSON(spec.Content),
	})
	if err != nil {
		return store.Policy{}, err
	}
	return p, o.syncExpand(ctx, p)
}

// PolicyAlter is what Alter changes; at least one field must be set.
type PolicyAlter struct {
	// Content, when set, is validated for the policy's type and becomes a
	// new version.
	Content json.RawMessage
	// Comment, when not nil, replaces the comment.
	Comment *string
}

// Alter applies a to the live policy called name and moves its
// policy-expand row if the schedule changed. ErrNotFound for an unknown
// name.
func (o *PolicyOps) Alter(ctx context.Context, name string, a PolicyAlter) (store.Policy, error) {
	if err := policy.ValidateName(name); err != nil {
		return store.Policy{}, err
	}
	if a.Content == nil && a.Comment == nil {
		return store.Policy{}, &InputError{Field: "content", Message: "nothing to alter: give a new content, a comment or both"}
	}
	change := store.PolicyChange{Comment: a.Comment}
	if a.Content != nil {
		cur, err := o.policies.GetPolicy(ctx, name)
		if err != nil {
			return store.Policy{}, err
		}
		t, ok := policy.MaintenanceTypeOf(cur.Type)
		if !ok {
			return store.Policy{}, fmt.Errorf("policy %q has type %q, which this binary does not know", cur.Name, cur.Type)
		}
		if _, err := policy.ParseContent(t, a.Content); err != nil {
			return store.Policy{}, err
		}
		change.Content = CompactJSON(a.Content)
	}
	p, err := o.policies.AlterPolicy(ctx, name, change)
	if err != nil {
		return store.Policy{}, err
	}
	return p, o.syncExpand(ctx, p)
}

// SetEnabled enables or disables the live policy called name; changed is
// false when it already was. Its policy-expand row follows.
func (o *PolicyOps) SetEnabled(ctx context.Context, name string, enabled bool) (p store.Policy, changed bool, err error) {
	if err := policy.ValidateName(name); err != nil {
		return store.Policy{}, false, err
	}
	p, changed, err = o.policies.SetPolicyEnabled(ctx, name, enabled)
	if err != nil {
		return store.Policy{}, false, err
	}
	return p, changed, o.syncExpand(ctx, p)
}

// Delete deletes the live policy called name with its attachments and its
// policy-expand row, and returns it as deleted.
func (o *PolicyOps) Delete(ctx context.Context, name string) (store.Policy, error) {
	if err := policy.ValidateName(name); err != nil {
		return store.Policy{}, err
	}
	p, err := o.policies.DeletePolicy(ctx, name)
	if err != nil {
		return store.Policy{}, err
	}
	return p, o.syncExpand(ctx, p)
}

// Attach attaches the live policy called name to obj; created is false
// when it already was attached there.
func (o *PolicyOps) Attach(ctx context.Context, name string, obj store.PolicyObject) (a store.Attachment, created bool, err error) {
	if err := policy.ValidateName(name); err != nil {
		return store.Attachment{}, false, err
	}
	if o.catalogs != nil {
		names, known, err := o.catalogs(ctx)
		if err != nil {
			return store.Attachment{}, false, fmt.Errorf("list the configured catalogs: %w", err)
		}
		if known && !slices.Contains(names, obj.Catalog) {
			return store.Attachment{}, false, inputErr("object", "object %s: catalog %q is not configured on any coordinator (configured: %s)",
				obj, obj.Catalog, cmp.Or(strings.Join(names, ", "), "none"))
		}
	}
	a, created, err = o.policies.Attach(ctx, name, obj)
	if err != nil || !created {
		return a, created, err
	}
	// Serve's sync registers the tables under the new attachment: ask for
	// it now rather than at its next interval (it is a no-op upsert of a
	// due-now row when no node ever ran).
	if _, err := o.tasks.UpsertTask(ctx, store.NewTask{TaskKey: flow.SyncKey, ExecutionTime: o.now()}, o.now()); err != nil {
		return a, created, fmt.Errorf("policy %q attached, but serve's table sync was not woken (it runs within %s anyway): %w", name, flow.DefaultSyncInterval, err)
	}
	return a, created, nil
}

// Detach removes the attachment of the policy called name to obj.
func (o *PolicyOps) Detach(ctx context.Context, name string, obj store.PolicyObject) (store.Attachment, error) {
	if err := policy.ValidateName(name); err != nil {
		return store.Attachment{}, err
	}
	return o.policies.Detach(ctx, name, obj)
}

// List returns every live policy with its attachments, by name.
func (o *PolicyOps) List(ctx context.Context) ([]PolicyDoc, error) {
	list, err := o.policies.ListPolicies(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]PolicyDoc, 0, len(list))
	for _, p := range list {
		as, err := o.policies.ListAttachments(ctx, p.ID)
		if err != nil {
			return nil, err
		}
		out = append(out, PolicyDocOf(p, as))
	}
	return out, o.markCatalogs(ctx, out)
}

// Show returns the live policy called name with its attachments.
func (o *PolicyOps) Show(ctx context.Context, name string) (PolicyDoc, error) {
	if err := policy.ValidateName(name); err != nil {
		return PolicyDoc{}, err
	}
	p, err := o.policies.GetPolicy(ctx, name)
	if err != nil {
		return PolicyDoc{}, err
	}
	as, err := o.policies.ListAttachments(ctx, p.ID)
	if err != nil {
		return PolicyDoc{}, err
	}
	docs := []PolicyDoc{PolicyDocOf(p, as)}
	return docs[0], o.markCatalogs(ctx, docs)
}

// Effective returns the policies in force for table (see
// store.Policies.EffectivePolicies), in chain order.
func (o *PolicyOps) Effective(ctx context.Context, table store.PolicyObject) (EffectiveDoc, error) {
	eps, err := o.policies.EffectivePolicies(ctx, table.Catalog, table.Namespace, table.Table)
	if err != nil {
		return EffectiveDoc{}, err
	}
	doc := EffectiveDoc{Table: table.String(), Policies: []EffectiveRow{}}
	for _, ep := range eps {
		d := PolicyDocOf(ep.Policy, nil)
		doc.Policies = append(doc.Policies, EffectiveRow{
			MaintenanceType: d.MaintenanceType, Policy: d, Via: AttachmentDocOf(ep.Attachment),
		})
	}
	// Chain order reads better than policy type order.
	slices.SortStableFunc(doc.Policies, func(a, b EffectiveRow) int {
		return policy.Rank(policy.Type(a.MaintenanceType)) - policy.Rank(policy.Type(b.MaintenanceType))
	})
	return doc, nil
}

// EffectiveDoc is the policies in force for one table, as the CLI (`show
// --effective --json`) and the HTTP API print them.
type EffectiveDoc struct {
	Table    string         `json:"table"`
	Policies []EffectiveRow `json:"policies"`
}

// EffectiveRow is the policy governing one maintenance type of a table and
// the attachment it reaches the table through.
type EffectiveRow struct {
	MaintenanceType string        `json:"maintenanceType"`
	Policy          PolicyDoc     `json:"policy"`
	Via             AttachmentDoc `json:"via"`
}

// PolicyDoc is a policy as the CLI and the HTTP API print it in JSON:
// Gravitino's fields first, then the store's.
type PolicyDoc struct {
	Name            string          `json:"name"`
	Comment         string          `json:"comment"`
	PolicyType      string          `json:"policyType"`
	Enabled         bool            `json:"enabled"`
	Content         json.RawMessage `json:"content"`
	ID              int64           `json:"id"`
	MaintenanceType string          `json:"maintenanceType"`
	Version         int             `json:"version"`
	CreatedAt       time.Time       `json:"createdAt"`
	UpdatedAt       time.Time       `json:"updatedAt"`
	DeletedAt       *time.Time      `json:"deletedAt,omitempty"`
	Attachments     []AttachmentDoc `json:"attachments,omitempty"`
}

// AttachmentDoc is an attachment in JSON.
type AttachmentDoc struct {
	Policy string `json:"policy"`
	Level  string `json:"level"`
	Object string `json:"object"`
	// CatalogConfigured says whether the object's catalog is configured on
	// a coordinator; absent when that cannot be told. An attachment whose
	// catalog went away maintains nothing.
	CatalogConfigured *bool `json:"catalogConfigured,omitempty"`
}

// PolicyDocOf returns p with its attachments as, for printing.
func PolicyDocOf(p store.Policy, as []store.Attachment) PolicyDoc {
	t, _ := policy.MaintenanceTypeOf(p.Type)
	d := PolicyDoc{
		Name: p.Name, Comment: p.Comment, PolicyType: p.Type, Enabled: p.Enabled, Content: p.Content,
		ID: p.ID, MaintenanceType: string(t), Version: p.Version, CreatedAt: p.CreatedAt, UpdatedAt: p.UpdatedAt,
	}
	if p.Deleted() {
		d.DeletedAt = &p.DeletedAt
	}
	for _, a := range as {
		d.Attachments = append(d.Attachments, AttachmentDocOf(a))
	}
	return d
}

// AttachmentDocOf returns a for printing.
func AttachmentDocOf(a store.Attachment) AttachmentDoc {
	return AttachmentDoc{Policy: a.PolicyName, Level: string(a.Object.Level), Object: a.Object.String()}
}

// CompactJSON drops a validated document's layout; data that does not
// parse is returned as it is.
func CompactJSON(data []byte) json.RawMessage {
	var b bytes.Buffer
	if err := json.Compact(&b, data); err != nil {
		return data
	}
	return b.Bytes()
}

// TriggerSummary describes a stored content's schedule in a few words
// ("on commit, cron 0 3 * * * (Europe/Berlin)"), "-" for none.
func TriggerSummary(content json.RawMessage) string {
	var c struct {
		Schedule struct {
			OnCommit bool   `json:"onCommit"`
			Crontab  string `json:"crontab"`
			Timezone string `json:"timezone"`
		} `json:"schedule"`
	}
	_ = json.Unmarshal(content, &c)
	var parts []string
	if c.Schedule.OnCommit {
		parts = append(parts, "on commit")
	}
	if c.Schedule.Crontab != "" {
		cron := "cron " + c.Schedule.Crontab
		if c.Schedule.Timezone != "" {
			cron += " (" + c.Schedule.Timezone + ")"
		}
		parts = append(parts, cron)
	}
	return cmp.Or(strings.Join(parts, ", "), "-")
}
