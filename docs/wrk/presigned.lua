-- wrk script: send the presigned requests `webhookd-bench --write-requests FILE`
-- wrote, each thread its own share, each request once.
--
--   wrk -t2 -c64 -d15s -s docs/wrk/presigned.lua http://127.0.0.1:PORT -- FILE 2
--
-- Arguments after "--": the file and the thread count (the same as -t). wrk's
-- Lua has no HMAC, hence presigning; send them within the scheme's timestamp
-- tolerance (5 minutes for most). A thread that runs out of its share starts
-- it again: those repeats are answered as duplicates (200), and done() counts
-- them ("repeats"), so a run with repeats > 0 needs more requests.
--
-- The file (loadgen.WriteRequests): raw HTTP/1.1 requests back to back, then
-- n+1 offsets (16 digits and a newline each), then a footer line
-- "webhookd-presigned <n> <table offset>" (16 digits each). A thread reads
-- only its share's offsets and bytes.
--
-- done() prints one line of JSON: requests, duration_s, rps, latency_ms
-- (p50, p90, p99, max), non2xx (answers with status >= 400, wrk's count;
-- the gateway answers no 1xx or 3xx), socket errors and repeats.

local threads = {}
local next_id = 0

function setup(thread)
  thread:set("id", next_id)
  next_id = next_id + 1
  table.insert(threads, thread)
end

local footer_len = #"webhookd-presigned " + 16 + 1 + 16 + 1
local line_len = 17
local chunk_size = 1024

local f, offsets, count   -- the file, the share's offsets, the share's size
local reqs, i, loaded = {}, 0, 0
local next_k, wrapped = 0, false
repeats = 0

-- offset returns where request k of the share starts (k = count: where it ends).
local function offset(k)
  return tonumber(offsets:sub(k * line_len + 1, k * line_len + 16))
end

function init(args)
  local file, nthreads = args[1], tonumber(args[2])
  if not file or not nthreads or nthreads < 1 then
    error("usage: wrk ... -s presigned.lua URL -- FILE THREADS")
  end
  f = assert(io.open(file, "rb"))
  f:seek("end", -footer_len)
  local footer = f:read(footer_len)
  local n, table_at = footer:match("^webhookd%-presigned (%d+) (%d+)\n$")
  if not n then
    error(file .. " is not a file of presigned requests (webhookd-bench --write-requests)")
  end
  n, table_at = tonumber(n), tonumber(table_at)
  local from = math.floor(id * n / nthreads)
  local to = math.floor((id + 1) * n / nthreads)
  if to <= from then
    error("thread " .. id .. " has no requests: write more than " .. n)
  end
  count = to - from
  f:seek("set", table_at + from * line_len)
  offsets = f:read((count + 1) * line_len)
end

-- load reads the next chunk of the share with one read, so starting a
-- thread costs nothing and reading is spread over the run (the thread's
-- first requests would otherwise go out while the next thread loads).
local function load()
  if next_k >= count then
    next_k, wrapped = 0, true
  end
  local m = math.min(chunk_size, count - next_k)
  local base = offset(next_k)
  f:seek("set", base)
  local bytes = f:read(offset(next_k + m) - base)
  for k = 1, m do
    reqs[k] = bytes:sub(offset(next_k + k - 1) - base + 1, offset(next_k + k) - base)
  end
  next_k, loaded, i = next_k + m, m, 0
end

function request()
  if i >= loaded then
    load()
  end
  i = i + 1
  if wrapped then
    repeats = repeats + 1
  end
  return reqs[i]
end

function done(summary, latency, requests)
  local reps = 0
  for _, t in ipairs(threads) do
    reps = reps + (t:get("repeats") or 0)
  end
  local e = summary.errors
  local secs = summary.duration / 1e6
  io.write(string.format(
    '{"requests":%d,"duration_s":%.3f,"rps":%.1f,' ..
    '"latency_ms":{"p50":%.3f,"p90":%.3f,"p99":%.3f,"max":%.3f},' ..
    '"non2xx":%d,"socket_errors":{"connect":%d,"read":%d,"write":%d,"timeout":%d},"repeats":%d}\n',
    summary.requests, secs, summary.requests / secs,
    latency:percentile(50) / 1000, latency:percentile(90) / 1000, latency:percentile(99) / 1000, latency.max / 1000,
    e.status, e.connect, e.read, e.write, e.timeout, reps))
end
