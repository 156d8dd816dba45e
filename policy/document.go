package policy

import (
	"encoding/json"
	"io"
	"regexp"
)

// Document is a policy document in Gravitino's shape, as the CLI and the
// HTTP API take it: {name, comment, policyType, enabled, content}.
type Document struct {
	// Name identifies the policy: letters, digits, '_', '-' and '.', not
	// starting with '-' or '.', at most 128 characters.
	Name string `json:"name"`
	// Comment is free text.
	Comment string `json:"comment,omitempty"`
	// PolicyType is Gravitino's type name (see ParsePolicyType; the
	// maintenance type name is accepted too and normalised).
	PolicyType string `json:"policyType"`
	// Enabled defaults to true when the document leaves it out.
	Enabled *bool `json:"enabled,omitempty"`
	// Content is the policy's content, a JSON object (see ParseContent).
	Content json.RawMessage `json:"content"`
}

// Decode reads one policy document, refusing unknown fields and trailing
// data, validates it and returns it with PolicyType normalised to
// Gravitino's name and Enabled set.
func Decode(r io.Reader) (Document, Content, error) {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	var doc Document
	if err := dec.Decode(&doc); err != nil {
		return Document{}, Content{}, jsonFieldError("", err)
	}
	if dec.More() {
		return Document{}, Content{}, errf("policy", "trailing data after the JSON object")
	}
	c, err := doc.Validate()
	if err != nil {
		return Document{}, Content{}, err
	}
	return doc, c, nil
}

// Validate checks every field of the document and the content for its
// type. It normalises d.PolicyType and defaults d.Enabled to true.
func (d *Document) Validate() (Content, error) {
	if err := ValidateName(d.Name); err != nil {
		return Content{}, err
	}
	name, t, err := ParsePolicyType(d.PolicyType)
	if err != nil {
		return Content{}, err
	}
	d.PolicyType = name
	if d.Enabled == nil {
		on := true
		d.Enabled = &on
	}
	return ParseContent(t, d.Content)
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)

// ValidateName checks a policy name (see Document.Name).
func ValidateName(name string) error {
	switch {
	case name == "":
		return errf("name", "required")
	case !nameRE.MatchString(name):
		return errf("name", "%q: use at most 128 letters, digits, '_', '-' and '.', not starting with '-' or '.'", name)
	}
	return nil
}
