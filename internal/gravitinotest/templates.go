package gravitinotest

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// RegisterTemplate registers a template in metalake without an HTTP call,
// with creator "anonymous".
func (s *Server) RegisterTemplate(metalake string, t JobTemplate) error {
	if t.JobType == "" {
		t.JobType = "shell"
	}
	if _, err := normalize(&t); err != nil {
		return fmt.Errorf("gravitinotest: template %q: %w", t.Name, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ml, ok := s.metalakes[metalake]
	if !ok {
		return fmt.Errorf("gravitinotest: metalake %s does not exist", metalake)
	}
	if _, dup := ml.templates[t.Name]; dup {
		return fmt.Errorf("gravitinotest: template %s already exists in metalake %s", t.Name, metalake)
	}
	s.addTemplateLocked(ml, &t, anonymous)
	return nil
}

// ---- templates ----

func (s *Server) listTemplates(m string, details bool) (int, any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ml, ok := s.metalakes[m]
	if !ok {
		return noMetalake("job template", "LIST", "", m)
	}
	if !details {
		names := slices.Clone(ml.order)
		if names == nil {
			names = []string{}
		}
		return http.StatusOK, map[string]any{"code": 0, "names": names}
	}
	tpls := make([]JobTemplate, 0, len(ml.order))
	for _, n := range ml.order {
		tpls = append(tpls, *ml.templates[n])
	}
	return http.StatusOK, map[string]any{"code": 0, "jobTemplates": tpls}
}

func (s *Server) getTemplate(m, name string) (int, any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ml, ok := s.metalakes[m]
	if !ok {
		return noMetalake("job template", "GET", name, m)
	}
	t, ok := ml.templates[name]
	if !ok {
		return noTemplate("job template", "GET", name, m, name)
	}
	return http.StatusOK, map[string]any{"code": 0, "jobTemplate": *t}
}

func (s *Server) registerTemplate(m string, body []byte, principal string) (int, any) {
	t, f := decodeRegister(body)
	if f != nil {
		return f.answer()
	}
	if t == nil {
		return objectFailure(http.StatusBadRequest, CodeIllegalArguments, "IllegalArgumentException",
			"job template", "REGISTER", "", m, `"jobTemplate" must not be null`).answer()
	}
	if reason, err := normalize(t); err != nil {
		return objectFailure(http.StatusBadRequest, CodeIllegalArguments, "IllegalArgumentException",
			"job template", "REGISTER", t.Name, m, reason).answer()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ml, ok := s.metalakes[m]
	if !ok {
		return noMetalake("job template", "REGISTER", t.Name, m)
	}
	if _, dup := ml.templates[t.Name]; dup {
		return objectFailure(http.StatusConflict, CodeAlreadyExists, "JobTemplateAlreadyExistsException",
			"job template", "REGISTER", t.Name, m,
			fmt.Sprintf("Job template with name %s under metalake %s already exists", t.Name, m)).answer()
	}
	s.addTemplateLocked(ml, t, principal)
	return http.StatusOK, map[string]any{"code": 0}
}

func (s *Server) addTemplateLocked(ml *metalake, t *JobTemplate, principal string) {
	t.Audit = &Audit{Creator: principal, CreateTime: formatTime(time.Now())}
	ml.templates[t.Name] = t
	ml.order = append(ml.order, t.Name)
}

func (s *Server) deleteTemplate(m, name string) (int, any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ml, ok := s.metalakes[m]
	if !ok {
		return noMetalake("job template", "DELETE", name, m)
	}
	if _, ok := ml.templates[name]; !ok {
		return http.StatusOK, map[string]any{"code": 0, "dropped": false}
	}
	var mine []*run
	for _, r := range s.runOrder {
		if r.metalake == m && r.template == name && !r.deleted {
			if !r.status.Done() {
				return objectFailure(http.StatusConflict, CodeInUse, "InUseException", "job template", "DELETE", name, m,
					fmt.Sprintf("Job template %s under metalake %s has active jobs associated with it", name, m)).answer()
			}
			mine = append(mine, r)
		}
	}
	for _, r := range mine {
		r.deleted = true
	}
	_ = os.RemoveAll(filepath.Join(s.stagingDir, m, name))
	delete(ml.templates, name)
	ml.order = slices.DeleteFunc(ml.order, func(n string) bool { return n == name })
	return http.StatusOK, map[string]any{"code": 0, "dropped": true}
}

// normalize validates a template as JobTemplateDTO.validate and the
// JobTemplate builders do, and fills absent lists and maps. It returns the
// Gravitino message of a failure too.
func normalize(t *JobTemplate) (string, error) {
	fail := func(msg string) (string, error) { return msg, errors.New(msg) }
	switch t.JobType {
	case "shell", "spark":
	case "":
		return fail(`"jobType" is required and cannot be null`)
	default:
		return fail(fmt.Sprintf("unknown jobType %q", t.JobType))
	}
	if strings.TrimSpace(t.Name) == "" {
		return fail(`"name" is required and cannot be empty`)
	}
	if strings.TrimSpace(t.Executable) == "" {
		return fail(`"executable" is required and cannot be empty`)
	}
	if t.JobType == "spark" && strings.TrimSpace(t.ClassName) == "" {
		return fail(`"className" is required and cannot be empty`)
	}
	t.Arguments = orEmpty(t.Arguments)
	t.Environments = orEmptyMap(t.Environments)
	t.CustomFields = orEmptyMap(t.CustomFields)
	if t.JobType == "shell" {
		t.Scripts = orEmpty(t.Scripts)
		t.ClassName, t.Jars, t.Files, t.Archives, t.Configs = "", nil, nil, nil, nil
	} else {
		t.Scripts = nil
		t.Jars, t.Files, t.Archives = orEmpty(t.Jars), orEmpty(t.Files), orEmpty(t.Archives)
		t.Configs = orEmptyMap(t.Configs)
	}
	return "", nil
}

// ---- placeholders ----

// placeholder is JobManager.PLACEHOLDER_PATTERN.
var placeholder = regexp.MustCompile(`\{\{([\w.-]+)\}\}`)

// javaException is an exception the Java code would throw.
type javaException struct{ class, msg string }

func (e *javaException) Error() string { return e.msg }

// replacePlaceholders is JobManager.replacePlaceholder: each {{key}} with a
// value in conf becomes the value, inserted by Matcher.appendReplacement;
// the others stay.
func replacePlaceholders(in string, conf map[string]string) (string, error) {
	if strings.TrimSpace(in) == "" {
		return in, nil
	}
	var b strings.Builder
	last := 0
	for _, m := range placeholder.FindAllStringSubmatchIndex(in, -1) {
		b.WriteString(in[last:m[0]])
		whole, key := in[m[0]:m[1]], in[m[2]:m[3]]
		if v, ok := conf[key]; ok {
			if err := appendReplacement(&b, v, whole, key); err != nil {
				return "", err
			}
		} else {
			b.WriteString(whole)
		}
		last = m[1]
	}
	b.WriteString(in[last:])
	return b.String(), nil
}

// appendReplacement expands repl as java.util.regex.Matcher does for a
// pattern with one group: \c is c, $0 the match, $1 the key.
func appendReplacement(b *strings.Builder, repl, group0, group1 string) error {
	illegal := func(msg string) error { return &javaException{"IllegalArgumentException", msg} }
	groups := []string{group0, group1}
	var out strings.Builder
	for i := 0; i < len(repl); {
		c := repl[i]
		switch c {
		case '\\':
			i++
			if i == len(repl) {
				return illegal("character to be escaped is missing")
			}
			out.WriteByte(repl[i])
			i++
		case '$':
			i++
			if i == len(repl) {
				return illegal("Illegal group reference: group index is missing")
			}
			if repl[i] == '{' {
				i++
				start := i
				for i < len(repl) && isASCIIAlnum(repl[i]) {
					i++
				}
				name := repl[start:i]
				switch {
				case name == "":
					return illegal("named capturing group has 0 length name")
				case i == len(repl) || repl[i] != '}':
					return illegal("named capturing group is missing trailing '}'")
				case '0' <= name[0] && name[0] <= '9':
					return illegal("capturing group name {" + name + "} starts with digit character")
				}
				return illegal("No group with name {" + name + "}")
			}
			ref := int(repl[i]) - '0'
			if ref < 0 || ref > 9 {
				return illegal("Illegal group reference")
			}
			i++
			for i < len(repl) {
				d := int(repl[i]) - '0'
				if d < 0 || d > 9 || ref*10+d > len(groups)-1 {
					break
				}
				ref = ref*10 + d
				i++
			}
			if ref >= len(groups) {
				return &javaException{"IndexOutOfBoundsException", "No group " + strconv.Itoa(ref)}
			}
			out.WriteString(groups[ref])
		default:
			out.WriteByte(c)
			i++
		}
	}
	b.WriteString(out.String())
	return nil
}

func isASCIIAlnum(c byte) bool {
	return ('0' <= c && c <= '9') || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z')
}

// renderMap replaces placeholders in a map's keys and values; two keys that
// render alike are Collectors.toMap's IllegalStateException.
func renderMap(in, conf map[string]string) (map[string]string, error) {
	out := make(map[string]string, len(in))
	for k, v := range in {
		rk, err := replacePlaceholders(k, conf)
		if err != nil {
			return nil, err
		}
		rv, err := replacePlaceholders(v, conf)
		if err != nil {
			return nil, err
		}
		if _, dup := out[rk]; dup {
			return nil, &javaException{"IllegalStateException", "Duplicate key " + rk}
		}
		out[rk] = rv
	}
	return out, nil
}

// missingPlaceholders lists the {{key}}s of the rendered fields with no
// value in conf, sorted.
func missingPlaceholders(t *JobTemplate, conf map[string]string) []string {
	seen := map[string]bool{}
	scan := func(s string) {
		for _, m := range placeholder.FindAllStringSubmatch(s, -1) {
			if _, ok := conf[m[1]]; !ok {
				seen["{{"+m[1]+"}}"] = true
			}
		}
	}
	for _, a := range t.Arguments {
		scan(a)
	}
	for _, mp := range []map[string]string{t.Environments, t.CustomFields} {
		for k, v := range mp {
			scan(k)
			scan(v)
		}
	}
	out := make([]string, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
