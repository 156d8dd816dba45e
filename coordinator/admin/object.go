package admin

import (
	"fmt"
	"strings"

	"github.com/tms-dev/tms/store"
)

// This file parses the dotted object names policies are attached to. In
// CATALOG[.NAMESPACE[.TABLE]] the first segment is the catalog; with two
// segments the second is a namespace; with three or more the last is the
// table and the ones between are the namespace levels (cat.a.b.t is table t
// in namespace a.b). To attach to a multi-level namespace, give the level
// (cat.a.b at level namespace is namespace a.b). Names that themselves
// contain '.' cannot be written.

// InputError is a bad input value other than a policy document field: an
// object name, a level, a query parameter. Message names the input the way
// the caller's front end spells it ("--object" on the command line,
// "object" over HTTP).
type InputError struct {
	// Field is the input's name as the caller gave it.
	Field string
	// Message is the whole message, starting with Field.
	Message string
}

// Error returns the message.
func (e *InputError) Error() string { return e.Message }

func inputErr(field, format string, args ...any) error {
	return &InputError{Field: field, Message: fmt.Sprintf(format, args...)}
}

// ObjectNames says how the inputs of ParseObject are called in errors.
type ObjectNames struct {
	// Object names the dotted object, e.g. "--object" or "object".
	Object string
	// Level names the level, e.g. "--level" or "level".
	Level string
}

// ParseObject parses dotted object name s at level (catalog, namespace or
// table; empty: from the number of segments, 1, 2 or 3+). Errors are
// *InputError naming the input as names says.
func ParseObject(s, level string, names ObjectNames) (store.PolicyObject, error) {
	segs, err := splitObject(names.Object, s)
	if err != nil {
		return store.PolicyObject{}, err
	}
	lvl := store.ObjectLevel(strings.ToLower(strings.TrimSpace(level)))
	if lvl == "" {
		switch len(segs) {
		case 1:
			lvl = store.LevelCatalog
		case 2:
			lvl = store.LevelNamespace
		default:
			lvl = store.LevelTable
		}
	}
	obj := store.PolicyObject{Level: lvl, Catalog: segs[0]}
	switch lvl {
	case store.LevelCatalog:
		if len(segs) != 1 {
			return obj, inputErr(names.Object, "%s %q: a catalog is one segment, got %d", names.Object, s, len(segs))
		}
	case store.LevelNamespace:
		if len(segs) < 2 {
			return obj, inputErr(names.Object, "%s %q: a namespace is CATALOG.NAMESPACE[.LEVEL…]", names.Object, s)
		}
		obj.Namespace = strings.Join(segs[1:], ".")
	case store.LevelTable:
		if len(segs) < 3 {
			return obj, inputErr(names.Object, "%s %q: a table is CATALOG.NAMESPACE.TABLE", names.Object, s)
		}
		obj.Namespace = strings.Join(segs[1:len(segs)-1], ".")
		obj.Table = segs[len(segs)-1]
	default:
		return obj, inputErr(names.Level, "%s %q: want catalog, namespace or table", names.Level, level)
	}
	return obj, nil
}

// ParseTableName parses a table's dotted name CATALOG.NAMESPACE.TABLE (the
// namespace may have several levels). field names the input in errors.
func ParseTableName(s, field string) (store.PolicyObject, error) {
	segs, err := splitObject(field, s)
	if err != nil {
		return store.PolicyObject{}, err
	}
	if len(segs) < 3 {
		return store.PolicyObject{}, inputErr(field, "%s %q: want CATALOG.NAMESPACE.TABLE", field, s)
	}
	return store.PolicyObject{Level: store.LevelTable, Catalog: segs[0],
		Namespace: strings.Join(segs[1:len(segs)-1], "."), Table: segs[len(segs)-1]}, nil
}

func splitObject(field, s string) ([]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, inputErr(field, "%s must not be empty", field)
	}
	segs := strings.Split(s, ".")
	for _, seg := range segs {
		if strings.TrimSpace(seg) == "" {
			return nil, inputErr(field, "%s %q: empty segment", field, s)
		}
		if strings.TrimSpace(seg) != seg {
			return nil, inputErr(field, "%s %q: white space around a segment", field, s)
		}
	}
	return segs, nil
}
