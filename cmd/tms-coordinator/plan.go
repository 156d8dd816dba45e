package main

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tms-dev/tms/coordinator/config"
	"github.com/tms-dev/tms/coordinator/flow"
	"github.com/tms-dev/tms/internal/cli"
	"github.com/tms-dev/tms/policy"
)

// plan prints what would run now and why, per table and policy: flow.Plan,
// the same dry run as GET /v1/plan and the console's plan page. It reads
// the ledger and writes nothing.
func runPlan(ctx context.Context, env cli.Env) error {
	c := newLedgerCmd(env, "plan", "")
	var (
		name, configPath string
		minIntervals     []string
		limit            int
		after            int64
		all              bool
	)
	c.fs.StringVar(&name, "table", "", "plan one table, CATALOG.NAMESPACE.TABLE (default: a page of every table)")
	c.fs.IntVar(&limit, "limit", flow.DefaultPlanLimit, fmt.Sprintf("tables per page (1 to %d)", flow.MaxPlanLimit))
	c.fs.Int64Var(&after, "after", 0, "start after this table id (the next value a page printed)")
	c.fs.BoolVar(&all, "all", false, "walk every page")
	c.fs.StringVar(&configPath, "config", "", "serve's configuration file: its task.<type>.minIntervalMs are the cooldowns (other keys are ignored)")
	c.fs.StringArrayVar(&minIntervals, "min-interval", nil, "TYPE=DURATION: a type's cooldown when its policy sets none, as serve's --min-interval")
	if err := cli.Parse(c.fs, env.Args); err != nil {
		return err
	}
	switch {
	case limit < 1 || limit > flow.MaxPlanLimit:
		return cli.Usagef("--limit must be 1 to %d, got %d", flow.MaxPlanLimit, limit)
	case after < 0:
		return cli.Usagef("--after must not be negative, got %d", after)
	case name != "" && (all || after != 0):
		return cli.Usagef("--table plans one table; give it without --all and --after")
	}
	var fromFile map[policy.Type]time.Duration
	if configPath != "" {
		file, err := config.ReadFile(configPath)
		if err != nil {
			return classify(err)
		}
		fromFile = file.MinIntervals()
	}
	cooldowns, err := config.Cooldowns(fromFile, minIntervals)
	if err != nil {
		return classify(err)
	}
	st, _, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	// The plan reads and decides; its flow submits nothing (no submitter)
	// and never opens a catalog.
	fl, err := flow.NewFlow(st, nil, flow.FlowConfig{DBURL: c.db, MinInterval: cooldowns, Log: env.Log})
	if err != nil {
		return err
	}
	q := flow.PlanQuery{Limit: limit, AfterID: after, Now: time.Now()}
	if name != "" {
		t, err := findTable(ctx, st, name)
		if err != nil {
			return err
		}
		q = flow.PlanQuery{Catalog: t.Catalog, Namespace: t.Namespace, Name: t.Name, Now: q.Now}
	}
	out := flow.Plan{Now: q.Now.UTC(), Items: []flow.PlanItem{}}
	for {
		p, err := fl.Plan(ctx, q)
		if err != nil {
			return classify(err)
		}
		out.Items, out.Tables, out.Next = append(out.Items, p.Items...), out.Tables+p.Tables, p.Next
		if !all || p.Next == 0 {
			break
		}
		q.AfterID = p.Next
	}
	if c.asJSON {
		return writeJSON(env.Stdout, out)
	}
	return printPlan(env, out)
}

// printPlan prints the plan as a table, the reason last.
func printPlan(env cli.Env, p flow.Plan) error {
	w := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "plan at %s: %d items over %d tables\n", p.Now.Format(time.RFC3339), len(p.Items), p.Tables)
	fmt.Fprintln(w, "TABLE\tTYPE\tPOLICY\tVERDICT\tDUE\tREASON")
	for _, it := range p.Items {
		due := "next commit"
		if it.Due != nil {
			due = it.Due.UTC().Format(time.RFC3339)
		}
		if len(it.Triggers) == 0 {
			due = "–"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", it.Table, it.Type, it.Policy, strings.ToUpper(it.Verdict), due, it.Reason)
	}
	if p.Next != 0 {
		fmt.Fprintf(w, "more tables: --after %d (or --all)\n", p.Next)
	}
	return w.Flush()
}
