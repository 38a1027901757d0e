package jobs

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/hibiken/asynq"
)

// RetryError asks Asynq to run the task again after Delay. Hold is true
// when the retry is not a failed attempt (the destination asked to wait,
// or another worker holds the key); Asynq then does not count it.
type RetryError struct {
	Delay  time.Duration
	Hold   bool
	Reason string
}

func (e *RetryError) Error() string {
	if e.Hold {
		return fmt.Sprintf("retry in %s (hold: %s)", e.Delay.Round(time.Millisecond), e.Reason)
	}
	return fmt.Sprintf("retry in %s: %s", e.Delay.Round(time.Millisecond), e.Reason)
}

// Backoff computes retry delays: Base·2^(attempt-1), capped at Max, with
// full jitter over the upper half so retries of many keys spread out.
type Backoff struct {
	// Base is the first retry's delay. Defaults to 1s.
	Base time.Duration
	// Max caps the delay. Defaults to 1h.
	Max time.Duration
}

// WithDefaults returns a copy of b with zero fields set to their defaults.
func (b Backoff) WithDefaults() Backoff {
	if b.Base <= 0 {
		b.Base = time.Second
	}
	if b.Max <= 0 {
		b.Max = time.Hour
	}
	return b
}

// Delay returns the delay before retry number attempt (1 for the first).
func (b Backoff) Delay(attempt int) time.Duration {
	b = b.WithDefaults()
	if attempt < 1 {
		attempt = 1
	}
	d := b.Max
	if attempt < 40 {
		if exp := b.Base << (attempt - 1); exp > 0 && exp < b.Max {
			d = exp
		}
	}
	half := d / 2
	return half + rand.N(half+1)
}

// retryDelayFunc reads the delay from a RetryError and falls back to the
// backoff on Asynq's retry count for any other error.
func retryDelayFunc(b Backoff) asynq.RetryDelayFunc {
	return func(n int, err error, _ *asynq.Task) time.Duration {
		var re *RetryError
		if errors.As(err, &re) {
			return re.Delay
		}
		return b.Delay(n + 1)
	}
}

// isFailure tells Asynq whether an error counts against the task's retry
// count: holds do not.
func isFailure(err error) bool {
	var re *RetryError
	if errors.As(err, &re) {
		return !re.Hold
	}
	return true
}
