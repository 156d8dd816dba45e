package policy

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"

	"github.com/apache/iceberg-go"
)

// ParseWhere parses the compaction `where` option: predicates joined by AND,
// each `column op value` with op one of = == != <> < <= > >= and value a
// quoted string ('2024-01-03' or "books"), a number, or true/false. Strings
// are converted to the column's type when the expression is bound to the
// table schema, so `ts >= '2024-01-03T00:00:00+00:00'` works on a timestamptz
// column. OR, NOT and parentheses are not supported.
func ParseWhere(s string) (iceberg.BooleanExpression, error) {
	toks, err := lexWhere(s)
	if err != nil {
		return nil, err
	}
	if len(toks) == 0 {
		return nil, fmt.Errorf("empty expression")
	}
	var preds []iceberg.BooleanExpression
	for i := 0; ; {
		if len(toks)-i < 3 {
			return nil, fmt.Errorf("incomplete predicate at %q (want column op value)", strings.Join(texts(toks[i:]), " "))
		}
		col, op, val := toks[i], toks[i+1], toks[i+2]
		if col.kind != tokIdent {
			return nil, fmt.Errorf("want a column name, got %q", col.text)
		}
		if op.kind != tokOp {
			return nil, fmt.Errorf("want a comparison operator after %q, got %q", col.text, op.text)
		}
		p, err := predicate(col.text, op.text, val)
		if err != nil {
			return nil, err
		}
		preds = append(preds, p)
		i += 3
		if i == len(toks) {
			break
		}
		if toks[i].kind != tokIdent || !strings.EqualFold(toks[i].text, "and") {
			return nil, fmt.Errorf("want AND after a predicate, got %q (only AND is supported)", toks[i].text)
		}
		i++
	}
	if len(preds) == 1 {
		return preds[0], nil
	}
	return iceberg.NewAnd(preds[0], preds[1], preds[2:]...), nil
}

// BindWhere parses s and binds it to schema, so unknown columns and values
// that do not convert to the column type are reported before any work.
func BindWhere(s string, schema *iceberg.Schema) (iceberg.BooleanExpression, error) {
	expr, err := ParseWhere(s)
	if err != nil {
		return nil, err
	}
	if _, err := iceberg.BindExpr(schema, expr, true); err != nil {
		return nil, err
	}
	return expr, nil
}

func predicate(col, op string, val token) (iceberg.BooleanExpression, error) {
	ref := iceberg.Reference(col)
	switch val.kind {
	case tokString:
		return compare(ref, op, val.text)
	case tokIdent:
		switch strings.ToLower(val.text) {
		case "true":
			return compare(ref, op, true)
		case "false":
			return compare(ref, op, false)
		}
		return nil, fmt.Errorf("want a value after %s %s, got %q (quote strings)", col, op, val.text)
	case tokNumber:
		if n, err := strconv.ParseInt(val.text, 10, 64); err == nil {
			return compare(ref, op, n)
		}
		f, err := strconv.ParseFloat(val.text, 64)
		if err != nil {
			return nil, fmt.Errorf("bad number %q", val.text)
		}
		return compare(ref, op, f)
	}
	return nil, fmt.Errorf("want a value after %s %s, got %q", col, op, val.text)
}

func compare[T iceberg.LiteralType](ref iceberg.Reference, op string, v T) (iceberg.BooleanExpression, error) {
	switch op {
	case "=", "==":
		return iceberg.EqualTo(ref, v), nil
	case "!=", "<>":
		return iceberg.NotEqualTo(ref, v), nil
	case "<":
		return iceberg.LessThan(ref, v), nil
	case "<=":
		return iceberg.LessThanEqual(ref, v), nil
	case ">":
		return iceberg.GreaterThan(ref, v), nil
	case ">=":
		return iceberg.GreaterThanEqual(ref, v), nil
	}
	return nil, fmt.Errorf("unknown operator %q", op)
}

type tokKind int

const (
	tokIdent tokKind = iota
	tokOp
	tokString
	tokNumber
)

type token struct {
	kind tokKind
	text string
}

func texts(ts []token) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.text
	}
	return out
}

func lexWhere(s string) ([]token, error) {
	var toks []token
	r := []rune(s)
	for i := 0; i < len(r); {
		c := r[i]
		switch {
		case unicode.IsSpace(c):
			i++
		case c == '\'' || c == '"':
			j := i + 1
			for j < len(r) && r[j] != c {
				j++
			}
			if j == len(r) {
				return nil, fmt.Errorf("unterminated string starting at %q", string(r[i:]))
			}
			toks = append(toks, token{tokString, string(r[i+1 : j])})
			i = j + 1
		case strings.ContainsRune("=!<>", c):
			j := i + 1
			for j < len(r) && strings.ContainsRune("=<>", r[j]) {
				j++
			}
			toks = append(toks, token{tokOp, string(r[i:j])})
			i = j
		case c == '-' || c == '+' || c == '.' || unicode.IsDigit(c):
			j := i + 1
			for j < len(r) && (unicode.IsDigit(r[j]) || strings.ContainsRune(".eE+-", r[j])) {
				j++
			}
			toks = append(toks, token{tokNumber, string(r[i:j])})
			i = j
		case c == '_' || c == '`' || unicode.IsLetter(c):
			if c == '`' {
				j := i + 1
				for j < len(r) && r[j] != '`' {
					j++
				}
				if j == len(r) {
					return nil, fmt.Errorf("unterminated quoted column at %q", string(r[i:]))
				}
				toks = append(toks, token{tokIdent, string(r[i+1 : j])})
				i = j + 1
				continue
			}
			j := i + 1
			for j < len(r) && (r[j] == '_' || r[j] == '.' || unicode.IsLetter(r[j]) || unicode.IsDigit(r[j])) {
				j++
			}
			toks = append(toks, token{tokIdent, string(r[i:j])})
			i = j
		default:
			return nil, fmt.Errorf("unexpected %q", string(c))
		}
	}
	return toks, nil
}
