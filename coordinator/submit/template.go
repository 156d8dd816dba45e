package submit

import (
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/tms-dev/tms/policy"
)

// This file is the argv templates of command-driven submitters: strings
// with Gravitino-style {{placeholder}}s, checked once when the submitter is
// configured and rendered per job into an argv that is executed directly,
// never through a shell, so a value can hold spaces or quotes and stays one
// argument.

// The placeholders a template may use, spelled as Gravitino's jobConf keys.
const (
	PlaceholderJobID           = "job_id"
	PlaceholderFence           = "fence"
	PlaceholderLedgerURL       = "ledger_url"
	PlaceholderCatalogName     = "catalog_name"
	PlaceholderTableIdentifier = "table_identifier"
	PlaceholderTypes           = "types"
	PlaceholderExternalID      = "external_id"
)

// submitPlaceholders are those a submit template may use; status and cancel
// templates may use external_id too.
var submitPlaceholders = []string{PlaceholderJobID, PlaceholderFence, PlaceholderLedgerURL,
	PlaceholderCatalogName, PlaceholderTableIdentifier, PlaceholderTypes}

var placeholderRE = regexp.MustCompile(`\{\{\s*([^{}]*?)\s*\}\}`)

// argvTemplate is a checked argv template.
type argvTemplate struct {
	name string // "submit", "status", "cancel": for messages
	argv []string
}

// parseTemplate checks argv: at least the program, and only the allowed
// placeholders, each written {{name}}. An error names the template, the
// argument and the placeholder.
func parseTemplate(name string, argv []string, allowed []string) (argvTemplate, error) {
	if len(argv) == 0 || strings.TrimSpace(argv[0]) == "" {
		return argvTemplate{}, fmt.Errorf("%w: %s command: empty; want a JSON array of argv strings, program first", ErrInvalidJobRequest, name)
	}
	for i, a := range argv {
		rest := placeholderRE.ReplaceAllString(a, "")
		if strings.Contains(rest, "{{") || strings.Contains(rest, "}}") {
			return argvTemplate{}, fmt.Errorf("%w: %s command: argument %d (%q): unbalanced {{ }}", ErrInvalidJobRequest, name, i, a)
		}
		for _, m := range placeholderRE.FindAllStringSubmatch(a, -1) {
			if !slices.Contains(allowed, m[1]) {
				return argvTemplate{}, fmt.Errorf("%w: %s command: argument %d: unknown placeholder {{%s}}; known: %s",
					ErrInvalidJobRequest, name, i, m[1], strings.Join(allowed, ", "))
			}
		}
	}
	return argvTemplate{name: name, argv: slices.Clone(argv)}, nil
}

// render returns the argv with every placeholder replaced by its value.
func (t argvTemplate) render(values map[string]string) []string {
	out := make([]string, len(t.argv))
	for i, a := range t.argv {
		out[i] = placeholderRE.ReplaceAllStringFunc(a, func(m string) string {
			return values[placeholderRE.FindStringSubmatch(m)[1]]
		})
	}
	return out
}

// jobValues are the placeholder values of req. The ledger URL loses its
// password and credential-shaped query parameters: the command gets the
// whole URL in its environment (TMS_DB), never in its arguments.
func jobValues(req JobRequest) map[string]string {
	catalog, table, _ := strings.Cut(req.Table, ".")
	return map[string]string{
		PlaceholderJobID:           fmt.Sprint(req.JobID),
		PlaceholderFence:           fmt.Sprint(req.Fence),
		PlaceholderLedgerURL:       redactURL(req.DBURL),
		PlaceholderCatalogName:     catalog,
		PlaceholderTableIdentifier: table,
		PlaceholderTypes:           policy.JoinTypes(req.Types),
	}
}

// redactURL returns raw without its password and credential-shaped query
// parameters; "" when it cannot be parsed (it may be all secret).
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	if u.User != nil {
		u.User = url.User(u.User.Username())
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return ""
	}
	for k := range q {
		if policy.IsCredentialKey(k) {
			q.Del(k)
		}
	}
	u.RawQuery = q.Encode()
	return u.String()
}
