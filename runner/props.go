package runner

import (
	"bufio"
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/apache/iceberg-go"

	"github.com/tms-dev/tms/internal/secretref"
	"github.com/tms-dev/tms/jobspec"
)

// EnvPropPrefix is jobspec.EnvPropPrefix: TMS_CATALOG_PROP_<KEY>=VALUE
// overlays catalog property KEY.
const EnvPropPrefix = jobspec.EnvPropPrefix

// EnvSecretRefs is the environment variable of `tms-runner run
// --catalog-secret-refs`: catalog property → secret reference (env:NAME or
// file:PATH) in URL query form (s3.secret-access-key=file%3A%2Frun%2Fs3&…),
// resolved where the runner runs. It is how a job started through Gravitino
// gets its catalog credentials without them ever being in the job's conf.
const EnvSecretRefs = "TMS_CATALOG_SECRET_REFS"

// ResolveSecretRefs parses refs (URL query form, see EnvSecretRefs) and
// resolves each reference. Errors name the property, never a resolved
// value.
func ResolveSecretRefs(refs string) (iceberg.Properties, error) {
	q, err := url.ParseQuery(refs)
	if err != nil {
		return nil, fmt.Errorf("catalog secret refs: want property=env:NAME or property=file:PATH pairs joined by & (URL query form): %v", err)
	}
	out := iceberg.Properties{}
	for k, refs := range q {
		if k == "" || len(refs) != 1 {
			return nil, fmt.Errorf("catalog secret refs: property %q: want one reference", k)
		}
		v, err := secretref.Resolve(refs[0])
		if err != nil {
			return nil, fmt.Errorf("catalog secret refs: property %s: %w", k, err)
		}
		out[k] = v
	}
	return out, nil
}

// CatalogPropsFromEnv returns the catalog properties named by
// TMS_CATALOG_PROP_<KEY> variables in environ (os.Environ() form). Entries
// with an empty KEY are ignored.
func CatalogPropsFromEnv(environ []string) iceberg.Properties {
	props := iceberg.Properties{}
	for _, kv := range environ {
		name, value, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(name, EnvPropPrefix) {
			continue
		}
		if key := strings.TrimPrefix(name, EnvPropPrefix); key != "" {
			props[key] = value
		}
	}
	return props
}

// ReadCatalogPropsFile reads catalog properties from a file of key=value
// lines (the Java .properties subset people actually write: blank lines and
// lines starting with # or ! are skipped, blanks around the key and value
// are trimmed, the value is everything after the first '='). A line without
// '=' or with an empty key is an error naming the line number, not its
// content, because the content may be a secret.
func ReadCatalogPropsFile(path string) (iceberg.Properties, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("catalog props file: %w", err)
	}
	defer f.Close()
	props := iceberg.Properties{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, fmt.Errorf("catalog props file %s: line %d: want key=value", path, n)
		}
		props[k] = strings.TrimSpace(v)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("catalog props file %s: %w", path, err)
	}
	return props, nil
}

// mergeProps returns base overlaid by each overlay in turn (later wins).
func mergeProps(base map[string]string, overlays ...iceberg.Properties) iceberg.Properties {
	out := iceberg.Properties{}
	for k, v := range base {
		out[k] = v
	}
	for _, o := range overlays {
		for k, v := range o {
			out[k] = v
		}
	}
	return out
}
