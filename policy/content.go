package policy

import (
	"bytes"
	"encoding/json"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Schedule is the parsed content.schedule.
type Schedule struct {
	// OnCommit runs the type after commits to the table.
	OnCommit bool
	// Crontab is the crontab as written; empty for none.
	Crontab string
	// Timezone is the IANA zone the crontab is read in; empty means UTC.
	Timezone string
	// Cron is the parsed crontab, nil when Crontab is empty.
	Cron Cron
}

// Content is a validated policy content, the parts the coordinator acts on.
// The type's options stay in the raw content for the runner, which parses
// them again with ParseCompaction and its siblings.
type Content struct {
	// Type is the maintenance type the content was validated for.
	Type     Type
	Schedule Schedule
	// MinInterval is minIntervalMs; nil when the content leaves it out (the
	// coordinator's configuration or DefaultMinInterval applies). Zero
	// disables the cooldown.
	MinInterval *time.Duration
	// JobOptions are the job's properties, values as text. Never nil.
	JobOptions map[string]string
}

// ParseContent validates the content of a policy of maintenance type t: it
// must be a JSON object with a schedule, and every field must be valid (see
// Fields and docs/policies.md), the type's options included. Errors are
// *Error with fields under "content.".
func ParseContent(t Type, content json.RawMessage) (Content, error) {
	if PolicyTypeOf(t) == "" {
		_, _, err := ParsePolicyType(string(t))
		return Content{}, err
	}
	trimmed := bytes.TrimSpace(content)
	if len(trimmed) == 0 || string(trimmed) == "null" {
		return Content{}, errf("content", "required: a JSON object with at least a schedule")
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(trimmed, &top); err != nil || trimmed[0] != '{' {
		return Content{}, errf("content", "must be a JSON object")
	}
	c := Content{Type: t, JobOptions: map[string]string{}}
	var err error
	if c.Schedule, err = parseSchedule(t, top["schedule"]); err != nil {
		return Content{}, err
	}
	if raw, ok := top["minIntervalMs"]; ok {
		d, err := parseMinInterval(raw)
		if err != nil {
			return Content{}, err
		}
		c.MinInterval = &d
	}
	if c.JobOptions, err = parseJobOptions(top["jobOptions"]); err != nil {
		return Content{}, err
	}
	if raw, ok := top["rewriteOptions"]; ok {
		if err := checkCredentialKeys("content.rewriteOptions", raw); err != nil {
			return Content{}, err
		}
	}
	if err := ValidateOptions(t, trimmed); err != nil {
		return Content{}, under("content", err)
	}
	return c, nil
}

func parseSchedule(t Type, raw json.RawMessage) (Schedule, error) {
	const field = "content.schedule"
	if len(raw) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return Schedule{}, errf(field, "required: set onCommit: true or a crontab, or the policy never runs")
	}
	var doc struct {
		OnCommit *bool  `json:"onCommit"`
		Crontab  string `json:"crontab"`
		Timezone string `json:"timezone"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		return Schedule{}, jsonFieldError(field, err)
	}
	s := Schedule{OnCommit: doc.OnCommit != nil && *doc.OnCommit, Crontab: strings.TrimSpace(doc.Crontab), Timezone: strings.TrimSpace(doc.Timezone)}
	if s.OnCommit && !OnCommitAllowed(t) {
		return Schedule{}, errf(field+".onCommit", "not allowed for %s (%s), which runs on a crontab only", PolicyTypeOf(t), t)
	}
	if s.Timezone != "" {
		if _, err := time.LoadLocation(s.Timezone); err != nil || strings.EqualFold(s.Timezone, "local") {
			return Schedule{}, errf(field+".timezone", "unknown time zone %q; want an IANA name such as UTC or Europe/Berlin", s.Timezone)
		}
	}
	if s.Crontab != "" {
		cron, err := ParseCron(s.Crontab, s.Timezone)
		if err != nil {
			return Schedule{}, errf(field+".crontab", "%v; want five fields (minute hour day-of-month month day-of-week), six with seconds first, or a descriptor such as @hourly or @every 30s", err)
		}
		s.Cron = cron
	}
	if !s.OnCommit && s.Crontab == "" {
		if !OnCommitAllowed(t) {
			return Schedule{}, errf(field+".crontab", "required for %s", t)
		}
		return Schedule{}, errf(field, "no trigger: set onCommit: true or a crontab, or the policy never runs")
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
			return 0, errf(field, "want a whole number of milliseconds >= 0 (0 disables the cooldown), got %s", raw)
		}
		ms = int64(f)
	}
	switch {
	case ms < 0:
		return 0, errf(field, "must be >= 0 (0 disables the cooldown), got %d", ms)
	case ms > maxMinIntervalMs:
		return 0, errf(field, "too large: %d ms", ms)
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
		return nil, errf(field, "must be a JSON object of string, number or boolean values")
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
			return nil, errf(field+"."+k, "want a string, number or boolean")
		}
		if u, err := url.Parse(v); err == nil && u.User != nil {
			if _, hasPassword := u.User.Password(); hasPassword {
				return nil, errf(field+"."+k, "is a URL with a password; credentials come from the coordinator configuration (gravitinoAuth.*, ircAuth.*), not from policies")
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
