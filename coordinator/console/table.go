package console

import (
	"context"
	"encoding/json"
	"fmt"
	"html/template"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tms-dev/tms/coordinator/admin"
	"github.com/tms-dev/tms/store"
)

// This file is a table's page: its server-drawn charts over the metrics
// rows and its job history.

// chartLabels title the table page's charts, in chartSample.values order
// (chartSample's JSON tags are the sampler's keys).
var chartLabels = [5]string{"Files (data and delete)", "Small files", "Delete files", "Manifests", "Snapshots"}

// Chart geometry, in SVG user units.
const (
	chartW, chartH         = 640, 180
	padL, padR, padT, padB = 60, 16, 12, 28
	plotW, plotH           = chartW - padL - padR, chartH - padT - padB
	timelineH              = 40
	timeLabel              = "2006-01-02 15:04"
)

// point is a plotted value.
type point struct {
	X, Y  float64
	Title string
}

// chart is one server-drawn line plot.
type chart struct {
	Label        string
	W, H         int
	Points       []point
	Polyline     string
	X0, X1       float64 // plot area
	Y0, Y1       float64
	YMax, YMin   string // axis labels
	TFirst, TEnd string
}

// timeline marks every metrics row once, at its recorded time.
type timeline struct {
	W, H   int
	X0, X1 float64
	Y      float64
	// Marks is one <circle class="sample"> per row, built in charts from
	// numbers and escaped text (a template range over 10,000 rows is most
	// of a page's time); N is how many.
	Marks  template.HTML
	N      int
	TFirst string
	TEnd   string
}

type tableData struct {
	Table    store.Table
	Name     string
	Timeline *timeline
	Charts   []chart
	Jobs     []store.Job
}

func (c *Console) table(w http.ResponseWriter, r *http.Request, s session) {
	ctx := r.Context()
	t, err := c.findTable(ctx, r.PathValue("name"))
	if err != nil {
		c.fail(w, r, s, err)
		return
	}
	ms, err := c.cfg.Store.ListSnapshotMetrics(ctx, t.ID)
	if err != nil {
		c.fail(w, r, s, err)
		return
	}
	jobs, err := c.cfg.Store.ListJobs(ctx, t.ID, JobHistory)
	if err != nil {
		c.fail(w, r, s, err)
		return
	}
	d := tableData{Table: t, Name: t.Catalog + "." + t.Namespace + "." + t.Name, Jobs: jobs}
	if len(ms) > 0 {
		d.Timeline, d.Charts = charts(ms)
	}
	c.render(w, s, http.StatusOK, "table", d.Name, d)
}

// findTable resolves a table given as a row id or CATALOG.NAMESPACE.TABLE
// (the newest incarnation).
func (c *Console) findTable(ctx context.Context, s string) (store.Table, error) {
	if s != "" && !strings.Contains(s, ".") {
		id, err := strconv.ParseInt(s, 10, 64)
		if err != nil || id <= 0 {
			return store.Table{}, fmt.Errorf("%w: table %q: want a table id or CATALOG.NAMESPACE.TABLE", store.ErrInvalidArgument, s)
		}
		return c.cfg.Store.GetTable(ctx, id)
	}
	name, err := admin.ParseTableName(s, "table")
	if err != nil {
		return store.Table{}, err
	}
	return c.cfg.Store.FindTable(ctx, name.Catalog, name.Namespace, name.Table)
}

// maxTitled is how many marks a plot draws with a tooltip each; above it
// a chart draws its line only, and the timeline bare marks, so a table with
// 10,000 samples renders a page of a few hundred KB in milliseconds.
const maxTitled = 200

// chartSample is the part of a metrics row the charts read, in chartLabels
// order (nil: absent).
type chartSample struct {
	Files     *float64 `json:"file-number"`
	Small     *float64 `json:"small-file-number"`
	Deletes   *float64 `json:"delete-file-number"`
	Manifests *float64 `json:"manifest-number"`
	Snapshots *float64 `json:"snapshot-number"`
}

func (c chartSample) values() [5]*float64 {
	return [5]*float64{c.Files, c.Small, c.Deletes, c.Manifests, c.Snapshots}
}

// charts draws the sample timeline and one chart per chartLabels metric
// over ms (oldest first, at least one row). The timeline keeps one mark per
// row (an operator counts samples there); a chart's line keeps, per pixel
// column, the lowest and highest value, which is all a line of plotW pixels
// can show.
func charts(ms []store.SnapshotMetrics) (*timeline, []chart) {
	t0, t1 := ms[0].RecordedAt, ms[len(ms)-1].RecordedAt
	span := t1.Sub(t0).Seconds()
	xOf := func(at time.Time) float64 {
		if span <= 0 {
			return padL + plotW/2
		}
		return round(padL + plotW*at.Sub(t0).Seconds()/span)
	}
	first, last := t0.UTC().Format(timeLabel), t1.UTC().Format(timeLabel)
	values := make([][5]*float64, len(ms))
	tl := &timeline{W: chartW, H: timelineH, X0: padL, X1: padL + plotW, Y: timelineH / 2, TFirst: first, TEnd: last}
	var marks strings.Builder
	titled := len(ms) <= maxTitled
	y := strconv.FormatFloat(tl.Y, 'f', -1, 64)
	for i, m := range ms {
		var cs chartSample
		_ = json.Unmarshal(m.Value, &cs)
		values[i] = cs.values()
		x := strconv.FormatFloat(xOf(m.RecordedAt), 'f', -1, 64)
		if titled {
			title := fmt.Sprintf("snapshot %d, policy %d, %s", m.SnapshotID, m.PolicyID, m.RecordedAt.UTC().Format(time.RFC3339))
			marks.WriteString(`<circle class="sample" cx="` + x + `" cy="` + y + `" r="4"><title>` + template.HTMLEscapeString(title) + "</title></circle>\n")
		} else {
			marks.WriteString(`<circle class="sample" cx="` + x + `" cy="` + y + `" r="2"/>` + "\n")
		}
	}
	tl.Marks = template.HTML(marks.String()) // numbers and escaped text only
	tl.N = len(ms)
	var out []chart
	for ki, label := range chartLabels {
		ch := chart{Label: label, W: chartW, H: chartH, X0: padL, X1: padL + plotW, Y0: padT, Y1: padT + plotH,
			TFirst: first, TEnd: last}
		maxV, n := 0.0, 0
		for _, v := range values {
			if f := v[ki]; f != nil {
				maxV, n = math.Max(maxV, *f), n+1
			}
		}
		top := maxV
		if top <= 0 {
			top = 1
		}
		yOf := func(f float64) float64 { return round(padT + plotH*(1-math.Max(f, 0)/top)) }
		var pts []string
		add := func(x, y float64) {
			pts = append(pts, strconv.FormatFloat(x, 'f', -1, 64)+","+strconv.FormatFloat(y, 'f', -1, 64))
		}
		if n <= maxTitled {
			for i, v := range values {
				if f := v[ki]; f != nil {
					p := point{X: xOf(ms[i].RecordedAt), Y: yOf(*f),
						Title: fmt.Sprintf("%s: %s (snapshot %d)", ms[i].RecordedAt.UTC().Format(time.RFC3339), formatMetric(*f), ms[i].SnapshotID)}
					ch.Points = append(ch.Points, p)
					add(p.X, p.Y)
				}
			}
		} else {
			// Per pixel column, the first value, then the column's extremes
			// in time order: the line's shape at this width.
			col, lo, hi := math.NaN(), 0.0, 0.0
			flush := func() {
				if math.IsNaN(col) {
					return
				}
				add(col, hi) // smaller y is higher on screen
				if lo != hi {
					add(col, lo)
				}
			}
			for i, v := range values {
				f := v[ki]
				if f == nil {
					continue
				}
				x, yv := math.Round(xOf(ms[i].RecordedAt)), yOf(*f)
				if x != col {
					flush()
					col, lo, hi = x, yv, yv
					continue
				}
				lo, hi = math.Max(lo, yv), math.Min(hi, yv)
			}
			flush()
		}
		ch.Polyline = strings.Join(pts, " ")
		ch.YMax, ch.YMin = formatMetric(maxV), "0"
		out = append(out, ch)
	}
	return tl, out
}

func round(f float64) float64 { return math.Round(f*10) / 10 }
