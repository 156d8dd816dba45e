package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/apache/iceberg-go"

	"github.com/tms-dev/tms/catalogs"
	"github.com/tms-dev/tms/chain"
	"github.com/tms-dev/tms/store"
)

// ReplayLedgerFile is the file name of the default replay ledger.
const ReplayLedgerFile = "tms-replay.db"

// DefaultReplayLedger returns the ledger replay uses when none is given:
// sqlite://<user cache dir>/tms/tms-replay.db ($XDG_CACHE_HOME or
// ~/.cache on Linux, ~/Library/Caches on macOS), so replays from any working
// directory share one history and leave nothing in the current folder; or
// sqlite://./tms-replay.db when the system has no user cache dir.
func DefaultReplayLedger() string {
	dir, err := os.UserCacheDir()
	if err != nil || dir == "" {
		return "sqlite://./" + ReplayLedgerFile
	}
	return "sqlite://" + filepath.Join(dir, "tms", ReplayLedgerFile)
}

// ReplayOptions say what Replay runs.
type ReplayOptions struct {
	// Ledger is the ledger URL. Defaults to DefaultReplayLedger(). An SQLite
	// ledger is created and migrated automatically (it is a local scratch
	// ledger); a PostgreSQL one must already be migrated, because replay
	// never changes the schema of a shared database.
	Ledger string
	// Catalog says how to reach the catalog. Its properties may hold
	// credentials (from --catalog-prop): credential-shaped keys go to the
	// run's overlay and are never written to the ledger.
	Catalog CatalogSpec
	// Table is NAMESPACE.TABLE.
	Table string
	// Steps are the types to run, in chain order, with their policy content.
	Steps []StepSpec
	// DryRun decides and plans but commits and deletes nothing.
	DryRun bool
}

// ReplayResult is what Replay did.
type ReplayResult struct {
	// Report is the chain's report.
	Report chain.Report
	// Ledger is the ledger URL the job row lives in; JobID its row id.
	Ledger string
	JobID  int64
}

// Replay runs a chain on one table outside any coordinator: it registers the
// table in the replay ledger, creates a manual job row (policy
// store.NoPolicy) whose spec holds everything but credentials, and runs it
// with RunJob, so a replay leaves the same ledger trail a real job does.
//
// Bad options (spec validation) are reported before anything is written,
// wrapping ErrInvalidSpec. A job row for the same table still in flight in
// the ledger (another replay running, or one that was killed) is an error
// wrapping store.ErrInFlight that names the row.
func Replay(ctx context.Context, ro ReplayOptions, opts Options) (ReplayResult, error) {
	opts = opts.withDefaults()
	if ro.Ledger == "" {
		ro.Ledger = DefaultReplayLedger()
	}
	res := ReplayResult{Ledger: ro.Ledger}
	spec, overlay, err := replaySpec(ro)
	if err != nil {
		return res, err
	}
	// Credentials from the caller's sources (TMS_CATALOG_PROP_*,
	// --catalog-props-file) go on top, never into the spec.
	overlay = mergeProps(overlay, opts.CatalogProps)
	specJSON, err := json.Marshal(spec)
	if err != nil {
		return res, fmt.Errorf("encode spec: %w", err)
	}
	st, err := openReplayLedger(ctx, ro.Ledger, opts)
	if err != nil {
		return res, err
	}
	defer st.Close()

	ident, _ := catalogs.ParseIdent(spec.Table) // validated by replaySpec
	cat, err := openCatalog(ctx, spec.Catalog, overlay)
	if err != nil {
		return res, err
	}
	tbl, err := catalogs.LoadTable(ctx, cat, ident)
	closeCatalog(cat) // RunJob opens its own, from the spec
	if err != nil {
		return res, err
	}
	catName := spec.Catalog.Name
	switch {
	case spec.Catalog.WarehouseDir != "":
		catName = catalogs.LocalName
	case catName == "":
		catName = "default"
	}
	row, err := st.RegisterTable(ctx, store.TableRef{
		Catalog: catName, Namespace: strings.Join(ident[:len(ident)-1], "."), Name: ident[len(ident)-1],
		UUID: tbl.Metadata().TableUUID().String(),
	})
	if err != nil {
		return res, err
	}
	types := make([]string, len(spec.Steps))
	for i, s := range spec.Steps {
		types[i] = string(s.Type)
	}
	job, err := st.CreateJob(ctx, store.NewJob{
		TableID: row.ID, PolicyID: store.NoPolicy, Types: types, Trigger: store.TriggerManual, Spec: specJSON,
	})
	if errors.Is(err, store.ErrInFlight) {
		return res, inFlightError(ctx, st, row.ID, ro.Ledger, err)
	}
	if err != nil {
		return res, err
	}
	res.JobID = job.ID
	opts.CatalogProps = overlay
	res.Report, err = RunJob(ctx, st, job.ID, job.Fence, opts)
	return res, err
}

// replaySpec builds the job spec of a replay and the overlay that carries
// its credential-shaped catalog properties, and validates the spec.
func replaySpec(ro ReplayOptions) (Spec, iceberg.Properties, error) {
	spec := Spec{Catalog: CatalogSpec{Name: ro.Catalog.Name}, Table: ro.Table, Steps: ro.Steps, DryRun: ro.DryRun}
	overlay := iceberg.Properties{}
	if ro.Catalog.WarehouseDir != "" {
		abs, err := filepath.Abs(ro.Catalog.WarehouseDir)
		if err != nil {
			return Spec{}, nil, fmt.Errorf("%w: warehouse dir: %v", ErrInvalidSpec, err)
		}
		spec.Catalog = CatalogSpec{WarehouseDir: abs}
	}
	if len(ro.Catalog.Properties) > 0 {
		spec.Catalog.Properties = map[string]string{}
		for k, v := range ro.Catalog.Properties {
			if IsCredentialKey(k) {
				overlay[k] = v
				continue
			}
			spec.Catalog.Properties[k] = v
		}
	}
	if err := spec.Validate(); err != nil {
		return Spec{}, nil, err
	}
	return spec, overlay, nil
}

// openReplayLedger opens the replay ledger, creating and migrating an SQLite
// one.
func openReplayLedger(ctx context.Context, ledger string, opts Options) (store.Store, error) {
	if path, ok := strings.CutPrefix(ledger, "sqlite://"); ok {
		if dir := filepath.Dir(path); dir != "" {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return nil, fmt.Errorf("replay ledger: %w", err)
			}
		}
		if _, err := store.Migrate(ctx, ledger, opts.Log); err != nil {
			return nil, fmt.Errorf("replay ledger: %w", err)
		}
	}
	st, err := store.OpenWith(ctx, ledger, opts.Log, store.OpenOptions{Now: opts.Now})
	if err != nil {
		return nil, fmt.Errorf("replay ledger: %w", err)
	}
	return st, nil
}

// inFlightError names the in-flight row that blocks a new replay.
func inFlightError(ctx context.Context, st store.Store, tableID int64, ledger string, err error) error {
	jobs, lerr := st.ListJobs(ctx, tableID, 20)
	if lerr == nil {
		for _, j := range jobs {
			if j.PolicyID == store.NoPolicy && j.InFlight() {
				return fmt.Errorf("%w: job %d on this table is still %s in ledger %s since %s: another replay is running, or one was killed (then use another --ledger or delete that file)",
					store.ErrInFlight, j.ID, j.Status, ledger, j.CreatedAt.Format("2006-01-02 15:04:05Z"))
			}
		}
	}
	return err
}
