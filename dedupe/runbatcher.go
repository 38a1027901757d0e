package dedupe

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// RunBatcher claims and finishes runs with group commit: concurrent
// workers' claims share one statement, and so do their outcomes. It has
// the same methods and answers as the Store it wraps (which it embeds for
// everything else), with fewer commits under load.
type RunBatcher struct {
	*Store
	claims   *groupCommit[ClaimRequest, claimResult]
	finishes *groupCommit[finishRequest, finishResult]
}

// NewRunBatcher starts a RunBatcher on s. Close it to stop.
func NewRunBatcher(s *Store, cfg BatcherConfig) *RunBatcher {
	return &RunBatcher{
		Store:  s,
		claims: newGroupCommit(cfg, s.claimBatch),
		finishes: newGroupCommit(cfg, func(ctx context.Context, reqs []finishRequest) (out []finishResult, err error) {
			// One transaction, so a batch that fails (and is split and
			// retried by groupCommit) left nothing of an earlier round.
			err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
				out, err = finishRounds(ctx, tx, reqs)
				return err
			})
			return out, err
		}),
	}
}

// Claim is [Store.Claim], batched with concurrent claims.
func (b *RunBatcher) Claim(ctx context.Context, req ClaimRequest) (Claim, error) {
	res, err := b.claims.do(ctx, req)
	if err != nil {
		return Claim{}, err
	}
	return res.claim, res.err
}

// Finish is [Store.Finish], batched with concurrent outcomes.
func (b *RunBatcher) Finish(ctx context.Context, key string, f Finish) (Finished, error) {
	res, err := b.finishes.do(ctx, finishRequest{key: key, finish: f})
	if err != nil {
		return Finished{}, err
	}
	return res.finished, res.err
}

// Close stops batching after the running statements.
func (b *RunBatcher) Close() {
	b.claims.close()
	b.finishes.close()
}

// finishRounds stores outcomes in as few statements as keys allow: a key
// given twice (a worker that lost its claim racing the new holder) goes
// in a later statement, so each conditional update sees the one before.
func finishRounds(ctx context.Context, db DB, reqs []finishRequest) ([]finishResult, error) {
	out := make([]finishResult, len(reqs))
	left := make([]int, len(reqs))
	for i := range reqs {
		left[i] = i
	}
	for len(left) > 0 {
		seen := make(map[string]bool, len(left))
		var round []finishRequest
		var pos, later []int
		for _, i := range left {
			if seen[reqs[i].key] {
				later = append(later, i)
				continue
			}
			seen[reqs[i].key] = true
			round = append(round, reqs[i])
			pos = append(pos, i)
		}
		res, err := finishBatch(ctx, db, round)
		if err != nil {
			return nil, err
		}
		for j, i := range pos {
			out[i] = res[j]
		}
		left = later
	}
	return out, nil
}
