package console

import (
	"encoding/json"
	"fmt"
	"html/template"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tms-dev/tms/store"
)

// This file draws a table page's charts on the server: the samples
// timeline and one line plot per metric, with every job marked as a band,
// from the metrics rows read by a small scanner.

// nCharts is how many metrics the table page charts.
const nCharts = 7

// chartLabels title the table page's charts, in chartSample.values order
// (chartSample's JSON tags are the sampler's keys); chartNouns name the
// same metrics in a job marker's title.
var (
	chartLabels = [nCharts]string{"Files (data and delete)", "Small files", "Data-file MSE (bytes²)", "Delete files", "Manifests", "Snapshots", "Delete debt (deleted rows / rows)"}
	chartNouns  = [nCharts]string{"files", "small files", "data-file MSE", "delete files", "manifests", "snapshots", "delete ratio"}
)

// Chart geometry, in SVG user units.
const (
	chartW, chartH         = 640, 180
	padL, padR, padT, padB = 60, 16, 12, 28
	plotW, plotH           = chartW - padL - padR, chartH - padT - padB
	timelineH              = 40
	timeLabel              = "2006-01-02 15:04"
	// minBand is the narrowest job marker: a five-minute job on a year of
	// samples is a fraction of a pixel wide.
	minBand = 2
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
	// Jobs is one <rect class="job job-STATUS"> per marked job, built in
	// charts like timeline.Marks.
	Jobs template.HTML
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
	// Jobs marks the jobs as on the charts, titled with their times.
	Jobs template.HTML
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
	MSE       *float64 `json:"data-file-mse"`
	Deletes   *float64 `json:"delete-file-number"`
	Manifests *float64 `json:"manifest-number"`
	Snapshots *float64 `json:"snapshot-number"`
	Ratio     *float64 `json:"delete-ratio"`
}

func (c chartSample) values() [nCharts]*float64 {
	return [nCharts]*float64{c.Files, c.Small, c.MSE, c.Deletes, c.Manifests, c.Snapshots, c.Ratio}
}

// sampleOf reads a metrics row's chart values, keeping the numbers in dst.
// It scans the object's top level for chartSample's keys itself, as
// json.Unmarshal into a chartSample would (the last of a repeated key wins;
// a value that is not a number is absent), without the reflection that was
// most of a 10,000-sample page's time. Keys match exactly, not in any case
// as Unmarshal's do: the sampler writes them so. What the scan does not
// follow (an escaped key, malformed input) goes to json.Unmarshal.
func sampleOf(raw []byte, dst *[nCharts]float64) [nCharts]*float64 {
	if v, ok := scanSample(raw, dst); ok {
		return v
	}
	var cs chartSample
	_ = json.Unmarshal(raw, &cs)
	return cs.values()
}

func scanSample(b []byte, dst *[nCharts]float64) (v [nCharts]*float64, ok bool) {
	i := skipSpace(b, 0)
	if i == len(b) || b[i] != '{' {
		return v, false
	}
	for i = skipSpace(b, i+1); i < len(b) && b[i] != '}'; {
		if b[i] != '"' {
			return v, false
		}
		j := i + 1
		for j < len(b) && b[j] != '"' && b[j] != '\\' {
			j++
		}
		if j == len(b) || b[j] == '\\' {
			return v, false
		}
		k := -1
		switch string(b[i+1 : j]) {
		case "file-number":
			k = 0
		case "small-file-number":
			k = 1
		case "data-file-mse":
			k = 2
		case "delete-file-number":
			k = 3
		case "manifest-number":
			k = 4
		case "snapshot-number":
			k = 5
		case "delete-ratio":
			k = 6
		}
		if i = skipSpace(b, j+1); i == len(b) || b[i] != ':' {
			return v, false
		}
		i = skipSpace(b, i+1)
		end := skipValue(b, i)
		if end < 0 {
			return v, false
		}
		if k >= 0 {
			v[k] = nil
			if c := b[i]; c == '-' || c >= '0' && c <= '9' {
				if f, err := strconv.ParseFloat(string(b[i:end]), 64); err == nil {
					dst[k], v[k] = f, &dst[k]
				}
			}
		}
		switch i = skipSpace(b, end); {
		case i < len(b) && b[i] == ',':
			i = skipSpace(b, i+1)
		case i < len(b) && b[i] == '}':
		default:
			return v, false
		}
	}
	return v, i < len(b)
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipValue returns the end of the JSON value at b[i], -1 if there is none.
func skipValue(b []byte, i int) int {
	if i == len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				if i = skipString(b, i); i < 0 {
					return -1
				}
				i-- // the loop steps past the quote
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
		return -1
	}
	j := i
	for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && b[j] != ' ' && b[j] != '\t' && b[j] != '\n' && b[j] != '\r' {
		j++
	}
	if j == i {
		return -1
	}
	return j
}

// skipString returns the end of the JSON string at b[i], -1 if unclosed.
func skipString(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return -1
}

// charts draws the sample timeline and one chart per chartLabels metric
// over ms (oldest first, at least one row), and marks on each the jobs of
// jobs that ran within the rows' time range; it returns how many it marked.
// The timeline keeps one mark per row (an operator counts samples there); a
// chart's line keeps, per pixel column, the lowest and highest value, which
// is all a line of plotW pixels can show.
//
// A job is a band from its start to its finish (in flight: to now), cut to
// the range and at least minBand wide, drawn under the line. Its title names
// the job, its snapshots, and on each chart the metric at its before and
// after snapshot, read from the rows of those snapshot ids (the newest
// recorded value; a side without one is a dash, and the part is left out
// when neither has one). The two values are not drawn as extra points: both
// are rows of the line already (titled points up to maxTitled rows), and a
// second mark per job per chart would double a busy table's page for
// nothing the title does not say.
func charts(ms []store.SnapshotMetrics, jobs []store.Job, now time.Time) (*timeline, []chart, int) {
	t0, t1 := ms[0].RecordedAt, ms[len(ms)-1].RecordedAt
	span := t1.Sub(t0).Seconds()
	xOf := func(at time.Time) float64 {
		if span <= 0 {
			return padL + plotW/2
		}
		return round(padL + plotW*at.Sub(t0).Seconds()/span)
	}
	first, last := t0.UTC().Format(timeLabel), t1.UTC().Format(timeLabel)
	values := make([][nCharts]*float64, len(ms))
	tl := &timeline{W: chartW, H: timelineH, X0: padL, X1: padL + plotW, Y: timelineH / 2, TFirst: first, TEnd: last}
	var marks strings.Builder
	titled := len(ms) <= maxTitled
	y := strconv.FormatFloat(tl.Y, 'f', -1, 64)
	nums := make([][nCharts]float64, len(ms))
	for i, m := range ms {
		values[i] = sampleOf(m.Value, &nums[i])
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
	bands := jobBands(ms, values, jobs, now, xOf)
	tl.Jobs = drawBands(bands, -1, tl.Y-12, 24)
	var out []chart
	for ki, label := range chartLabels {
		ch := chart{Label: label, W: chartW, H: chartH, X0: padL, X1: padL + plotW, Y0: padT, Y1: padT + plotH,
			TFirst: first, TEnd: last, Jobs: drawBands(bands, ki, padT, plotH)}
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
						Title: fmt.Sprintf("%s: %s (snapshot %d)", ms[i].RecordedAt.UTC().Format(time.RFC3339), formatValue(*f), ms[i].SnapshotID)}
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
		ch.YMax, ch.YMin = formatValue(maxV), "0"
		out = append(out, ch)
	}
	return tl, out, len(bands)
}

// band is a job as the charts mark it.
type band struct {
	x, w  string // left edge and width, formatted
	class string
	// head is the title's escaped start ("job 12 (compaction) succeeded:
	// snapshot 111 → 222") and when its escaped time span.
	head, when string
	// before and after are the metrics at the job's before and after
	// snapshots, nil if the job has no such id or no row has it.
	before, after *[nCharts]*float64
}

// jobBands places the jobs of jobs (newest first) that ran within ms's
// time range, oldest first so a newer band lies on an older one; values
// are ms's chart values and xOf the charts' time axis.
func jobBands(ms []store.SnapshotMetrics, values [][nCharts]*float64, jobs []store.Job, now time.Time, xOf func(time.Time) float64) []band {
	t0, t1 := ms[0].RecordedAt, ms[len(ms)-1].RecordedAt
	at := map[int64]*[nCharts]*float64{} // the values at the snapshots the jobs name
	statuses := store.JobStatuses()
	var out []band
	for i := len(jobs) - 1; i >= 0; i-- {
		j := jobs[i]
		start, end := jobSpan(j, now)
		if end.Before(t0) || start.After(t1) {
			continue
		}
		x0, x1 := xOf(maxTime(start, t0)), xOf(minTime(end, t1))
		if x1-x0 < minBand {
			x0 = math.Min(math.Max((x0+x1-minBand)/2, padL), padL+plotW-minBand)
			x1 = x0 + minBand
		}
		b := band{x: strconv.FormatFloat(round(x0), 'f', -1, 64), w: strconv.FormatFloat(round(x1-x0), 'f', -1, 64),
			class: "job job-other"}
		if slices.Contains(statuses, j.Status) {
			b.class = "job job-" + string(j.Status)
		}
		head := fmt.Sprintf("job %d (%s) %s", j.ID, strings.Join(j.Types, ", "), j.Status)
		if j.BeforeSnapshotID != nil || j.AfterSnapshotID != nil {
			head += ": snapshot " + snap(j.BeforeSnapshotID) + " → " + snap(j.AfterSnapshotID)
		}
		b.head = template.HTMLEscapeString(head)
		when := start.UTC().Format(time.RFC3339) + " to "
		if j.InFlight() {
			when += "now (in flight)"
		} else {
			when += end.UTC().Format(time.RFC3339)
		}
		b.when = template.HTMLEscapeString(when)
		for _, p := range []struct {
			id  *int64
			dst **[nCharts]*float64
		}{{j.BeforeSnapshotID, &b.before}, {j.AfterSnapshotID, &b.after}} {
			if p.id == nil {
				continue
			}
			v := at[*p.id]
			if v == nil {
				v = new([nCharts]*float64)
				at[*p.id] = v
			}
			*p.dst = v
		}
		out = append(out, b)
	}
	if len(at) > 0 {
		for i, m := range ms {
			if v := at[m.SnapshotID]; v != nil {
				for k, f := range values[i] {
					if f != nil {
						v[k] = f
					}
				}
			}
		}
	}
	return out
}

// drawBands draws bands from y over height h: on chart ki, titled with that
// metric before → after; on the timeline (ki < 0) with the time span.
func drawBands(bands []band, ki int, y, h float64) template.HTML {
	if len(bands) == 0 {
		return ""
	}
	ys, hs := strconv.FormatFloat(y, 'f', -1, 64), strconv.FormatFloat(h, 'f', -1, 64)
	var sb strings.Builder
	sb.Grow(len(bands) * 200)
	for _, b := range bands {
		for _, s := range []string{`<rect class="`, b.class, `" x="`, b.x, `" y="`, ys, `" width="`, b.w, `" height="`, hs, `"><title>`, b.head} {
			sb.WriteString(s)
		}
		if ki < 0 {
			sb.WriteString("; ")
			sb.WriteString(b.when)
		} else if v := beforeAfter(b, ki); v != "" {
			sb.WriteString("; ")
			sb.WriteString(chartNouns[ki])
			sb.WriteString(" ")
			sb.WriteString(v)
		}
		sb.WriteString("</title></rect>\n")
	}
	return template.HTML(sb.String()) // numbers, known words and escaped text only
}

// beforeAfter is "120 → 8" for metric ki of b, "" if neither side has it.
func beforeAfter(b band, ki int) string {
	var bv, av *float64
	if b.before != nil {
		bv = b.before[ki]
	}
	if b.after != nil {
		av = b.after[ki]
	}
	if bv == nil && av == nil {
		return ""
	}
	f := func(v *float64) string {
		if v == nil {
			return "–"
		}
		return formatValue(*v)
	}
	return f(bv) + " → " + f(av)
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func round(f float64) float64 { return math.Round(f*10) / 10 }

// formatValue renders a charted value: as formatMetric, except that values
// of a billion and more (data-file MSE, in bytes²) keep 4 significant
// digits (5e+14, not 500000000000000).
func formatValue(f float64) string {
	if math.Abs(f) >= 1e9 {
		return strconv.FormatFloat(f, 'g', 4, 64)
	}
	return formatMetric(f)
}
