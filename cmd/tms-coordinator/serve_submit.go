package main

import (
	"context"
	"fmt"

	"go.uber.org/zap"

	"github.com/tms-dev/tms/coordinator/config"
	"github.com/tms-dev/tms/coordinator/submit"
	"github.com/tms-dev/tms/store"
)

// closer is a submitter serve stops at its graceful end.
type closer interface {
	submit.Submitter
	Close(ctx context.Context) error
}

// newSubmitter builds the chosen submitter (cfg.Validate checked its
// settings); gravitino's identity comes resolved in res.
func newSubmitter(cfg *config.Config, res *config.Resolved, log *zap.Logger) (closer, error) {
	switch cfg.JobSubmitter {
	case "local":
		return submit.NewLocalSubmitter(cfg.LocalConfig(log))
	case "command":
		c, err := cfg.CommandConfig()
		if err != nil {
			return nil, err
		}
		c.Log = log
		return submit.NewCommandSubmitter(c)
	case "gravitino":
		g := cfg.GravitinoConfig(res.GravitinoAuth)
		g.Log = log
		return submit.NewGravitinoSubmitter(g)
	}
	return nil, fmt.Errorf("--job-submitter: unknown submitter %q; want local, command or gravitino", cfg.JobSubmitter)
}

// claimedBy returns the gravitino submitter's ledger check: whether an
// external id is already an in-flight row's.
func claimedBy(st store.Store) func(ctx context.Context, id string) (bool, error) {
	return func(ctx context.Context, id string) (bool, error) {
		for after := int64(0); ; {
			jobs, err := st.ListInFlightJobs(ctx, after, 500)
			if err != nil {
				return false, err
			}
			for _, j := range jobs {
				if j.JobID == id {
					return true, nil
				}
				after = j.ID
			}
			if len(jobs) < 500 {
				return false, nil
			}
		}
	}
}
