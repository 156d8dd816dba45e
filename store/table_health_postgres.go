package store

// This file is PostgreSQL's part of the tables page's reads and of
// table_latest_metrics (table_health.go).

// jsonNumber reads key of the jsonb object expr as a double precision,
// NULL when the key is absent or its value is not a number (a cast alone
// would fail the whole statement on one bad value).
func (pgDialect) jsonNumber(expr, key string) string {
	v := expr + " -> '" + quoteJSONKey(key) + "'"
	return "CASE WHEN jsonb_typeof(" + v + ") = 'number' THEN (" + v + ")::double precision END"
}
