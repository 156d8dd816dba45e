// Package jobspec is the contract between the control plane and the job: the
// job spec a coordinator writes into a ledger row and tms-runner reads, and
// the environment prefix that carries catalog credentials to a job. It
// applies package policy's one rule for credential-shaped keys to the whole
// spec. The coordinator and the runner both import it; it imports neither,
// nor the chain that runs the steps.
package jobspec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/tms-dev/tms/catalogs"
	"github.com/tms-dev/tms/internal/invalid"
	"github.com/tms-dev/tms/policy"
)

// ErrInvalidSpec is wrapped by every error about a job spec: malformed JSON,
// an unknown or missing field, a bad policy value, a credential-shaped key.
// The message names the field.
var ErrInvalidSpec = invalid.New("invalid job spec")

// Spec is the job spec stored (as JSON) in the spec column of a job row. It
// says everything the runner needs except credentials:
//
//	{
//	  "catalog": {"name": "prod", "properties": {"type": "rest", "uri": "https://…"}},
//	  "table": "sales.orders",
//	  "steps": [{"type": "compaction", "policy": {"minDataFileMse": 1000}},
//	            {"type": "snapshot-expiry", "policy": {"retain-last": 5}}],
//	  "dry-run": false
//	}
//
// The catalog is either name + properties (iceberg-go catalog properties,
// "type" picks the implementation) or {"warehouse-dir": DIR} for a local
// testdata-style catalog. Unknown fields are errors, so a typo is reported
// rather than ignored.
type Spec struct {
	// Catalog says how to reach the catalog.
	Catalog CatalogSpec `json:"catalog"`
	// Table is NAMESPACE.TABLE (nested namespaces joined with ".").
	Table string `json:"table"`
	// Steps are the maintenance types in chain order, each with its policy
	// content (Gravitino's "content" object; omitted means the defaults).
	Steps []StepSpec `json:"steps"`
	// DryRun decides and plans but commits and deletes nothing.
	DryRun bool `json:"dry-run,omitempty"`
}

// CatalogSpec is the catalog part of a Spec: exactly one of WarehouseDir and
// Properties.
type CatalogSpec struct {
	// Name is the catalog name; defaults to "default". Also the catalog name
	// the ledger's maintained_table row carries.
	Name string `json:"name,omitempty"`
	// Properties are non-secret iceberg-go catalog properties. Credentials
	// are overlaid at run time (see Options.CatalogProps) and a
	// credential-shaped key here makes the spec invalid.
	Properties map[string]string `json:"properties,omitempty"`
	// WarehouseDir is a local testdata-style catalog folder (catalog.db and
	// warehouse/), as `tms-runner testdata` builds.
	WarehouseDir string `json:"warehouse-dir,omitempty"`
}

// StepSpec is one maintenance type of a Spec.
type StepSpec struct {
	// Type is the maintenance type, e.g. "compaction".
	Type policy.Type `json:"type"`
	// Policy is the policy content for Type; nil means the defaults.
	Policy json.RawMessage `json:"policy,omitempty"`
}

// Parse decodes and validates a job spec. Errors wrap ErrInvalidSpec.
func Parse(raw json.RawMessage) (Spec, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return Spec{}, fmt.Errorf("%w: the job row has no spec", ErrInvalidSpec)
	}
	// Credential-shaped keys are looked for in the raw JSON first, so that
	// one hiding under an unknown field is named too.
	var tree any
	if err := json.Unmarshal(raw, &tree); err != nil {
		return Spec{}, fmt.Errorf("%w: %v", ErrInvalidSpec, err)
	}
	if path := credentialPath(tree, ""); path != "" {
		return Spec{}, fmt.Errorf("%w: %s: credential-shaped key; credentials come from TMS_CATALOG_PROP_* or --catalog-props-file, never from the spec", ErrInvalidSpec, path)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var s Spec
	if err := dec.Decode(&s); err != nil {
		return Spec{}, fmt.Errorf("%w: %v", ErrInvalidSpec, err)
	}
	return s, s.Validate()
}

// Validate checks the spec without touching any catalog: one catalog form,
// a table name, steps of known types in chain order without duplicates, each
// policy valid for its type (policy.ValidateOptions), and no credential-shaped
// catalog property. Errors wrap ErrInvalidSpec and name the field.
func (s Spec) Validate() error {
	c := s.Catalog
	switch {
	case c.WarehouseDir != "" && (len(c.Properties) > 0 || c.Name != ""):
		return fmt.Errorf("%w: catalog: give either warehouse-dir or name/properties, not both", ErrInvalidSpec)
	case c.WarehouseDir == "" && len(c.Properties) == 0:
		return fmt.Errorf("%w: catalog: needs warehouse-dir or properties", ErrInvalidSpec)
	}
	for _, k := range sortedKeys(c.Properties) {
		if policy.IsCredentialKey(k) {
			return fmt.Errorf("%w: catalog.properties.%s: credential-shaped key; credentials come from TMS_CATALOG_PROP_* or --catalog-props-file, never from the spec", ErrInvalidSpec, k)
		}
	}
	if _, err := catalogs.ParseIdent(s.Table); err != nil {
		return fmt.Errorf("%w: table: %v", ErrInvalidSpec, err)
	}
	if len(s.Steps) == 0 {
		return fmt.Errorf("%w: steps: at least one maintenance type is needed", ErrInvalidSpec)
	}
	names := make([]string, len(s.Steps))
	for i, st := range s.Steps {
		names[i] = string(st.Type)
		if st.Type == "" {
			return fmt.Errorf("%w: steps[%d].type: missing", ErrInvalidSpec, i)
		}
	}
	ordered, err := policy.ParseTypes(strings.Join(names, ","))
	if err != nil {
		return fmt.Errorf("%w: steps: %v", ErrInvalidSpec, err)
	}
	if !slices.Equal(ordered, s.ChainTypes()) {
		return fmt.Errorf("%w: steps: types %s must be in chain order without duplicates (%s)",
			ErrInvalidSpec, strings.Join(names, ","), policy.JoinTypes(ordered))
	}
	for i, st := range s.Steps {
		if err := policy.ValidateOptions(st.Type, st.Policy); err != nil {
			return &PolicyError{Type: st.Type, Err: fmt.Errorf("%w: steps[%d].policy (%s): %v: %v", ErrInvalidSpec, i, st.Type, policy.ErrInvalid, err)}
		}
	}
	return nil
}

// PolicyError is a spec error caused by one step's policy content, so the
// job's outcomes can blame that type alone.
type PolicyError struct {
	// Type is the step whose policy is invalid.
	Type policy.Type
	// Err wraps ErrInvalidSpec and names the step.
	Err error
}

func (e *PolicyError) Error() string { return e.Err.Error() }
func (e *PolicyError) Unwrap() error { return e.Err }

// EnvPropPrefix is the prefix of environment variables whose value is
// overlaid onto the job's catalog properties: TMS_CATALOG_PROP_<KEY>=VALUE
// sets property KEY, spelled exactly as iceberg-go spells it (case and all):
// TMS_CATALOG_PROP_credential, TMS_CATALOG_PROP_token,
// TMS_CATALOG_PROP_s3.secret-access-key. POSIX shells cannot export names
// with '.' or '-', but env(1), Kubernetes and job templates can; otherwise
// use a props file.
const EnvPropPrefix = "TMS_CATALOG_PROP_"

// ChainTypes returns the step types in spec order.
func (s Spec) ChainTypes() []policy.Type {
	ts := make([]policy.Type, len(s.Steps))
	for i, st := range s.Steps {
		ts[i] = st.Type
	}
	return ts
}

// credentialPath returns the dotted path of the first credential-shaped
// object key in v (depth first, keys in sorted order), or "".
func credentialPath(v any, prefix string) string {
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			path := k
			if prefix != "" {
				path = prefix + "." + k
			}
			if policy.IsCredentialKey(k) {
				return path
			}
			if p := credentialPath(v[k], path); p != "" {
				return p
			}
		}
	case []any:
		for i, e := range v {
			if p := credentialPath(e, fmt.Sprintf("%s[%d]", prefix, i)); p != "" {
				return p
			}
		}
	}
	return ""
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
