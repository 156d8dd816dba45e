package console

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"

	"github.com/tms-dev/tms/store"
)

// This file is the tables page: every registered table with its latest
// metrics and last job.

// metricKeys are the metrics the tables page shows, by the
// sampler's JSON keys (sampler.Metrics).
var metricKeys = []struct{ Key, Label string }{
	{"data-file-number", "Data files"},
	{"small-file-number", "Small files"},
	{"data-file-mse", "Data-file MSE"},
	{"delete-file-number", "Delete files"},
	{"manifest-number", "Manifests"},
	{"snapshot-number", "Snapshots"},
}

// tableRow is a row of the tables page.
type tableRow struct {
	store.Table
	Metrics []string // formatted, in metricKeys order; "–" if absent
	LastJob *store.Job
}

type tablesData struct {
	Columns []string
	Rows    []tableRow
	Limit   int
	Next    string // ?after= of the next page, "" on the last
}

func (c *Console) tables(w http.ResponseWriter, r *http.Request, s session) {
	q := r.URL.Query()
	limit := DefaultTableLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > store.MaxQueryLimit {
			c.message(w, s, http.StatusBadRequest, "Bad request", fmt.Sprintf("limit %q: want 1 to %d", v, store.MaxQueryLimit))
			return
		}
		limit = n
	}
	var after int64
	if v := q.Get("after"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			c.message(w, s, http.StatusBadRequest, "Bad request", fmt.Sprintf("after %q: want a table id", v))
			return
		}
		after = n
	}
	rows, err := c.ledger.ListTableStatus(r.Context(), after, limit)
	if err != nil {
		c.fail(w, r, s, err)
		return
	}
	d := tablesData{Rows: make([]tableRow, len(rows)), Limit: limit}
	for _, k := range metricKeys {
		d.Columns = append(d.Columns, k.Label)
	}
	for i, ts := range rows {
		var m map[string]any
		if ts.Metrics != nil {
			_ = json.Unmarshal(ts.Metrics.Value, &m)
		}
		row := tableRow{Table: ts.Table, LastJob: ts.LastJob}
		for _, k := range metricKeys {
			row.Metrics = append(row.Metrics, formatMetric(m[k.Key]))
		}
		d.Rows[i] = row
	}
	if len(rows) == limit {
		d.Next = strconv.FormatInt(rows[len(rows)-1].ID, 10)
	}
	c.render(w, s, http.StatusOK, "tables", "Tables", d)
}

// formatMetric renders a metric value: integers as such, other numbers
// with 4 significant digits, absent as a dash.
func formatMetric(v any) string {
	f, ok := v.(float64)
	switch {
	case v == nil:
		return "–"
	case !ok:
		return fmt.Sprint(v)
	case f == math.Trunc(f) && math.Abs(f) < 1e15:
		return strconv.FormatInt(int64(f), 10)
	default:
		return strconv.FormatFloat(f, 'g', 4, 64)
	}
}
