package gravitinotest

import (
	"bytes"
	"encoding/json"
	"slices"
)

// ---- request decoding, as Jackson with Gravitino's mapper ----

// decodeObject reads the first JSON value of body as an object (trailing
// data ignored, as Jackson); a null or absent value is a nil map.
func decodeObject(body []byte, known ...string) (map[string]json.RawMessage, bool) {
	dec := json.NewDecoder(bytes.NewReader(body))
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return nil, false
	}
	return objectFields(raw, known...)
}

// objectFields splits a JSON object, refusing keys outside known.
func objectFields(raw json.RawMessage, known ...string) (map[string]json.RawMessage, bool) {
	if isNull(raw) {
		return nil, true
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return nil, false
	}
	for k := range fields {
		if !slices.Contains(known, k) {
			return nil, false
		}
	}
	return fields, true
}

func isNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

// jsonString reads a string as Jackson's StringDeserializer: numbers and
// booleans give their text; null is ok=true, null=true.
func jsonString(raw json.RawMessage) (s string, null, ok bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || isNull(raw) {
		return "", true, true
	}
	switch raw[0] {
	case '"':
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", false, false
		}
		return s, false, true
	case '{', '[':
		return "", false, false
	}
	return string(raw), false, true
}

func jsonStrings(raw json.RawMessage) ([]string, bool) {
	if raw == nil || isNull(raw) {
		return nil, true
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, false
	}
	out := make([]string, 0, len(items))
	for _, it := range items {
		s, null, ok := jsonString(it)
		if !ok || null {
			return nil, false
		}
		out = append(out, s)
	}
	return out, true
}

// jsonStringMap reads a string map; dropNull leaves null values out
// instead of refusing them.
func jsonStringMap(raw json.RawMessage, dropNull bool) (map[string]string, bool) {
	if raw == nil || isNull(raw) {
		return nil, true
	}
	var items map[string]json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, false
	}
	out := make(map[string]string, len(items))
	for k, it := range items {
		s, null, ok := jsonString(it)
		if !ok || (null && !dropNull) {
			return nil, false
		}
		if !null {
			out[k] = s
		}
	}
	return out, true
}

// decodeRun reads a JobRunRequest.
func decodeRun(body []byte) (string, map[string]string, *failure) {
	mal := malformed()
	fields, ok := decodeObject(body, "jobTemplateName", "jobConf")
	if !ok || fields == nil {
		return "", nil, &mal
	}
	name, _, ok := jsonString(fields["jobTemplateName"])
	if !ok {
		return "", nil, &mal
	}
	conf, ok := jsonStringMap(fields["jobConf"], true)
	if !ok {
		return "", nil, &mal
	}
	if conf == nil {
		conf = map[string]string{}
	}
	return name, conf, nil
}

// decodeRegister reads a JobTemplateRegisterRequest; a null or absent
// jobTemplate is a nil template.
func decodeRegister(body []byte) (*JobTemplate, *failure) {
	mal := malformed()
	fields, ok := decodeObject(body, "jobTemplate")
	if !ok || fields == nil {
		return nil, &mal
	}
	raw := fields["jobTemplate"]
	if raw == nil || isNull(raw) {
		return nil, nil
	}
	var head map[string]json.RawMessage
	if json.Unmarshal(raw, &head) != nil {
		return nil, &mal
	}
	jobType, null, ok := jsonString(head["jobType"])
	if !ok || null || (jobType != "shell" && jobType != "spark") {
		return nil, &mal // Jackson: missing or unknown type id
	}
	known := []string{"jobType", "name", "comment", "executable", "arguments", "environments", "customFields", "audit"}
	if jobType == "shell" {
		known = append(known, "scripts")
	} else {
		known = append(known, "className", "jars", "files", "archives", "configs")
	}
	f, ok := objectFields(raw, known...)
	if !ok {
		return nil, &mal
	}
	t := &JobTemplate{JobType: jobType}
	good := true
	str := func(k string) string {
		s, _, ok := jsonString(f[k])
		good = good && ok
		return s
	}
	list := func(k string) []string {
		l, ok := jsonStrings(f[k])
		good = good && ok
		return l
	}
	dict := func(k string) map[string]string {
		m, ok := jsonStringMap(f[k], false)
		good = good && ok
		return m
	}
	t.Name, t.Executable = str("name"), str("executable")
	if c, null, ok := jsonString(f["comment"]); !ok {
		good = false
	} else if !null {
		t.Comment = &c
	}
	t.Arguments, t.Environments, t.CustomFields = list("arguments"), dict("environments"), dict("customFields")
	if jobType == "shell" {
		t.Scripts = list("scripts")
	} else {
		t.ClassName, t.Jars, t.Files, t.Archives, t.Configs = str("className"), list("jars"), list("files"), list("archives"), dict("configs")
	}
	if a, ok := f["audit"]; ok {
		if _, ok := objectFields(a, "creator", "createTime", "lastModifier", "lastModifiedTime"); !ok {
			good = false
		}
	}
	if !good {
		return nil, &mal
	}
	return t, nil
}
