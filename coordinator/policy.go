package coordinator

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tms-dev/tms/chain"
)

// This file validates policies before package store keeps them: the
// Gravitino-shaped document {name, comment, policyType, enabled, content}
// and its content. Every error is a *PolicyError naming the field by its
// path in the document ("policyType", "content.schedule.crontab", …) and
// wraps chain.ErrInvalidPolicy.
//
// Content, beside the type's thresholds and rewriteOptions (checked by
// chain.ValidatePolicy):
//
//	schedule       {onCommit bool, crontab string, timezone string}: at least
//	               one trigger; crontab is five fields (or six, seconds
//	               first) or a descriptor (@hourly, @every 30s), evaluated
//	               in timezone (IANA name, default UTC); onCommit is refused
//	               for orphan-cleanup, which only runs on a crontab.
//	minIntervalMs  the cooldown after a run of the (table, policy), >= 0;
//	               0 disables it, absent means the coordinator's
//	               task.<type>.minIntervalMs or DefaultMinInterval.
//	jobOptions     non-sensitive job and catalog client properties, string,
//	               number or boolean values.
//
// Credentials never live in a policy: a key of jobOptions or rewriteOptions
// that looks like one (see credentialWords) is refused, and so is a
// jobOptions value that is a URL with a password in it. They belong in the
// coordinator's gravitinoAuth.* / ircAuth.* configuration.

// PolicyError is a policy validation error: the field, as a path into the
// policy document, and what is wrong with it.
type PolicyError struct {
	// Field is the path of the offending field, e.g. "content.schedule.crontab".
	Field string
	// Msg says what is wrong, without repeating the field.
	Msg string
}

// Error returns "field: msg".
func (e *PolicyError) Error() string { return e.Field + ": " + e.Msg }

// Unwrap returns chain.ErrInvalidPolicy, so every policy error, here or in
// chain, is found with one errors.Is.
func (e *PolicyError) Unwrap() error { return chain.ErrInvalidPolicy }

func policyErr(field, format string, args ...any) error {
	return &PolicyError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// policyTypes maps Gravitino's policy types to maintenance types, in chain
// order (see DESIGN.md, Policies).
var policyTypes = []struct {
	name string
	typ  chain.Type
}{
	{"system_iceberg_compaction", chain.Compaction},
	{"system_iceberg_rewrite_manifests", chain.ManifestRewrite},
	{"system_iceberg_snapshot_expiration", chain.SnapshotExpiry},
	{"system_iceberg_orphan_file_removal", chain.OrphanCleanup},
}

// ParsePolicyType accepts a Gravitino policy type (system_iceberg_compaction)
// or a maintenance type name (compaction), case-insensitively, and returns
// both. An unknown name is a *PolicyError on field policyType listing the
// valid ones.
func ParsePolicyType(s string) (policyType string, t chain.Type, err error) {
	want := strings.ToLower(strings.TrimSpace(s))
	for _, pt := range policyTypes {
		if want == pt.name || want == string(pt.typ) {
			return pt.name, pt.typ, nil
		}
	}
	valid := make([]string, len(policyTypes))
	for i, pt := range policyTypes {
		valid[i] = fmt.Sprintf("%s (%s)", pt.name, pt.typ)
	}
	return "", "", policyErr("policyType", "unknown policy type %q; want one of %s", s, strings.Join(valid, ", "))
}

// PolicyTypeOf returns the Gravitino policy type of maintenance type t, or
// "" for an unknown t.
func PolicyTypeOf(t chain.Type) string {
	for _, pt := range policyTypes {
		if pt.typ == t {
			return pt.name
		}
	}
	return ""
}

// MaintenanceTypeOf returns the maintenance type of a Gravitino policy type
// exactly as stored (no aliases), and false for an unknown one.
func MaintenanceTypeOf(policyType string) (chain.Type, bool) {
	for _, pt := range policyTypes {
		if pt.name == policyType {
			return pt.typ, true
		}
	}
	return "", false
}

// DefaultMinInterval is the cooldown of a type when neither the policy's
// minIntervalMs nor the coordinator configuration sets one: a day for
// orphan-cleanup, an hour for the others.
func DefaultMinInterval(t chain.Type) time.Duration {
	if t == chain.OrphanCleanup {
		return 24 * time.Hour
	}
	return time.Hour
}

// PolicySpec is a policy document in Gravitino's shape, as the CLI and the
// HTTP API take it.
type PolicySpec struct {
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
	// Content is the policy's content, a JSON object (see the file comment).
	Content json.RawMessage `json:"content"`
}

// DecodePolicy reads one policy document, refusing unknown fields and
// trailing data, validates it and returns it with PolicyType normalised to
// Gravitino's name and Enabled set.
func DecodePolicy(r io.Reader) (PolicySpec, PolicyContent, error) {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	var spec PolicySpec
	if err := dec.Decode(&spec); err != nil {
		return PolicySpec{}, PolicyContent{}, jsonFieldError("", err)
	}
	if dec.More() {
		return PolicySpec{}, PolicyContent{}, policyErr("policy", "trailing data after the JSON object")
	}
	c, err := spec.Validate()
	if err != nil {
		return PolicySpec{}, PolicyContent{}, err
	}
	return spec, c, nil
}

// Validate checks every field of the document and the content for its
// type. It normalises p.PolicyType and defaults p.Enabled to true.
func (p *PolicySpec) Validate() (PolicyContent, error) {
	if err := ValidatePolicyName(p.Name); err != nil {
		return PolicyContent{}, err
	}
	name, t, err := ParsePolicyType(p.PolicyType)
	if err != nil {
		return PolicyContent{}, err
	}
	p.PolicyType = name
	if p.Enabled == nil {
		on := true
		p.Enabled = &on
	}
	return ParsePolicyContent(t, p.Content)
}

var policyNameRE = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)

// ValidatePolicyName checks a policy name (see PolicySpec.Name).
func ValidatePolicyName(name string) error {
	switch {
	case name == "":
		return policyErr("name", "required")
	case !policyNameRE.MatchString(name):
		return policyErr("name", "%q: use at most 128 letters, digits, '_', '-' and '.', not starting with '-' or '.'", name)
	}
	return nil
}

// PolicySchedule is the parsed content.schedule.
type PolicySchedule struct {
	// OnCommit runs the type after commits to the table.
	OnCommit bool
	// Crontab is the crontab as written; empty for none.
	Crontab string
	// Timezone is the IANA zone the crontab is read in; empty means UTC.
	Timezone string
	// Cron is the parsed crontab, nil when Crontab is empty.
	Cron Schedule
}

// PolicyContent is a validated policy content, the parts the coordinator
// acts on. The thresholds stay in the raw content for the runner.
type PolicyContent struct {
	// Type is the maintenance type the content was validated for.
	Type     chain.Type
	Schedule PolicySchedule
	// MinInterval is minIntervalMs; nil when the content leaves it out (the
	// coordinator's configuration or DefaultMinInterval applies). Zero
	// disables the cooldown.
	MinInterval *time.Duration
	// JobOptions are the job's properties, values as text. Never nil.
	JobOptions map[string]string
}

// ParsePolicyContent validates the content of a policy of maintenance type
// t: it must be a JSON object with a schedule, and every field must be
// valid (see the file comment); thresholds and rewriteOptions are checked
// by chain.ValidatePolicy. Errors are *PolicyError with fields under
// "content.".
func ParsePolicyContent(t chain.Type, content json.RawMessage) (PolicyContent, error) {
	if PolicyTypeOf(t) == "" {
		_, _, err := ParsePolicyType(string(t))
		return PolicyContent{}, err
	}
	trimmed := bytes.TrimSpace(content)
	if len(trimmed) == 0 || string(trimmed) == "null" {
		return PolicyContent{}, policyErr("content", "required: a JSON object with at least a schedule")
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(trimmed, &top); err != nil || trimmed[0] != '{' {
		return PolicyContent{}, policyErr("content", "must be a JSON object")
	}
	c := PolicyContent{Type: t, JobOptions: map[string]string{}}
	var err error
	if c.Schedule, err = parseSchedule(t, top["schedule"]); err != nil {
		return PolicyContent{}, err
	}
	if raw, ok := top["minIntervalMs"]; ok {
		d, err := parseMinInterval(raw)
		if err != nil {
			return PolicyContent{}, err
		}
		c.MinInterval = &d
	}
	if c.JobOptions, err = parseJobOptions(top["jobOptions"]); err != nil {
		return PolicyContent{}, err
	}
	if raw, ok := top["rewriteOptions"]; ok {
		if err := checkCredentialKeys("content.rewriteOptions", raw); err != nil {
			return PolicyContent{}, err
		}
	}
	if err := chain.ValidatePolicy(t, trimmed); err != nil {
		return PolicyContent{}, fromChainError(err)
	}
	return c, nil
}

func parseSchedule(t chain.Type, raw json.RawMessage) (PolicySchedule, error) {
	const field = "content.schedule"
	if len(raw) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return PolicySchedule{}, policyErr(field, "required: set onCommit: true or a crontab, or the policy never runs")
	}
	var doc struct {
		OnCommit *bool  `json:"onCommit"`
		Crontab  string `json:"crontab"`
		Timezone string `json:"timezone"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		return PolicySchedule{}, jsonFieldError(field, err)
	}
	s := PolicySchedule{OnCommit: doc.OnCommit != nil && *doc.OnCommit, Crontab: strings.TrimSpace(doc.Crontab), Timezone: strings.TrimSpace(doc.Timezone)}
	if s.OnCommit && t == chain.OrphanCleanup {
		return PolicySchedule{}, policyErr(field+".onCommit", "not allowed for %s (%s), which runs on a crontab only", PolicyTypeOf(t), t)
	}
	if s.Timezone != "" {
		if _, err := time.LoadLocation(s.Timezone); err != nil || strings.EqualFold(s.Timezone, "local") {
			return PolicySchedule{}, policyErr(field+".timezone", "unknown time zone %q; want an IANA name such as UTC or Europe/Berlin", s.Timezone)
		}
	}
	if s.Crontab != "" {
		cron, err := ParseCron(s.Crontab, s.Timezone)
		if err != nil {
			return PolicySchedule{}, policyErr(field+".crontab", "%v; want five fields (minute hour day-of-month month day-of-week), six with seconds first, or a descriptor such as @hourly or @every 30s", err)
		}
		s.Cron = cron
	}
	if !s.OnCommit && s.Crontab == "" {
		if t == chain.OrphanCleanup {
			return PolicySchedule{}, policyErr(field+".crontab", "required for %s", t)
		}
		return PolicySchedule{}, policyErr(field, "no trigger: set onCommit: true or a crontab, or the policy never runs")
	}
	return s, nil
}

// maxMinIntervalMs keeps minIntervalMs within a time.Duration.
const maxMinIntervalMs = math.MaxInt64 / int64(time.Millisecond)

func parseMinInterval(raw json.RawMessage) (time.Duration, error) {
	const field = "content.minIntervalMs"
	text := strings.TrimSpace(string(raw))
	var s string
	if json.Unmarshal(raw, &s) == nil { // "3600000" as Gravitino writes numbers in options
		text = strings.TrimSpace(s)
	}
	ms, err := strconv.ParseInt(text, 10, 64)
	if err != nil {
		f, ferr := strconv.ParseFloat(text, 64)
		if ferr != nil || f != math.Trunc(f) || math.Abs(f) > float64(maxMinIntervalMs) {
			return 0, policyErr(field, "want a whole number of milliseconds >= 0 (0 disables the cooldown), got %s", raw)
		}
		ms = int64(f)
	}
	switch {
	case ms < 0:
		return 0, policyErr(field, "must be >= 0 (0 disables the cooldown), got %d", ms)
	case ms > maxMinIntervalMs:
		return 0, policyErr(field, "too large: %d ms", ms)
	}
	return time.Duration(ms) * time.Millisecond, nil
}

func parseJobOptions(raw json.RawMessage) (map[string]string, error) {
	const field = "content.jobOptions"
	opts := map[string]string{}
	if len(raw) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return opts, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, policyErr(field, "must be a JSON object of string, number or boolean values")
	}
	if err := checkCredentialKeys(field, raw); err != nil {
		return nil, err
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		v, ok := scalarText(m[k])
		if !ok {
			return nil, policyErr(field+"."+k, "want a string, number or boolean")
		}
		if u, err := url.Parse(v); err == nil && u.User != nil {
			if _, hasPassword := u.User.Password(); hasPassword {
				return nil, policyErr(field+"."+k, "is a URL with a password; credentials come from the coordinator configuration (gravitinoAuth.*, ircAuth.*), not from policies")
			}
		}
		opts[k] = v
	}
	return opts, nil
}

// scalarText returns the text of a JSON string, number or boolean.
func scalarText(raw json.RawMessage) (string, bool) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, true
	}
	var n json.Number
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if dec.Decode(&n) == nil {
		return n.String(), true
	}
	var b bool
	if json.Unmarshal(raw, &b) == nil {
		return strconv.FormatBool(b), true
	}
	return "", false
}

// credentialWords are the parts of an option key that mark it as a
// credential. Keys are compared lower-cased with '-', '_', '.' and spaces
// removed, so access-key, access_key, accessKey and ACCESS.KEY all match
// "accesskey". Matching parts of words on purpose: s3.secret-access-key,
// adls.sas-token.x, client-secret and oauth2 token endpoints' "token"
// settings are all refused; such settings belong in the coordinator's
// configuration.
var credentialWords = []string{
	"password", "passwd", "passphrase", "secret", "token", "credential", "keytab",
	"accesskey", "secretkey", "privatekey", "apikey", "sessionkey", "signingkey",
}

// credentialWord returns the credential word key contains, or "".
func credentialWord(key string) string {
	norm := strings.Map(func(r rune) rune {
		switch r {
		case '-', '_', '.', ' ':
			return -1
		}
		return r
	}, strings.ToLower(key))
	for _, w := range credentialWords {
		if strings.Contains(norm, w) {
			return w
		}
	}
	return ""
}

// checkCredentialKeys refuses credential-shaped keys in the JSON object raw
// (jobOptions or rewriteOptions), naming the first by sorted key. A raw
// that is not an object is left to the caller's own check.
func checkCredentialKeys(field string, raw json.RawMessage) error {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return nil
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if w := credentialWord(k); w != "" {
			return policyErr(field+"."+k, "looks like a credential (%q); policies must not hold credentials: configure them in the coordinator (gravitinoAuth.*, ircAuth.*)", w)
		}
	}
	return nil
}

// fromChainError turns chain.ValidatePolicy's "invalid policy: field: msg"
// into a *PolicyError on content.field.
func fromChainError(err error) error {
	msg := strings.TrimPrefix(err.Error(), chain.ErrInvalidPolicy.Error()+": ")
	field, rest, ok := strings.Cut(msg, ": ")
	if !ok || field == "" || strings.ContainsAny(field, " \t") {
		return &PolicyError{Field: "content", Msg: msg}
	}
	return &PolicyError{Field: "content." + field, Msg: rest}
}

// jsonFieldError names the field of a JSON decoding error under prefix.
func jsonFieldError(prefix string, err error) error {
	join := func(f string) string {
		switch {
		case prefix == "" && f == "":
			return "policy"
		case prefix == "":
			return f
		case f == "":
			return prefix
		}
		return prefix + "." + f
	}
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) && typeErr.Field == "" {
		return policyErr(join(""), "want a JSON object, got a JSON %s", typeErr.Value)
	}
	if errors.As(err, &typeErr) {
		return policyErr(join(typeErr.Field), "want %s, got a JSON %s", typeErr.Type, typeErr.Value)
	}
	if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		name, _ := strconv.Unquote(f)
		return policyErr(join(name), "unknown field")
	}
	return policyErr(join(""), "not valid JSON: %v", err)
}
