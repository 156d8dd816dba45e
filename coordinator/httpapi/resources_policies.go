package httpapi

import (
	"encoding/json"
	"net/http"

	"github.com/tms-dev/tms/coordinator/admin"
	"github.com/tms-dev/tms/policy"
)

// This file is /v1/policies: the routes of `tms-coordinator policy …`
// over admin.PolicyOps.

// objectNames are the JSON fields and query parameters ParseObject's
// errors name.
var objectNames = admin.ObjectNames{Object: "object", Level: "level"}

// policyFields are policy.Document's JSON fields, for unknown-field messages.
const policyFields = "name, comment, policyType, enabled, content"

// policyList is GET /v1/policies.
type policyList struct {
	Policies []admin.PolicyDoc `json:"policies"`
}

func (rs *resources) listPolicies(w http.ResponseWriter, r *http.Request) {
	if _, err := query(r); err != nil {
		rs.fail(w, r, err)
		return
	}
	list, err := rs.ops.List(r.Context())
	if err != nil {
		rs.fail(w, r, err)
		return
	}
	jsonOK(w, policyList{Policies: list})
}

// createPolicy is POST /v1/policies with a Gravitino-shaped policy.
func (rs *resources) createPolicy(w http.ResponseWriter, r *http.Request) {
	var spec policy.Document
	if err := decodeBody(w, r, &spec, policyFields); err != nil {
		rs.fail(w, r, err)
		return
	}
	p, err := rs.ops.Create(r.Context(), spec)
	if err != nil {
		rs.fail(w, r, err)
		return
	}
	w.Header().Set("Location", "/v1/policies/"+p.Name)
	writeJSON(w, http.StatusCreated, admin.PolicyDocOf(p, nil))
}

func (rs *resources) getPolicy(w http.ResponseWriter, r *http.Request) {
	if _, err := query(r); err != nil {
		rs.fail(w, r, err)
		return
	}
	d, err := rs.ops.Show(r.Context(), r.PathValue("name"))
	if err != nil {
		rs.fail(w, r, err)
		return
	}
	jsonOK(w, d)
}

// policyUpdate is the body of PUT /v1/policies/{name}. A client may send
// back the document it read: name and policyType must then be the
// policy's own (neither can change), enabled is applied.
type policyUpdate struct {
	Name       *string         `json:"name"`
	PolicyType *string         `json:"policyType"`
	Comment    *string         `json:"comment"`
	Enabled    *bool           `json:"enabled"`
	Content    json.RawMessage `json:"content"`
}

// alterPolicy is PUT /v1/policies/{name}: new content is a new version.
func (rs *resources) alterPolicy(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	var u policyUpdate
	if err := decodeBody(w, r, &u, policyFields); err != nil {
		rs.fail(w, r, err)
		return
	}
	if err := policy.ValidateName(name); err != nil {
		rs.fail(w, r, err)
		return
	}
	if u.Name != nil && *u.Name != name {
		rs.fail(w, r, badRequest("name: %q differs from the policy in the path (%q); a policy cannot be renamed", *u.Name, name))
		return
	}
	ctx := r.Context()
	if u.PolicyType != nil {
		cur, err := rs.ops.Show(ctx, name)
		if err != nil {
			rs.fail(w, r, err)
			return
		}
		if pt, _, err := policy.ParsePolicyType(*u.PolicyType); err != nil || pt != cur.PolicyType {
			rs.fail(w, r, badRequest("policyType: %q is not the policy's type %s; a policy's type cannot change, create a new policy", *u.PolicyType, cur.PolicyType))
			return
		}
	}
	if string(u.Content) == "null" {
		u.Content = nil
	}
	if u.Content == nil && u.Comment == nil && u.Enabled == nil {
		rs.fail(w, r, badRequest("nothing to alter: give content, comment, enabled or several"))
		return
	}
	if u.Content != nil || u.Comment != nil {
		if _, err := rs.ops.Alter(ctx, name, admin.PolicyAlter{Content: u.Content, Comment: u.Comment}); err != nil {
			rs.fail(w, r, err)
			return
		}
	}
	if u.Enabled != nil {
		if _, _, err := rs.ops.SetEnabled(ctx, name, *u.Enabled); err != nil {
			rs.fail(w, r, err)
			return
		}
	}
	d, err := rs.ops.Show(ctx, name)
	if err != nil {
		rs.fail(w, r, err)
		return
	}
	jsonOK(w, d)
}

func (rs *resources) deletePolicy(w http.ResponseWriter, r *http.Request) {
	if _, err := query(r); err != nil {
		rs.fail(w, r, err)
		return
	}
	p, err := rs.ops.Delete(r.Context(), r.PathValue("name"))
	if err != nil {
		rs.fail(w, r, err)
		return
	}
	jsonOK(w, admin.PolicyDocOf(p, nil))
}

// enabledResult answers enable and disable: the policy, and whether this
// call changed it.
type enabledResult struct {
	Policy  admin.PolicyDoc `json:"policy"`
	Changed bool            `json:"changed"`
}

func (rs *resources) setEnabled(enabled bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if _, err := query(r); err != nil {
			rs.fail(w, r, err)
			return
		}
		p, changed, err := rs.ops.SetEnabled(r.Context(), r.PathValue("name"), enabled)
		if err != nil {
			rs.fail(w, r, err)
			return
		}
		jsonOK(w, enabledResult{Policy: admin.PolicyDocOf(p, nil), Changed: changed})
	}
}

// attachment is the body of POST /v1/policies/{name}/attachments.
type attachment struct {
	// Object is CATALOG[.NAMESPACE[.TABLE]].
	Object string `json:"object"`
	// Level is catalog, namespace or table; empty: from the segment count.
	Level string `json:"level"`
}

// attach answers 201 with the attachment, or 200 if it already existed.
func (rs *resources) attach(w http.ResponseWriter, r *http.Request) {
	var body attachment
	if err := decodeBody(w, r, &body, "object, level"); err != nil {
		rs.fail(w, r, err)
		return
	}
	obj, err := admin.ParseObject(body.Object, body.Level, objectNames)
	if err != nil {
		rs.fail(w, r, err)
		return
	}
	a, created, err := rs.ops.Attach(r.Context(), r.PathValue("name"), obj)
	if err != nil {
		rs.fail(w, r, err)
		return
	}
	code := http.StatusOK
	if created {
		code = http.StatusCreated
	}
	writeJSON(w, code, admin.AttachmentDocOf(a))
}

// detach is DELETE /v1/policies/{name}/attachments/{object}[?level=…].
func (rs *resources) detach(w http.ResponseWriter, r *http.Request) {
	q, err := query(r, "level")
	if err != nil {
		rs.fail(w, r, err)
		return
	}
	obj, err := admin.ParseObject(r.PathValue("object"), q.Get("level"), objectNames)
	if err != nil {
		rs.fail(w, r, err)
		return
	}
	a, err := rs.ops.Detach(r.Context(), r.PathValue("name"), obj)
	if err != nil {
		rs.fail(w, r, err)
		return
	}
	jsonOK(w, admin.AttachmentDocOf(a))
}

// effectivePolicies is GET /v1/tables/{table}/effective-policies, table
// being CATALOG.NAMESPACE.TABLE (registered or not).
func (rs *resources) effectivePolicies(w http.ResponseWriter, r *http.Request) {
	if _, err := query(r); err != nil {
		rs.fail(w, r, err)
		return
	}
	table, err := admin.ParseTableName(r.PathValue("table"), "table")
	if err != nil {
		rs.fail(w, r, err)
		return
	}
	doc, err := rs.ops.Effective(r.Context(), table)
	if err != nil {
		rs.fail(w, r, err)
		return
	}
	jsonOK(w, doc)
}
