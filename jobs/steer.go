package jobs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	randv2 "math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/webhookd/webhookd/dedupe"
)

// Steering holds the calls of a destination that must not go out yet,
// across all workers and processes (SPEC: "Rate limit, concurrency, pause
// and circuit hold calls; they never spend an attempt and never lose
// one"). It is asked before a task claims its key; a hold sends the task
// back to the queue for a while without touching Postgres, so a held
// destination costs Redis a little and Postgres nothing. The state lives
// in Redis under one hash tag per destination, so each script touches one
// Redis Cluster slot; a concurrency slot expires with its call's timeout,
// so a worker that dies holding one gives it back.
type Steering struct {
	rdb      redis.UniversalClient
	enqueuer *Enqueuer
	paused   func(source, destination string) bool
	now      func() time.Time

	// A destination with no limit but its circuit is admitted from this
	// process's view of the circuit, read from Redis at most every
	// circuitViewTTL, and its calls in flight are counted here and
	// published (publishInFlight): a healthy destination's calls then
	// cost Redis nothing.
	mu       sync.Mutex
	views    map[destinationRef]circuitView
	inFlight map[destinationRef]int
	id       string

	// waiting counts, per destination and fair_by value, the calls this
	// process waits for their turn under the rate (admission.turnIn), at
	// most rateWaiters each: a flooding value filling the count would
	// leave another value only turns free right now, which the flood's
	// own waiters keep taking.
	waiting     map[rateWaitRef]int
	rateWaiters int
}

// rateWaitRef names the calls that count toward one rateWaiters bound:
// a destination's, or with fair_by one value's.
type rateWaitRef struct{ source, destination, fair string }

// circuitView is a process's copy of a destination's circuit.
type circuitView struct {
	fails int
	read  time.Time
}

// circuitViewTTL is how old a process's view of a circuit may be: a
// circuit that opens elsewhere stops this process's calls within it.
const circuitViewTTL = 250 * time.Millisecond

// NewSteering returns a Steering on enqueuer's Redis; it wakes held calls
// through enqueuer. paused reports whether an operator paused a
// destination (a cache of Postgres's record; nil: none is).
func NewSteering(enqueuer *Enqueuer, paused func(source, destination string) bool) *Steering {
	if paused == nil {
		paused = func(string, string) bool { return false }
	}
	return &Steering{
		rdb: enqueuer.rdb, enqueuer: enqueuer, paused: paused, now: time.Now,
		views: map[destinationRef]circuitView{}, inFlight: map[destinationRef]int{}, id: randomSuffix(),
		waiting: map[rateWaitRef]int{}, rateWaiters: defaultRateWaiters,
	}
}

// defaultRateWaiters is DestinationsConfig.RateWaiters's default.
const defaultRateWaiters = 8

// endWait ends the wait for the turn adm took under its destination's
// rate (the call is made now, or not at all).
func (s *Steering) endWait(source, destination string, adm admission) {
	if !adm.waits {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ref := rateWaitRef{source, destination, adm.fair}
	if s.waiting[ref]--; s.waiting[ref] <= 0 {
		delete(s.waiting, ref)
	}
}

// wake makes the calls held for destination run now, once it may be
// called again (resumed, or its circuit closed). A failure is harmless:
// they run when their holds end.
func (s *Steering) wake(ctx context.Context, source, destination string) {
	_, _ = s.enqueuer.Wake(ctx, source, destination)
}

// Hold reasons, as logged and counted.
const (
	holdPaused       = "paused"
	holdCircuitOpen  = "circuit_open"
	holdCircuitProbe = "circuit_probe"
	holdConcurrency  = "concurrency"
	holdFairShare    = "fair_share"
	holdRate         = "rate"
	pausedHold       = 30 * time.Second
	// slotMargin is added to a destination's timeout as a concurrency
	// slot's life: a live worker's claim, call and outcome fit in it, and
	// a dead worker's slot comes back when it passes.
	slotMargin        = 10 * time.Second
	minConcurrentHold = 100 * time.Millisecond
	maxSteeringHold   = time.Hour
	// circuitParked is admitScript's answer for a call parked while the
	// circuit is open; it is counted and logged as holdCircuitOpen.
	circuitParked = "circuit_parked"
	// circuitParkCooldowns is how many cooldowns a parked call waits at
	// most: the probe's success wakes it long before.
	circuitParkCooldowns = 10
	// circuitWakerMargin puts the cooldown's waker back just after the
	// cooldown's end.
	circuitWakerMargin = 50 * time.Millisecond
)

// holdReasons lists every hold reason, for metrics that exist at zero.
var holdReasons = []string{holdPaused, holdCircuitOpen, holdCircuitProbe, holdConcurrency, holdFairShare, holdRate}

// admission is Steering's answer for one call: go (hold is 0), or wait
// for hold.
type admission struct {
	hold   time.Duration
	reason string
	// slot is the concurrency slot taken (release it), or "".
	slot string
	// probe is true when this call probes an open circuit.
	probe bool
	// local is true when this process admitted the call from its view of
	// the circuit (a destination with no limit).
	local bool
	// fair is the fair_by value the call's slot counts toward, or "".
	fair string
	// turnIn is how long until the call's turn under the destination's
	// rate, taken here. The worker waits for it after the claim: a task
	// is not left active and unclaimed meanwhile, which recovery would
	// take for one whose worker died.
	turnIn time.Duration
	// waits is true when turnIn counts toward the destination's
	// waiters in this process (Steering.endWait gives it back).
	waits bool
}

// destinationKeys returns the Redis keys of a destination's steering
// state; the braces keep them in one Cluster slot.
func destinationKeys(source, destination string) (prefix string) {
	return "webhookd:{dest:" + source + ":" + destination + "}:"
}

// admitScript decides the circuit and the concurrency slot of one call;
// every call admitted holds a slot (also without a limit), so the slots
// count the calls in flight. With a fair value (fair_by), a value that
// holds its share of the slots (the limit over the values active now,
// rounded up) while others are active waits ("fair_share"), and the
// waiters counted for the hold's spread are the value's own.
//
// KEYS: slots (zset: slot → expiry ms), circuit (hash: fails, last ms),
// probe (string: the probing slot), waiters (zset: job key → expiry ms);
// with a fair value also the value's slots (zset), the active values
// (zset: value → until ms) and the value's waiters (zset).
// ARGV: now ms, slot id, slot ttl ms, concurrency limit (0: none),
// failures threshold (0: no circuit), cooldown ms, job key, park ms;
// with a fair value also the value and how long a value stays active
// after its last call or wait, ms.
// Returns {reason or "ok", ms (wait or 0), waiters, probe (0/1)}, and
// when "ok" also the fair values active now (0 without one).
//
// While the circuit is open, the first call held in a cooldown waits
// for its end, to probe; every other is parked ("circuit_parked") for
// park ms: the probe's success wakes it (Steering.wake), and park bounds
// its wait should no probe come. Before parking, every held call came
// back at the cooldown's end at once, and was held again: a dead
// destination's backlog churned through the queue every cooldown and
// took the machine from the others. The circuit hash's "waker" field is
// the "last" failure whose cooldown has its call coming back.
var admitScript = redis.NewScript(`
local now, slot, ttl = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3])
local limit, threshold, cooldown, key, park = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]), ARGV[7], tonumber(ARGV[8])
local fair = #KEYS >= 7
local function hold(reason, ms)
  redis.call("ZADD", KEYS[4], now + ms + ttl, key)
  redis.call("ZREMRANGEBYSCORE", KEYS[4], "-inf", now)
  local n = redis.call("ZCARD", KEYS[4])
  if fair then
    redis.call("ZADD", KEYS[7], now + ms + ttl, key)
    redis.call("PEXPIRE", KEYS[7], ms + ttl)
    redis.call("ZREMRANGEBYSCORE", KEYS[7], "-inf", now)
    n = redis.call("ZCARD", KEYS[7])
  end
  return {reason, ms, n, 0}
end
local probe = 0
if threshold > 0 then
  local fails = tonumber(redis.call("HGET", KEYS[2], "fails") or "0")
  if fails >= threshold then
    local last = redis.call("HGET", KEYS[2], "last") or "0"
    local reopen = tonumber(last) + cooldown
    if now < reopen then
      if redis.call("HGET", KEYS[2], "waker") == last then
        return hold("circuit_parked", park)
      end
      redis.call("HSET", KEYS[2], "waker", last)
      return hold("circuit_open", reopen - now)
    end
    if not redis.call("SET", KEYS[3], slot, "NX", "PX", ttl) then
      return hold("circuit_probe", math.min(cooldown, ttl))
    end
    probe = 1
  end
end
redis.call("ZREMRANGEBYSCORE", KEYS[1], "-inf", now)
local values = 0
if fair then
  local active = tonumber(ARGV[10])
  redis.call("ZREMRANGEBYSCORE", KEYS[5], "-inf", now)
  redis.call("ZREMRANGEBYSCORE", KEYS[6], "-inf", now)
  local seen = tonumber(redis.call("ZSCORE", KEYS[6], ARGV[9]) or "0")
  if seen < now + active then redis.call("ZADD", KEYS[6], now + active, ARGV[9]) end
  redis.call("PEXPIRE", KEYS[6], ttl + active)
  values = redis.call("ZCARD", KEYS[6])
  if limit > 0 and values > 1 and redis.call("ZCARD", KEYS[5]) >= math.ceil(limit / values) then
    if probe == 1 then redis.call("DEL", KEYS[3]) end
    return hold("fair_share", 0)
  end
end
if limit > 0 and redis.call("ZCARD", KEYS[1]) >= limit then
  if probe == 1 then redis.call("DEL", KEYS[3]) end
  return hold("concurrency", 0)
end
redis.call("ZADD", KEYS[1], now + ttl, slot)
redis.call("PEXPIRE", KEYS[1], ttl)
redis.call("ZREM", KEYS[4], key)
if fair then
  redis.call("ZADD", KEYS[5], now + ttl, slot)
  redis.call("PEXPIRE", KEYS[5], ttl)
  redis.call("ZREM", KEYS[7], key)
  -- active while its call lasts; release shortens it
  local seen = tonumber(redis.call("ZSCORE", KEYS[6], ARGV[9]) or "0")
  if seen < now + ttl then redis.call("ZADD", KEYS[6], now + ttl, ARGV[9]) end
  redis.call("PEXPIRE", KEYS[6], ttl + tonumber(ARGV[10]))
end
return {"ok", 0, 0, probe, values}
`)

// releaseScript gives a call's slot back and records its outcome in the
// circuit: a success closes it, a failure counts toward opening it.
//
// KEYS: slots, circuit, probe; with a fair value also the value's slots
// and the active values. ARGV: slot id ("" for a call admitted without
// one), outcome class ("success", "failure" or "other"), now ms, failures
// threshold; with a fair value also the value and how long it stays
// active after its last call, ms. Returns {"opened", "closed" or "",
// failures in a row now}.
var releaseScript = redis.NewScript(`
local slot, class, now, threshold = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
if slot ~= "" then
  redis.call("ZREM", KEYS[1], slot)
  if redis.call("GET", KEYS[3]) == slot then redis.call("DEL", KEYS[3]) end
  if #KEYS >= 5 then
    redis.call("ZREM", KEYS[4], slot)
    redis.call("ZREMRANGEBYSCORE", KEYS[4], "-inf", now)
    if redis.call("ZCARD", KEYS[4]) == 0 then
      redis.call("ZADD", KEYS[5], "XX", now + tonumber(ARGV[6]), ARGV[5])
    end
  end
end
local fails = tonumber(redis.call("HGET", KEYS[2], "fails") or "0")
if threshold <= 0 then return {"", fails} end
if class == "success" then
  if fails > 0 then redis.call("HSET", KEYS[2], "fails", 0) end
  if fails >= threshold then return {"closed", 0} end
  return {"", 0}
elseif class == "failure" then
  redis.call("HSET", KEYS[2], "fails", fails + 1, "last", now)
  if fails + 1 == threshold then return {"opened", fails + 1} end
  return {"", fails + 1}
end
return {"", fails}
`)

// waitScript records a held caller and returns how many wait.
//
// KEYS: waiters. ARGV: now ms, job key, expiry ms.
var waitScript = redis.NewScript(`
redis.call("ZADD", KEYS[1], ARGV[3], ARGV[2])
redis.call("ZREMRANGEBYSCORE", KEYS[1], "-inf", ARGV[1])
return redis.call("ZCARD", KEYS[1])
`)

// admit decides whether a call of key to dest may go now. It returns an
// error when Redis does not answer; the caller then holds the task as for
// any failure to claim.
//
// fair, when not empty, is the call's fair_by value (fairValue): the
// destination's concurrency is shared among the values active now.
func (s *Steering) admit(ctx context.Context, source string, dest Destination, key, fair string) (admission, error) {
	if s.paused(source, dest.Name) {
		return admission{hold: jittered(pausedHold), reason: holdPaused}, nil
	}
	if dest.Concurrency <= 0 && dest.Rate == nil {
		ok, err := s.closed(ctx, source, dest)
		if err != nil {
			return admission{}, err
		}
		if ok {
			s.count(source, dest.Name, 1)
			return admission{local: true}, nil
		}
	}
	prefix := destinationKeys(source, dest.Name)
	now := s.now()
	slot := key + "/" + randomSuffix()
	ttl := dest.Timeout + slotMargin
	keys := []string{prefix + "slots", prefix + "circuit", prefix + "probe", prefix + "waiters"}
	park := min(circuitParkCooldowns*dest.Circuit.Cooldown, maxSteeringHold)
	args := []any{now.UnixMilli(), slot, ttl.Milliseconds(), dest.Concurrency, dest.Circuit.Failures,
		dest.Circuit.Cooldown.Milliseconds(), key, park.Milliseconds()}
	if fair != "" {
		keys = append(keys, fairKeys(prefix, fair)[:3]...)
		args = append(args, fair, fairActive.Milliseconds())
	}
	res, err := admitScript.Run(ctx, s.rdb, keys, args...).Slice()
	if err != nil {
		return admission{}, fmt.Errorf("error checking destination %s/%s: %w", source, dest.Name, err)
	}
	reason, _ := res[0].(string)
	ms, _ := res[1].(int64)
	waiters, _ := res[2].(int64)
	probe, _ := res[3].(int64)
	switch reason {
	case holdCircuitOpen:
		// The cooldown's waker: back when it ends, never before (it
		// would be parked).
		return admission{hold: time.Duration(ms)*time.Millisecond + circuitWakerMargin, reason: reason}, nil
	case circuitParked:
		return admission{hold: jittered(time.Duration(ms) * time.Millisecond), reason: holdCircuitOpen}, nil
	case holdCircuitProbe:
		return admission{hold: jittered(time.Duration(ms) * time.Millisecond), reason: reason}, nil
	case holdConcurrency, holdFairShare:
		// Spread the waiters over the time the slots take to turn over,
		// so they do not all come back at once.
		spread := time.Duration(float64(minConcurrentHold) * (1 + float64(waiters)/float64(dest.Concurrency)))
		return admission{hold: jittered(min(spread, maxSteeringHold)), reason: reason}, nil
	}
	adm := admission{slot: slot, probe: probe == 1, fair: fair}
	if dest.Rate == nil {
		return adm, nil
	}
	waitKey := prefix + "waiters"
	if fair != "" {
		// A value waits its turn among its own waiters; while others
		// are active it also keeps to its share of the rate.
		var values int64
		if len(res) > 4 {
			values, _ = res[4].(int64)
		}
		fk := fairKeys(prefix, fair)
		waitKey = fk[2]
		if values > 1 {
			share := *dest.Rate
			share.N = ceilDiv(share.N, int(values))
			next, ok, err := s.rateHold(ctx, source, dest, adm, fk[3], waitKey, key, share, now, ttl)
			if err != nil || !ok {
				if err == nil {
					next.reason = holdFairShare
				}
				return next, err
			}
			adm = next
		}
	}
	next, ok, err := s.rateHold(ctx, source, dest, adm, prefix+"rate", waitKey, key, *dest.Rate, now, ttl)
	if err == nil && !ok && fair != "" {
		// A value whose call waits for the rate stays active until
		// it comes back, so the others keep to their share meanwhile:
		// without it, a flood that fills every turn would never see
		// the value it starves.
		// Not kept (Redis failing): the value shares less for one hold.
		until := now.Add(next.hold + fairActive)
		_ = stayActiveScript.Run(ctx, s.rdb, []string{fairKeys(prefix, fair)[1]}, until.UnixMilli(), fair,
			(next.hold + fairActive + ttl).Milliseconds()).Err()
	}
	return next, err
}

// stayActiveScript keeps a fair_by value active until a time, never
// shortening what it or the key had.
//
// KEYS: the active values (zset: value → until ms). ARGV: until ms, the
// value, the key's time to live ms.
var stayActiveScript = redis.NewScript(`
local until = tonumber(ARGV[1])
local seen = tonumber(redis.call("ZSCORE", KEYS[1], ARGV[2]) or "0")
if seen < until then redis.call("ZADD", KEYS[1], until, ARGV[2]) end
if redis.call("PTTL", KEYS[1]) < tonumber(ARGV[3]) then redis.call("PEXPIRE", KEYS[1], ARGV[3]) end
return 0
`)

// rateHold takes the call's turn under limit at rateKey; ok when it may
// go: its turn comes within rateHorizon, and adm's turnIn says when. Else
// adm's slot is given back and the answer is a hold, spread over the time
// limit needs to let the waiters of waitKey through.
func (s *Steering) rateHold(ctx context.Context, source string, dest Destination, adm admission, rateKey, waitKey, key string,
	limit Rate, now time.Time, ttl time.Duration) (admission, bool, error) {
	interval := limit.interval()
	// A call may wait in the worker for a turn up to rateHorizon away,
	// unless enough of the destination's calls already do here: then
	// only a turn free now is taken.
	horizon := rateHorizon
	s.mu.Lock()
	if !adm.waits && s.waiting[rateWaitRef{source, dest.Name, adm.fair}] >= s.rateWaiters {
		horizon = 0
	}
	s.mu.Unlock()
	res, err := rateScript.Run(ctx, s.rdb, []string{rateKey}, interval.Microseconds(), horizon.Microseconds()).Slice()
	var reserved, waitMicros int64
	if err == nil {
		var ok1, ok2 bool
		if len(res) == 2 {
			reserved, ok1 = res[0].(int64)
			waitMicros, ok2 = res[1].(int64)
		}
		if !ok1 || !ok2 {
			err = fmt.Errorf("the rate script answered %v", res)
		}
	}
	if err != nil {
		s.release(context.WithoutCancel(ctx), source, dest, adm, outcomeOther)
		s.endWait(source, dest.Name, adm)
		return admission{}, false, fmt.Errorf("error checking destination %s/%s's rate: %w", source, dest.Name, err)
	}
	wait := time.Duration(waitMicros) * time.Microsecond
	if reserved == 1 {
		// The call's turn is its own, at most rateHorizon away: the
		// worker waits for it (a hold would come back only to the
		// second).
		adm.turnIn = max(adm.turnIn, wait)
		if wait > 0 && !adm.waits {
			adm.waits = true
			s.mu.Lock()
			s.waiting[rateWaitRef{source, dest.Name, adm.fair}]++
			s.mu.Unlock()
		}
		return adm, true, nil
	}
	s.release(context.WithoutCancel(ctx), source, dest, adm, outcomeOther)
	s.endWait(source, dest.Name, adm)
	n, err := waitScript.Run(ctx, s.rdb, []string{waitKey}, now.UnixMilli(), key,
		now.Add(wait+ttl).UnixMilli()).Int64()
	if err != nil {
		n = 1
	}
	// Each waiter takes a turn: spread them over the time the rate needs
	// to let them all through.
	spread := time.Duration(randv2.Int64N(int64(interval)*max(n, 1) + 1))
	// Back when the turn is within what it may wait for, at the
	// soonest (a hold of 0 would read as admitted).
	hold := max(wait-horizon, 0) + spread
	return admission{hold: min(max(hold, time.Millisecond), maxSteeringHold), reason: holdRate}, false, nil
}

// rateHorizon is how far ahead a call may take its turn under a
// destination's rate and wait for it in the worker; a call whose turn is
// further off is held.
const rateHorizon = time.Second

// rateScript hands out a destination's turns under its rate: each call
// takes the next free instant, one interval after the one before, so no
// period holds more than the rate and one (SPEC), whatever the number of
// workers. A turn further off than the horizon is not taken. Times are
// Redis's own, in microseconds, so processes' clocks do not matter.
//
// KEYS: rate (string: the next free instant). ARGV: interval, horizon.
// Returns {1 (taken) or 0, wait until the turn}.
var rateScript = redis.NewScript(`
local t = redis.call("TIME")
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval, horizon = tonumber(ARGV[1]), tonumber(ARGV[2])
local free = tonumber(redis.call("GET", KEYS[1]) or "0")
if free < now then free = now end
local wait = free - now
if wait > horizon then return {0, wait} end
redis.call("SET", KEYS[1], string.format("%.0f", free + interval), "PX", math.ceil((wait + interval) / 1000) + 1000)
return {1, wait}
`)

// sleep waits d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}

// ceilDiv is a / b rounded up.
func ceilDiv(a, b int) int { return (a + b - 1) / b }

// Outcome classes of a call, for the circuit.
const (
	outcomeSuccess = "success"
	outcomeFailure = "failure"
	outcomeOther   = "other"
)

// release gives back what admit took and records the call's class in
// the circuit. It returns "opened" or "closed" when the call changed the
// circuit.
func (s *Steering) release(ctx context.Context, source string, dest Destination, adm admission, class string) string {
	if adm.local {
		s.count(source, dest.Name, -1)
		// Only a failure, or a success after failures, changes the
		// circuit; a healthy destination's call asks Redis nothing.
		if class == outcomeOther || (class == outcomeSuccess && s.view(source, dest.Name).fails == 0) {
			return ""
		}
	} else if adm.slot == "" {
		return ""
	}
	prefix := destinationKeys(source, dest.Name)
	keys := []string{prefix + "slots", prefix + "circuit", prefix + "probe"}
	args := []any{adm.slot, class, s.now().UnixMilli(), dest.Circuit.Failures}
	if adm.fair != "" {
		keys = append(keys, fairKeys(prefix, adm.fair)[:2]...)
		args = append(args, adm.fair, fairActive.Milliseconds())
	}
	res, err := releaseScript.Run(ctx, s.rdb, keys, args...).Slice()
	if err != nil || len(res) != 2 {
		// A slot expires by itself with the call's timeout.
		return ""
	}
	change, _ := res[0].(string)
	fails, _ := res[1].(int64)
	s.setView(source, dest.Name, int(fails))
	return change
}

// closed reports whether dest's circuit lets a call through without
// asking Redis: it is off, or this process's view (at most circuitViewTTL
// old) has fewer failures in a row than open it. An open or probing
// circuit is decided by admitScript.
func (s *Steering) closed(ctx context.Context, source string, dest Destination) (bool, error) {
	if dest.Circuit.Failures <= 0 {
		return true, nil
	}
	v := s.view(source, dest.Name)
	if s.now().Sub(v.read) > circuitViewTTL {
		fails, err := s.rdb.HGet(ctx, destinationKeys(source, dest.Name)+"circuit", "fails").Int()
		if err != nil && !errors.Is(err, redis.Nil) {
			return false, fmt.Errorf("error reading destination %s/%s's circuit: %w", source, dest.Name, err)
		}
		s.setView(source, dest.Name, fails)
		v.fails = fails
	}
	return v.fails < dest.Circuit.Failures, nil
}

func (s *Steering) view(source, destination string) circuitView {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.views[destinationRef{source, destination}]
}

func (s *Steering) setView(source, destination string, fails int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.views[destinationRef{source, destination}] = circuitView{fails: fails, read: s.now()}
}

// count adds n to this process's calls in flight to destination.
func (s *Steering) count(source, destination string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inFlight[destinationRef{source, destination}] += n
}

// publishInFlight writes this process's calls in flight to the
// destinations it admitted locally, for State to add up across
// processes; an entry of a process that stopped publishing ages out.
func (s *Steering) publishInFlight(ctx context.Context, ttl time.Duration) {
	s.mu.Lock()
	counts := make(map[destinationRef]int, len(s.inFlight))
	for ref, n := range s.inFlight {
		counts[ref] = n
	}
	s.mu.Unlock()
	expiry := strconv.FormatInt(s.now().Add(ttl).UnixMilli(), 10)
	for ref, n := range counts {
		_ = s.rdb.HSet(ctx, destinationKeys(ref.source, ref.destination)+"procs", s.id, strconv.Itoa(n)+":"+expiry).Err()
	}
}

// jittered spreads d over [0.75d, 1.25d), so holds end apart.
func jittered(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return d*3/4 + time.Duration(randv2.Int64N(int64(d)/2+1))
}

func randomSuffix() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// DestinationState is what Steering knows of a destination now.
type DestinationState struct {
	// State is "active", "paused" or "open" (its circuit is open or
	// probing).
	State string
	// InFlight counts the calls in flight, all workers together.
	InFlight int
	// ConsecutiveFailures counts failed calls in a row.
	ConsecutiveFailures int
	// LastFailure is when the latest of them ended.
	LastFailure time.Time
	// FairValues counts the fair_by values (tenants) active now, among
	// which the concurrency is shared; 0 without fair_by.
	FairValues int
}

// State reads dest's state.
func (s *Steering) State(ctx context.Context, source string, dest Destination) (DestinationState, error) {
	prefix := destinationKeys(source, dest.Name)
	now := s.now()
	var (
		slots   *redis.IntCmd
		circuit *redis.MapStringStringCmd
		procs   *redis.MapStringStringCmd
		fair    *redis.IntCmd
	)
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		slots = p.ZCount(ctx, prefix+"slots", strconv.FormatInt(now.UnixMilli(), 10), "+inf")
		fair = p.ZCount(ctx, fairKeys(prefix, "")[1], strconv.FormatInt(now.UnixMilli(), 10), "+inf")
		circuit = p.HGetAll(ctx, prefix+"circuit")
		procs = p.HGetAll(ctx, prefix+"procs")
		return nil
	})
	if err != nil {
		return DestinationState{}, fmt.Errorf("error reading destination %s/%s: %w", source, dest.Name, err)
	}
	st := DestinationState{State: "active", InFlight: int(slots.Val()), FairValues: int(fair.Val())}
	for proc, v := range procs.Val() {
		n, expiry, _ := strings.Cut(v, ":")
		if ms, err := strconv.ParseInt(expiry, 10, 64); err != nil || ms < now.UnixMilli() {
			_ = s.rdb.HDel(ctx, prefix+"procs", proc).Err() // a process that stopped
			continue
		}
		c, _ := strconv.Atoi(n)
		st.InFlight += c
	}
	h := circuit.Val()
	st.ConsecutiveFailures, _ = strconv.Atoi(h["fails"])
	if ms, err := strconv.ParseInt(h["last"], 10, 64); err == nil {
		st.LastFailure = time.UnixMilli(ms)
	}
	switch {
	case s.paused(source, dest.Name):
		st.State = "paused"
	case dest.Circuit.Failures > 0 && st.ConsecutiveFailures >= dest.Circuit.Failures:
		st.State = "open"
	}
	return st, nil
}

// admit asks Steering whether p may be delivered to dest now. A hold is
// answered with the *RetryError Asynq is to get (a hold: no attempt, no
// retry budget spent) and logged; so is Redis failing to answer.
func (h *Handler) admit(ctx context.Context, log *slog.Logger, p DeliverPayload, dest Destination) (admission, error) {
	if h.cfg.Steering == nil {
		return admission{}, nil
	}
	adm, err := h.cfg.Steering.admit(ctx, p.Source, dest, p.Key(), h.fairValue(ctx, log, p, dest))
	if err != nil {
		log.WarnContext(ctx, "could not check the destination's limits; will retry", slog.String("error", err.Error()))
		return adm, &RetryError{Delay: h.cfg.Backoff.Delay(1), Hold: true, Reason: "steering unavailable"}
	}
	if adm.hold > 0 {
		log.InfoContext(ctx, "destination held; retrying later, not a failed attempt",
			slog.String("reason", adm.reason), slog.Duration("retry_in", adm.hold))
		h.cfg.Metrics.held(p.Source, p.Destination, adm.reason)
		return adm, &RetryError{Delay: adm.hold, Hold: true, Reason: "destination " + adm.reason}
	}
	return adm, nil
}

// steered gives back what admit took, records the call's class in the
// destination's circuit, and logs the circuit opening or closing; when it
// closes, the calls it held are woken.
func (h *Handler) steered(ctx context.Context, log *slog.Logger, p DeliverPayload, dest Destination, adm admission, res callResult) {
	if h.cfg.Steering == nil {
		return
	}
	class := outcomeOther
	switch {
	case res.called && res.outcome == dedupe.OutcomeDone:
		class = outcomeSuccess
	case res.called && res.outcome == dedupe.OutcomeRetry:
		class = outcomeFailure
	}
	ctx = context.WithoutCancel(ctx)
	switch h.cfg.Steering.release(ctx, p.Source, dest, adm, class) {
	case "opened":
		log.WarnContext(ctx, "circuit opened: the destination failed too often in a row; calls wait for the cooldown",
			slog.Int("failures", dest.Circuit.Failures), slog.Duration("cooldown", dest.Circuit.Cooldown))
	case "closed":
		log.InfoContext(ctx, "circuit closed: the probe succeeded; held calls resume")
		h.cfg.Steering.wake(ctx, p.Source, dest.Name)
	}
}
