package jobs

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/protobuf/encoding/protowire"
)

// This file is the only place that knows Asynq's private storage format.
// webhookd writes Asynq's task records itself for two reasons:
//
//   - Asynq's client enqueues one task per Redis round trip, each running
//     its own script; at thousands of events a second that was the largest
//     single cost of an acknowledgement after the HTTP exchange
//     (docs/performance.md). The relay hands tasks off in batches, one
//     script call each (enqueueBatchScript).
//   - Recovery makes sure a live task exists for every run Postgres says
//     is unsettled (ensureScript), whatever state Redis is in: missing
//     (Redis lost its data), held as active by a worker that died,
//     scheduled later than its run is due, or archived.
//
// The layout is that of asynqVerifiedVersion (internal/rdb and
// internal/base): a task is the hash asynq:{<queue>}:t:<id> with fields
// msg (the protobuf TaskMessage), state (pending, active, scheduled, retry,
// archived, completed, aggregating) and, while pending, pending_since
// (Unix ns). A pending task's id is in the list asynq:{<queue>}:pending,
// an active one's in asynq:{<queue>}:active and the zset
// asynq:{<queue>}:lease (score: lease expiry, Unix s), a scheduled,
// retrying, archived or completed one's in the zset asynq:{<queue>}:<state>.
// An existing hash means the id is taken; Asynq's own scripts keep the
// hash and the lists in step, so a missing hash means the task is nowhere.
// The braces put every key of a queue in one Redis Cluster slot.
//
// TestAsynqVersion fails when the linked Asynq differs from
// asynqVerifiedVersion, and the differential tests in
// asynqformat_test.go compare what these scripts leave with what Asynq's
// client and inspector leave. This file can go once Asynq has a batch
// enqueue and a "make sure this task id is live" operation of its own.

// asynqVerifiedVersion is the Asynq release whose format this file writes.
const asynqVerifiedVersion = "v0.26.0"

// asynqQueuesKey is Asynq's registry of queue names (base.AllQueues),
// which its Inspector, asynqmon and our queue-size metrics list. Asynq's
// client adds a queue to it once per process, so after Redis lost its
// data nothing would until every client restarted: both scripts' callers
// add it on every call.
const asynqQueuesKey = "asynq:queues"

// asynqQueueKeyPrefix is the prefix of one queue's keys.
func asynqQueueKeyPrefix(queue string) string { return "asynq:{" + queue + "}:" }

// maxTasksPerScript bounds one script call: Lua's unpack takes a few
// thousand values, and a short script keeps Redis responsive.
const maxTasksPerScript = 500

// enqueueBatchScript enqueues many tasks of one queue, as Asynq's
// enqueueCmd does one: a task whose id is taken is left as it is.
//
// KEYS[1] is the queue's pending list, KEYS[1+i] task i's hash. ARGV[1] is
// the time in Unix ns, ARGV[2i] task i's id and ARGV[2i+1] its encoded
// message. It returns how many tasks were new (for redis-cli; webhookd
// does not need it).
var enqueueBatchScript = redis.NewScript(`
local ids = {}
for i = 2, #KEYS do
  if redis.call("EXISTS", KEYS[i]) == 0 then
    redis.call("HSET", KEYS[i], "msg", ARGV[2*i-1], "state", "pending", "pending_since", ARGV[1])
    ids[#ids+1] = ARGV[2*i-2]
  end
end
if #ids > 0 then
  redis.call("LPUSH", KEYS[1], unpack(ids))
end
return #ids
`)

// ensureScript makes sure each of many tasks of one queue is live, and
// returns what it found or did for each (a taskAction):
//
//   - no hash: the task is gone (Redis lost it, or it finished after the
//     caller read Postgres): written again as Asynq's client writes it;
//     "written".
//   - active: its worker is running it, or died with it. With rescue set
//     (the caller knows from Postgres that no live worker holds the run)
//     it is moved back to the head of the pending list as Asynq's
//     requeueCmd does; "rescued". Else "active". A late Done or Retry
//     from the dead worker then fails in Asynq's own scripts (the id is no
//     longer in the active list) and changes nothing.
//   - scheduled or retry: waiting for its time. Scheduled later than
//     takeAfter (the run's due time plus slack), it is made pending now,
//     as Asynq's runTaskCmd does; "hastened". Else "waiting".
//   - archived or completed: Asynq gave up on it (the handler said the run
//     was over) but Postgres says the run is due (a replay): made pending
//     with a fresh message; "revived".
//   - pending or aggregating: left as it is; "pending".
//
// KEYS[1..7] are the queue's pending list, active list, lease zset and
// retry, scheduled, archived and completed zsets; KEYS[7+i] is task i's
// hash. ARGV[1] is the time in Unix ns; ARGV[4i-2..4i+1] are task i's id,
// encoded message, rescue flag ("1" or "0") and takeAfter (Unix s).
var ensureScript = redis.NewScript(`
local out = {}
for i = 1, #KEYS - 7 do
  local key = KEYS[7+i]
  local id, msg, rescue, takeAfter = ARGV[4*i-2], ARGV[4*i-1], ARGV[4*i], tonumber(ARGV[4*i+1])
  local state = redis.call("HGET", key, "state")
  local action = "pending"
  if not state then
    redis.call("HSET", key, "msg", msg, "state", "pending", "pending_since", ARGV[1])
    redis.call("LPUSH", KEYS[1], id)
    action = "written"
  elseif state == "active" then
    if rescue == "1" then
      redis.call("LREM", KEYS[2], 0, id)
      redis.call("ZREM", KEYS[3], id)
      redis.call("RPUSH", KEYS[1], id)
      redis.call("HSET", key, "state", "pending", "pending_since", ARGV[1])
      action = "rescued"
    else
      action = "active"
    end
  elseif state == "retry" or state == "scheduled" then
    local zset = KEYS[4]
    if state == "scheduled" then zset = KEYS[5] end
    local at = redis.call("ZSCORE", zset, id)
    if not at or tonumber(at) > takeAfter then
      redis.call("ZREM", zset, id)
      redis.call("LPUSH", KEYS[1], id)
      redis.call("HSET", key, "state", "pending", "pending_since", ARGV[1])
      action = "hastened"
    else
      action = "waiting"
    end
  elseif state == "archived" or state == "completed" then
    local zset = KEYS[6]
    if state == "completed" then zset = KEYS[7] end
    redis.call("ZREM", zset, id)
    redis.call("LPUSH", KEYS[1], id)
    redis.call("HSET", key, "msg", msg, "state", "pending", "pending_since", ARGV[1])
    action = "revived"
  end
  out[i] = action
end
return out
`)

// taskStatesScript reads the Asynq state of many tasks of one queue,
// changing nothing: "" for a task Redis does not hold.
//
// KEYS[i] is task i's hash.
var taskStatesScript = redis.NewScript(`
local out = {}
for i = 1, #KEYS do
  out[i] = redis.call("HGET", KEYS[i], "state") or ""
end
return out
`)

// wakeScript makes tasks waiting in the queue's retry zset pending now,
// as Asynq's runTaskCmd does; a task no longer there is skipped.
//
// KEYS[1] is the retry zset, KEYS[2] the pending list, KEYS[2+i] task i's
// hash. ARGV[1] is the time in Unix ns, ARGV[1+i] task i's id. It returns
// how many it woke.
var wakeScript = redis.NewScript(`
local n = 0
for i = 3, #KEYS do
  local id = ARGV[i-1]
  if redis.call("ZREM", KEYS[1], id) == 1 then
    redis.call("LPUSH", KEYS[2], id)
    redis.call("HSET", KEYS[i], "state", "pending", "pending_since", ARGV[1])
    n = n + 1
  end
end
return n
`)

// WakeKeys makes the tasks of keys that wait in their queue's retry set
// run now (the events of an entity that waited behind one that just
// settled, fifo), and returns how many it woke. A task not waiting there
// is left alone.
func (e *Enqueuer) WakeKeys(ctx context.Context, keys []string) (int, error) {
	byQueue := map[string][]string{}
	for _, k := range keys {
		q := e.shards.Of(k)
		byQueue[q] = append(byQueue[q], k)
	}
	woke := 0
	for queue, ids := range byQueue {
		prefix := asynqQueueKeyPrefix(queue)
		for len(ids) > 0 {
			batch := ids[:min(len(ids), maxTasksPerScript)]
			ids = ids[len(batch):]
			rkeys := []string{prefix + "retry", prefix + "pending"}
			args := []any{strconv.FormatInt(time.Now().UnixNano(), 10)}
			for _, id := range batch {
				rkeys = append(rkeys, prefix+"t:"+id)
				args = append(args, id)
			}
			res, err := e.runScript(ctx, queue, wakeScript, rkeys, args)
			if err != nil {
				return woke, fmt.Errorf("error waking tasks: %w", err)
			}
			n, _ := res.Int()
			woke += n
		}
	}
	return woke, nil
}

// Wake makes every task of destination waiting in a retry set run now
// (held while the destination was paused or its circuit open), in every
// queue a worker serves (the destination's keys hash to every shard),
// and returns how many it woke.
func (e *Enqueuer) Wake(ctx context.Context, source, destination string) (int, error) {
	queues, err := e.shards.ServedQueues(e.rdb)
	if err != nil {
		return 0, fmt.Errorf("error waking destination %s/%s: %w", source, destination, err)
	}
	woke := 0
	for _, queue := range queues {
		n, err := e.wakeQueue(ctx, queue, source, destination)
		woke += n
		if err != nil {
			return woke, fmt.Errorf("error waking destination %s/%s: %w", source, destination, err)
		}
	}
	return woke, nil
}

// wakeQueue wakes destination's tasks in one queue's retry set.
func (e *Enqueuer) wakeQueue(ctx context.Context, queue, source, destination string) (int, error) {
	prefix := asynqQueueKeyPrefix(queue)
	match := globEscaper.Replace(KeyPrefix(source, destination)) + "*"
	woke := 0
	var cursor uint64
	for {
		ids, next, err := e.rdb.ZScan(ctx, prefix+"retry", cursor, match, maxTasksPerScript).Result()
		if err != nil {
			return woke, err
		}
		keys := []string{prefix + "retry", prefix + "pending"}
		args := []any{strconv.FormatInt(time.Now().UnixNano(), 10)}
		for i := 0; i < len(ids); i += 2 { // member, score
			keys = append(keys, prefix+"t:"+ids[i])
			args = append(args, ids[i])
		}
		if len(keys) > 2 {
			res, err := e.runScript(ctx, queue, wakeScript, keys, args)
			if err != nil {
				return woke, err
			}
			n, _ := res.Int()
			woke += n
		}
		if next == 0 {
			return woke, nil
		}
		cursor = next
	}
}

// globEscaper escapes Redis glob characters in a literal prefix.
var globEscaper = strings.NewReplacer(`\`, `\\`, "*", `\*`, "?", `\?`, "[", `\[`, "]", `\]`)

// taskAction is what ensureScript found or did for one task.
type taskAction string

const (
	taskPending taskAction = "pending"
	taskWaiting taskAction = "waiting"
	taskActive  taskAction = "active"
	taskWritten taskAction = "written"
	// taskHandedOff is taskWritten for an event the relay never enqueued:
	// recovery's routine hand-off, not a task Redis lost (the reconciler
	// tells them apart; the script writes both).
	taskHandedOff taskAction = "handed_off"
	taskRescued   taskAction = "rescued"
	taskHastened  taskAction = "hastened"
	taskRevived   taskAction = "revived"
)

// taskActions lists every taskAction, for metrics that exist at zero.
var taskActions = []taskAction{taskPending, taskWaiting, taskActive, taskWritten, taskHandedOff, taskRescued, taskHastened, taskRevived}

// writeTasks enqueues the tasks whose ids are not taken, one script call
// per queue (shard) and 500 tasks: a script's keys are all of one queue,
// so one Redis Cluster slot. A task whose id is taken is left as it is,
// as Asynq's client does (it answers ErrTaskIDConflict). On error some
// of the tasks may have been written; writing them again is a no-op.
func (e *Enqueuer) writeTasks(ctx context.Context, tasks []deliverTask) error {
	for _, group := range byQueue(tasks, func(t deliverTask) string { return t.queue }) {
		prefix := asynqQueueKeyPrefix(group.queue)
		for chunk := range slices.Chunk(group.items, maxTasksPerScript) {
			keys := make([]string, 1, len(chunk)+1)
			keys[0] = prefix + "pending"
			args := make([]any, 1, 2*len(chunk)+1)
			args[0] = strconv.FormatInt(time.Now().UnixNano(), 10)
			for _, i := range chunk {
				t := tasks[i]
				keys = append(keys, prefix+"t:"+t.id)
				args = append(args, t.id, encodeTask(t))
			}
			if _, err := e.runScript(ctx, group.queue, enqueueBatchScript, keys, args); err != nil {
				return fmt.Errorf("error writing %d tasks to queue %s: %w", len(chunk), group.queue, err)
			}
		}
	}
	return nil
}

// queueGroup is the indexes of the items that go to one queue, in order.
type queueGroup struct {
	queue string
	items []int
}

// byQueue groups the indexes of items by their queue, queues in the
// order they first appear.
func byQueue[T any](items []T, queueOf func(T) string) []queueGroup {
	var groups []queueGroup
	at := map[string]int{}
	for i, it := range items {
		q := queueOf(it)
		g, ok := at[q]
		if !ok {
			g = len(groups)
			at[q] = g
			groups = append(groups, queueGroup{queue: q})
		}
		groups[g].items = append(groups[g].items, i)
	}
	return groups
}

// ensureRequest asks ensureScript to make sure one task is live.
type ensureRequest struct {
	task deliverTask
	// rescue moves an active task back to pending: Postgres says no live
	// worker holds its run.
	rescue bool
	// takeAfter makes a task scheduled later than this pending now.
	takeAfter time.Time
}

// ensureTasks makes sure each task is live in its own queue (its key's
// shard; ensureScript, one call per queue and 500 tasks) and returns
// what it found or did for each, in the order of reqs. On error the
// tasks it did not get to are left "" (unchecked).
func (e *Enqueuer) ensureTasks(ctx context.Context, reqs []ensureRequest) ([]taskAction, error) {
	out := make([]taskAction, len(reqs))
	for _, group := range byQueue(reqs, func(r ensureRequest) string { return r.task.queue }) {
		prefix := asynqQueueKeyPrefix(group.queue)
		for chunk := range slices.Chunk(group.items, maxTasksPerScript) {
			keys := make([]string, 7, len(chunk)+7)
			for i, name := range []string{"pending", "active", "lease", "retry", "scheduled", "archived", "completed"} {
				keys[i] = prefix + name
			}
			args := make([]any, 1, 4*len(chunk)+1)
			args[0] = strconv.FormatInt(time.Now().UnixNano(), 10)
			for _, i := range chunk {
				r := reqs[i]
				keys = append(keys, prefix+"t:"+r.task.id)
				rescue := "0"
				if r.rescue {
					rescue = "1"
				}
				args = append(args, r.task.id, encodeTask(r.task), rescue, strconv.FormatInt(r.takeAfter.Unix(), 10))
			}
			actions, err := e.runScriptPerTask(ctx, group.queue, ensureScript, keys, args, len(chunk))
			if err != nil {
				return out, fmt.Errorf("error checking %d tasks in queue %s: %w", len(chunk), group.queue, err)
			}
			for j, i := range chunk {
				out[i] = taskAction(actions[j])
			}
		}
	}
	return out, nil
}

// taskStates returns the Asynq state of the task of each id (a job key)
// in its key's shard, "" for one Redis does not hold: one script call
// per queue and 500 tasks.
func (e *Enqueuer) taskStates(ctx context.Context, ids []string) ([]string, error) {
	out := make([]string, len(ids))
	for _, group := range byQueue(ids, e.shards.Of) {
		prefix := asynqQueueKeyPrefix(group.queue)
		for chunk := range slices.Chunk(group.items, maxTasksPerScript) {
			keys := make([]string, len(chunk))
			for j, i := range chunk {
				keys[j] = prefix + "t:" + ids[i]
			}
			states, err := e.runScriptPerTask(ctx, group.queue, taskStatesScript, keys, nil, len(chunk))
			if err != nil {
				return out, fmt.Errorf("error reading %d tasks in queue %s: %w", len(chunk), group.queue, err)
			}
			for j, i := range chunk {
				out[i] = states[j]
			}
		}
	}
	return out, nil
}

// runScriptPerTask runs a script that answers one string per task of
// the call (tasks of them) and returns the answers.
func (e *Enqueuer) runScriptPerTask(ctx context.Context, queue string, script *redis.Script, keys []string, args []any, tasks int) ([]string, error) {
	res, err := e.runScript(ctx, queue, script, keys, args)
	if err != nil {
		return nil, err
	}
	answers, err := res.StringSlice()
	if err != nil || len(answers) != tasks {
		return nil, fmt.Errorf("unexpected answer %v", res.Val())
	}
	return answers, nil
}

// runScript runs script on queue's keys once, with the queue registered
// in the same round trip (Asynq's client registers a queue before its
// first enqueue; doing it every time registers it again after Redis lost
// its data), falling back to sending the script's body when Redis does
// not have it cached. On a Redis Cluster the registry and the queue's
// keys live in different slots: go-redis's cluster client splits the
// pipeline by node, and the script's own keys share the queue's slot.
func (e *Enqueuer) runScript(ctx context.Context, queue string, script *redis.Script, keys []string, args []any) (*redis.Cmd, error) {
	var run *redis.Cmd
	_, err := e.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.SAdd(ctx, asynqQueuesKey, queue)
		run = script.EvalSha(ctx, p, keys, args...)
		return nil
	})
	if err != nil && redis.HasErrorPrefix(run.Err(), "NOSCRIPT") {
		run = script.Run(ctx, e.rdb, keys, args...)
		err = run.Err()
	}
	if err != nil {
		return nil, err
	}
	return run, nil
}

// encodeTask encodes t's Asynq TaskMessage for its queue.
func encodeTask(t deliverTask) []byte {
	return encodeTaskMessage(TypeDeliver, t.payload, t.id, t.queue, maxTaskRetry, t.timeout)
}

// encodeTaskMessage encodes Asynq's TaskMessage (internal/proto/asynq.proto)
// for a task enqueued now: type, payload, id, queue, retry limit and
// timeout in seconds; no deadline, uniqueness, group or retention, and the
// counters a new task has at zero, which protobuf leaves out.
func encodeTaskMessage(typ string, payload []byte, id, queue string, retry int, timeout time.Duration) []byte {
	b := make([]byte, 0, 32+len(typ)+len(payload)+len(id)+len(queue))
	b = protowire.AppendTag(b, 1, protowire.BytesType)
	b = protowire.AppendString(b, typ)
	if len(payload) > 0 {
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		b = protowire.AppendBytes(b, payload)
	}
	b = protowire.AppendTag(b, 3, protowire.BytesType)
	b = protowire.AppendString(b, id)
	b = protowire.AppendTag(b, 4, protowire.BytesType)
	b = protowire.AppendString(b, queue)
	if retry != 0 {
		b = protowire.AppendTag(b, 5, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(int64(int32(retry))))
	}
	if secs := int64(timeout.Seconds()); secs != 0 {
		b = protowire.AppendTag(b, 8, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(secs))
	}
	return b
}
