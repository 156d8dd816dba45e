package store

// This file is SQLite's part of the tables page's reads and of
// table_latest_metrics (table_health.go).

// jsonNumber reads key of the JSON object text expr as a number, NULL when
// the key is absent or its value is not a number (json_extract alone would
// return a string or an object's text, which sort after every number).
func (sqliteDialect) jsonNumber(expr, key string) string {
	path := `'$."` + quoteJSONKey(key) + `"'`
	return "CASE WHEN json_type(" + expr + ", " + path + ") IN ('integer', 'real') THEN json_extract(" + expr + ", " + path + ") END"
}
