package jobs

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/protobuf/encoding/protowire"
)

// Asynq's client enqueues one task per Redis round trip, each running its
// own script: at thousands of events a second that was the largest single
// cost of an acknowledgement after the HTTP exchange itself (about 25 µs
// in this process and 28 µs in Redis per task; docs/performance.md). The
// relay hands tasks off in batches, so Enqueuer.writeTasks writes a batch
// the way Asynq's client writes one task — the same keys, fields and
// encoded message, checked against Asynq's own writes by
// TestEnqueueEventsMatchesAsynq — in one script call.
//
// The layout is Asynq v0.26's (internal/rdb.enqueueCmd and
// internal/base): a task is the hash asynq:{<queue>}:t:<id> with fields
// msg (the protobuf TaskMessage), state "pending" and pending_since (Unix
// ns), and its id is pushed on the list asynq:{<queue>}:pending; an
// existing hash means the id is taken (pending, active, retrying, archived
// or completed) and nothing is written.

// enqueueBatchScript enqueues many tasks of one queue.
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

// asynqQueueKeyPrefix is Asynq's key prefix of one queue's keys; the
// braces make every key of the queue hash to one Redis Cluster slot.
func asynqQueueKeyPrefix(queue string) string { return "asynq:{" + queue + "}:" }

// maxTasksPerScript bounds one script call: Lua's unpack takes a few
// thousand values, and a short script keeps Redis responsive.
const maxTasksPerScript = 500

// writeTasks enqueues the tasks whose ids are not taken. A task whose id
// is taken is left as it is, as Asynq's client does (it answers
// ErrTaskIDConflict). On error some of the tasks may have been written;
// writing them again is a no-op.
func (e *Enqueuer) writeTasks(ctx context.Context, tasks []deliverTask) error {
	prefix := asynqQueueKeyPrefix(e.queue)
	for len(tasks) > 0 {
		chunk := tasks[:min(len(tasks), maxTasksPerScript)]
		tasks = tasks[len(chunk):]
		keys := make([]string, 1, len(chunk)+1)
		keys[0] = prefix + "pending"
		args := make([]any, 1, 2*len(chunk)+1)
		args[0] = strconv.FormatInt(time.Now().UnixNano(), 10)
		for _, t := range chunk {
			keys = append(keys, prefix+"t:"+t.id)
			args = append(args, t.id, encodeTaskMessage(TypeDeliver, t.payload, t.id, e.queue, maxTaskRetry, t.timeout))
		}
		// The queue is registered in the same round trip, as Asynq's
		// client registers it before its first enqueue; doing it every
		// time also registers it again after Redis lost its data.
		var run *redis.Cmd
		_, err := e.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			p.SAdd(ctx, asynqQueuesKey, e.queue)
			run = enqueueBatchScript.EvalSha(ctx, p, keys, args...)
			return nil
		})
		if err != nil && redis.HasErrorPrefix(run.Err(), "NOSCRIPT") {
			err = enqueueBatchScript.Run(ctx, e.rdb, keys, args...).Err()
		}
		if err != nil {
			return fmt.Errorf("error writing %d tasks to queue %s: %w", len(chunk), e.queue, err)
		}
	}
	return nil
}

// encodeTaskMessage encodes Asynq's TaskMessage (internal/proto/asynq.proto
// in asynq v0.26) for a task enqueued now: type, payload, id, queue, retry
// limit and timeout in seconds; no deadline, uniqueness, group or
// retention, and the counters a new task has at zero, which protobuf leaves
// out.
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
