package runner

import (
	"encoding/json"

	"github.com/tms-dev/tms/jobspec"
	"github.com/tms-dev/tms/policy"
)

// The job spec is the contract between the coordinator and the runner; it
// lives in package jobspec, which both import. These names keep the
// runner's API.
type (
	// Spec is jobspec.Spec.
	Spec = jobspec.Spec
	// CatalogSpec is jobspec.CatalogSpec.
	CatalogSpec = jobspec.CatalogSpec
	// StepSpec is jobspec.StepSpec.
	StepSpec = jobspec.StepSpec
)

// ErrInvalidSpec is jobspec.ErrInvalidSpec.
var ErrInvalidSpec = jobspec.ErrInvalidSpec

// ParseSpec decodes and validates a job spec (jobspec.Parse).
func ParseSpec(raw json.RawMessage) (Spec, error) { return jobspec.Parse(raw) }

// IsCredentialKey is policy.IsCredentialKey.
func IsCredentialKey(key string) bool { return policy.IsCredentialKey(key) }

func joinTypes(ts []policy.Type) string { return policy.JoinTypes(ts) }
