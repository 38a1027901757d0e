package jobs

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hibiken/asynq"

	"github.com/webhookd/webhookd/internal/field"
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

// RetrySpec is a destination's own retry policy (retry:).
type RetrySpec struct {
	// Schedule is the waits between tries; the last repeats until
	// max_attempts. Empty keeps the global backoff.
	Schedule []time.Duration `yaml:"schedule"`
	// RetryOn lists the statuses that retry: codes (409) or classes
	// ("5xx"). A status not in it fails for good. Empty keeps the
	// default: 408, 429 and 5xx retry, other 4xx fail for good.
	RetryOn []string `yaml:"retry_on"`
}

// RetryPolicy is a destination's retry policy, checked: when a failed
// call is tried again, and which statuses are worth trying again.
type RetryPolicy struct {
	// Schedule is the waits between tries (the last repeats); nil uses
	// the handler's Backoff.
	Schedule []time.Duration
	// RetryOn holds the statuses (100·class for "5xx": 500) that retry;
	// nil is the default.
	RetryOn map[int]bool
}

// maxScheduledWait bounds one wait of a schedule: a run still has to end.
const maxScheduledWait = 7 * 24 * time.Hour

// newRetryPolicy checks spec; nil keeps the defaults.
func newRetryPolicy(spec *RetrySpec) (RetryPolicy, error) {
	var p RetryPolicy
	if spec == nil {
		return p, nil
	}
	var errs []error
	for i, d := range spec.Schedule {
		if d <= 0 || d > maxScheduledWait {
			errs = append(errs, field.Errorf(field.Index("retry.schedule", i), "must be a wait between 1ms and %s", maxScheduledWait))
		}
	}
	if len(spec.Schedule) > 0 {
		p.Schedule = slices.Clone(spec.Schedule)
	}
	for i, v := range spec.RetryOn {
		v = strings.ToLower(strings.TrimSpace(v))
		code, err := strconv.Atoi(v)
		switch {
		case v == "4xx" || v == "5xx":
			code = int(v[0]-'0') * 100
		case err != nil || code < 400 || code > 599:
			errs = append(errs, field.Errorf(field.Index("retry.retry_on", i), "%q is not a status 400–599 or a class 4xx, 5xx", v))
			continue
		}
		if p.RetryOn == nil {
			p.RetryOn = map[int]bool{}
		}
		p.RetryOn[code] = true
	}
	if spec.RetryOn != nil && len(spec.RetryOn) == 0 {
		errs = append(errs, field.Errorf("retry.retry_on", "must list at least one status (leave it out for the default)"))
	}
	return p, errors.Join(errs...)
}

// retries says whether a call answered with status code (4xx or 5xx) is
// tried again.
func (p RetryPolicy) retries(code int) bool {
	if p.RetryOn == nil {
		return code == http.StatusRequestTimeout || code == http.StatusTooManyRequests || code >= 500
	}
	return p.RetryOn[code] || p.RetryOn[code/100*100]
}

// delay is the wait before retry number attempt (1 for the first): the
// schedule's, else the backoff's.
func (p RetryPolicy) delay(attempt int, b Backoff) time.Duration {
	if len(p.Schedule) == 0 {
		return b.Delay(attempt)
	}
	return p.Schedule[min(max(attempt, 1), len(p.Schedule))-1]
}
