package submit

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
)

// This file is how a gravitino submit whose answer was lost finds its run
// again, or fails safe: the submits in flight and lost, and the search.

// begin records a submit in flight; settle records its end and, when it
// got an id, the id as known.
func (s *GravitinoSubmitter) begin(at time.Time) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	s.pending[s.seq] = at
	return s.seq
}

func (s *GravitinoSubmitter) settle(seq int64, id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.pending, seq)
	now := time.Now()
	if id != "" {
		s.known[id] = now
	}
	// Ids older than any recovery window are not needed. Pruned once a
	// minute, not on every settle: a scan of an hour of ids under s.mu on
	// every settle would cap the submit rate.
	if now.Sub(s.pruned) > time.Minute {
		s.pruned = now
		maps.DeleteFunc(s.known, func(_ string, at time.Time) bool { return now.Sub(at) > time.Hour })
		maps.DeleteFunc(s.disputed, func(_ string, d dispute) bool { return now.Sub(d.at) > time.Hour })
		maps.DeleteFunc(s.lost, func(_ int64, until time.Time) bool { return !until.IsZero() && now.Sub(until) > time.Hour })
	}
	s.settled.Broadcast()
}

// settleLost records the end of a submit whose answer was lost: it is lost
// until its search decides or it gives up.
func (s *GravitinoSubmitter) settleLost(seq int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.pending, seq)
	s.lost[seq] = time.Time{}
	s.settled.Broadcast()
}

// giveUp ends a lost submit without a search's answer: its run, if any,
// stays unknown (made within Timeout of sent), so it still counts as lost
// for the searches of submits sent until RecoverWindow after that, whose
// lists may hold the run.
func (s *GravitinoSubmitter) giveUp(seq int64, sent time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lost[seq] = sent.Add(s.cfg.Timeout + s.cfg.RecoverWindow)
}

// recoverRun looks for the run a lost submit (sent at sent) may have
// created: a run of the template created since sent-RecoverWindow that no
// answer of this process and no ledger row owns. After listing the runs it
// waits for the other submits of this process that began before the list
// was answered (any of them may have made a listed run), so their runs are
// known; later submits cannot be in the list, so a steady stream of them
// does not hold the recovery up. It returns "" when there is none (the POST
// was not applied), and an error when there are several, or one that
// another lost submit of this process could own, or a disputed run this
// submit may own.
func (s *GravitinoSubmitter) recoverRun(ctx context.Context, seq int64, sent time.Time) (string, error) {
	var ans gravitinoAnswer
	if err := s.do(ctx, http.MethodGet, s.base+"/runs?jobTemplateName="+url.QueryEscape(s.cfg.JobTemplateName), &ans); err != nil {
		s.giveUp(seq, sent)
		return "", fmt.Errorf("gravitino submit: answer lost, and listing the runs to find it failed: %w", err)
	}
	s.mu.Lock()
	upto := s.seq // the last submit begun before the list was answered
	deadline := time.Now().Add(2 * s.cfg.Timeout)
	for s.inFlight(seq, upto) && time.Now().Before(deadline) {
		waitCond(s.settled, 100*time.Millisecond)
	}
	s.mu.Unlock()
	from := sent.Add(-s.cfg.RecoverWindow)
	var candidates []string
	for _, j := range ans.Jobs {
		if j.JobTemplateName != s.cfg.JobTemplateName || (!j.Audit.CreateTime.IsZero() && j.Audit.CreateTime.Before(from)) {
			continue
		}
		s.mu.Lock()
		_, mine := s.known[j.JobID]
		s.mu.Unlock()
		if mine {
			continue
		}
		if s.cfg.Claimed != nil {
			claimed, err := s.cfg.Claimed(ctx, j.JobID)
			if err != nil {
				s.giveUp(seq, sent)
				return "", fmt.Errorf("gravitino submit: answer lost; checking run %s against the ledger: %w", j.JobID, err)
			}
			if claimed {
				continue
			}
		}
		candidates = append(candidates, j.JobID)
	}
	// The verdict is taken under s.mu, so two searches never both take one
	// run, and a run another search took meanwhile is not a candidate.
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.lost, seq)
	var fresh, mayBeMine []string
	for _, id := range candidates {
		if _, taken := s.known[id]; taken {
			continue
		}
		if d, ok := s.disputed[id]; ok {
			// An earlier failed search's run: this submit's only if it was
			// among that search's lost submits (a submit begun after that
			// list was answered has no run in it).
			if slices.Contains(d.owners, seq) {
				mayBeMine = append(mayBeMine, id)
			}
			continue
		}
		fresh = append(fresh, id)
	}
	// Other lost submits whose run may be in the list: those begun before
	// it was answered, still searching or given up.
	owners := []int64{seq}
	for k, until := range s.lost {
		if k <= upto && (until.IsZero() || sent.Before(until)) {
			owners = append(owners, k)
		}
	}
	switch {
	case len(mayBeMine) == 0 && len(fresh) == 0:
		return "", nil
	case len(mayBeMine) == 0 && len(fresh) == 1 && len(owners) == 1:
		s.known[fresh[0]] = time.Now()
		return fresh[0], nil
	}
	for _, id := range fresh {
		s.disputed[id] = dispute{at: time.Now(), owners: owners}
	}
	runs := slices.Sorted(slices.Values(append(fresh, mayBeMine...)))
	if len(runs) == 1 {
		return "", fmt.Errorf("gravitino submit: the answer was lost and run %s, created since, could be this job's or that of another submit whose answer was lost; not sent again",
			runs[0])
	}
	return "", fmt.Errorf("gravitino submit: the answer was lost and %d runs created since could be this job's (%s); not sent again",
		len(runs), strings.Join(runs, ", "))
}

// inFlight reports whether a submit other than seq, begun no later than
// submit upto, is still in flight. Called with s.mu held.
func (s *GravitinoSubmitter) inFlight(seq, upto int64) bool {
	for k := range s.pending {
		if k != seq && k <= upto {
			return true
		}
	}
	return false
}

// waitCond waits on c (its lock held) for a signal or d, whichever first.
func waitCond(c *sync.Cond, d time.Duration) {
	t := time.AfterFunc(d, c.Broadcast)
	c.Wait()
	t.Stop()
}
