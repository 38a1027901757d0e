#!/usr/bin/env bash
# The runs behind docs/scaling.md: webhookd's own processes (one gateway,
# one or two workers) on one Redis or on a 3-node Redis Cluster with
# queue_shards 1 or 4, each configuration RUNS times, alternated:
#
#   end to end: webhookd-bench --target sends for DURATION at CONCURRENCY
#     with the workers running (acks/s, latency, delivered/s);
#   drain: the same with no worker running (the backlog waits in Redis),
#     then the workers start and the time until every run is done gives
#     the delivery tier's rate on its own.
#
# Needs Postgres on 127.0.0.1:5432 (user postgres, trust), redis-server,
# redis-cli, psql, curl and jq.
#
#   bash docs/scaling-bench.sh     # DURATION=10s RUNS=2 CONCURRENCY=32 MODES="e2e drain"
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${DURATION:-10s}
RUNS=${RUNS:-2}
CONCURRENCY=${CONCURRENCY:-32}
MODES=${MODES:-e2e drain}
work=$(mktemp -d)
pids=()
stop_all() { for p in "${pids[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done; for p in "${pids[@]:-}"; do [ -n "$p" ] && wait "$p" 2>/dev/null || true; done; pids=(); }
trap 'stop_all; rm -rf "$work"' EXIT

go build -o "$work/webhookd" ./cmd/webhookd
go build -o "$work/bench" ./bench/cmd/webhookd-bench
secret=whsec_webhookd_bench_secret
db=postgres://postgres@127.0.0.1:5432/webhookd_scale?sslmode=disable

# Redis: one server on 7100, a cluster on 7101-7103 (bus ports 17101-17103).
redis-server --port 7100 --bind 127.0.0.1 --save "" --appendonly no --daemonize no >"$work/redis.log" 2>&1 & single_pid=$!
for p in 7101 7102 7103; do
  redis-server --port $p --cluster-port $((p + 10000)) --bind 127.0.0.1 --cluster-enabled yes \
    --cluster-config-file "$work/nodes-$p.conf" --dir "$work" --save "" --appendonly no --daemonize no >"$work/redis-$p.log" 2>&1 &
  cluster_pids+=($!)
done
sleep 1
redis-cli --cluster create 127.0.0.1:7101 127.0.0.1:7102 127.0.0.1:7103 --cluster-replicas 0 --cluster-yes >/dev/null
sleep 2
"$work/webhookd" sink --listen 127.0.0.1:9100 >/dev/null 2>&1 & sink=$!
trap 'stop_all; kill $single_pid "${cluster_pids[@]}" $sink 2>/dev/null || true; rm -rf "$work"' EXIT

# cpu prints each cluster node's Redis CPU seconds (user + sys) so far.
cpu() { for p in 7101 7102 7103; do redis-cli -p $p info cpu | awk -F: '/used_cpu_(user|sys):/{s+=$2} END{printf "%.2f ", s}'; done; }

run() { # mode name redis-yaml shards workers
  local mode=$1 name=$2 redis=$3 shards=$4 workers=$5
  psql -q -h 127.0.0.1 -U postgres -d postgres -c "DROP DATABASE IF EXISTS webhookd_scale WITH (FORCE)" -c "CREATE DATABASE webhookd_scale"
  redis-cli -p 7100 flushall >/dev/null
  for p in 7101 7102 7103; do redis-cli -p $p flushall >/dev/null; done
  cat >"$work/cfg.yaml" <<CFG
database_url: $db
$redis
queue_shards: $shards
log_level: warn
sources:
  - name: bench
    verify: {scheme: stripe, secrets: ["$secret"]}
    destinations:
      - {name: sink, url: "http://127.0.0.1:9100/hook"}
CFG
  WEBHOOKD_LISTEN=127.0.0.1:9200 "$work/webhookd" gateway --config "$work/cfg.yaml" >"$work/gw.log" 2>&1 & pids+=($!)
  if [ "$mode" = e2e ]; then
    for i in $(seq 1 "$workers"); do
      WEBHOOKD_LISTEN=127.0.0.1:$((9200 + i)) "$work/webhookd" worker --config "$work/cfg.yaml" >"$work/w$i.log" 2>&1 & pids+=($!)
    done
  fi
  for _ in $(seq 1 100); do curl -sf localhost:9200/readyz >/dev/null && break; sleep 0.1; done
  sleep 1
  if [ "$mode" = drain ]; then
    "$work/bench" --target http://127.0.0.1:9200 --source bench --scheme stripe --secret "$secret" \
      --duration "$DURATION" -c "$CONCURRENCY" --json --no-progress >"$work/out.json" || true
    local n; n=$(psql -qtA -h 127.0.0.1 -U postgres -d webhookd_scale -c "SELECT count(*) FROM events")
    local t0; t0=$(date +%s.%N)
    for i in $(seq 1 "$workers"); do
      WEBHOOKD_LISTEN=127.0.0.1:$((9200 + i)) "$work/webhookd" worker --config "$work/cfg.yaml" >"$work/w$i.log" 2>&1 & pids+=($!)
    done
    until [ "$(psql -qtA -h 127.0.0.1 -U postgres -d webhookd_scale -c "SELECT count(*) FROM job_runs WHERE status = 'done'")" -ge "$n" ]; do sleep 0.1; done
    local t1; t1=$(date +%s.%N)
    printf '%s\t%s\t%.0f\t%.2f\t%s\n' "$name" "$n" "$(echo "$n / ($t1 - $t0)" | bc -l)" "$(echo "$t1 - $t0" | bc -l)" "$(cut -d' ' -f1-3 /proc/loadavg)"
    stop_all
    return
  fi
  local before; before=$(cpu)
  "$work/bench" --target http://127.0.0.1:9200 --source bench --scheme stripe --secret "$secret" \
    --database-url "$db" --sink-url http://127.0.0.1:9100 --duration "$DURATION" -c "$CONCURRENCY" --json --no-progress >"$work/out.json" || true
  local after; after=$(cpu)
  local nodes; nodes=$(paste <(echo "$before" | tr ' ' '\n') <(echo "$after" | tr ' ' '\n') | awk 'NF==2{printf "%.1f/", $2-$1}')
  jq -r --arg n "$name" --arg c "${nodes%/}" '[$n, (.ack_rate|floor), .latency_ms.p50, .latency_ms.p99, (.end_to_end.rate|floor), .end_to_end.drain_seconds, .check.passed, $c, .load_before] | @tsv' "$work/out.json"
  stop_all
}

single="redis_url: redis://127.0.0.1:7100/0"
cluster="redis_cluster: {addrs: [127.0.0.1:7101, 127.0.0.1:7102, 127.0.0.1:7103]}"
configs() { # mode
  run "$1" "redis, 1 worker" "$single" 1 1
  run "$1" "redis, 2 workers" "$single" 1 2
  run "$1" "cluster, shards 1, 2 workers" "$cluster" 1 2
  run "$1" "cluster, shards 4, 2 workers" "$cluster" 4 2
}
case " $MODES " in *" e2e "*)
echo "== end to end"
printf 'config\tacks/s\tp50 ms\tp99 ms\tdelivered/s\tdrain s\texactly once\tcluster nodes CPU s\tload before\n'
for _ in $(seq 1 "$RUNS"); do configs e2e; done
;; esac
case " $MODES " in *" drain "*)
echo "== drain (delivery tier alone)"
printf 'config\tevents\tdelivered/s\tseconds\tload after\n'
for _ in $(seq 1 "$RUNS"); do configs drain; done
;; esac
