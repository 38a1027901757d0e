#!/usr/bin/env bash
# Ack rate of webhookd against the naive path (issue 16), with wrk as the
# generator so its cost stays out of the server's process: for each round,
# webhookd then the naive ingest, each started alone by
# `webhookd-bench --serve` (a fresh database, no generator inside), loaded by
#
#   wrk -t$THREADS -c$CONNECTIONS -d$DURATION -s docs/wrk/presigned.lua
#
# with requests presigned for the round (`webhookd-bench --write-requests`),
# then stopped. Each run leaves one JSON file in OUTDIR,
# NN-ack<C>-wrk-<mode>.json: the server's report (acks from the database, CPU
# by process), labelled ack<C>-wrk/<mode> for bench/plots, with wrk's summary
# (docs/wrk/presigned.lua's done(), plus wrk's own CPU) under "wrk". A table
# with the ratio per round closes the output.
#
# Needs: Go, wrk (Debian: apt-get install -y wrk), jq, psql, and Postgres on
# 127.0.0.1:5432 (user postgres, trust) and Redis on 127.0.0.1:6379.
#
#   bash docs/ack-compare.sh [-r ROUNDS] [-b WEBHOOKD_BENCH_BINARY] OUTDIR
#   ROUNDS=3 DURATION=15s THREADS=2 CONNECTIONS=64 REQUESTS=225000 BENCH_FLAGS=--no-worker bash docs/ack-compare.sh OUTDIR
#
# Without -b it builds ./bench/cmd/webhookd-bench from this tree.
#
# REQUESTS must cover DURATION at the fastest rate (each request is sent
# once; wrk's "repeats" counts those sent again, which then answer as
# duplicates). The database (DATABASE) and queue (QUEUE) are the script's
# own; the bench drops and deletes them at the end of each run.
set -euo pipefail

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-15s}
THREADS=${THREADS:-2}
CONNECTIONS=${CONNECTIONS:-64}
REQUESTS=${REQUESTS:-225000}
BENCH_FLAGS=${BENCH_FLAGS:---no-worker}
PORT=${PORT:-18080}
DATABASE=${DATABASE:-webhookd_bench_wrk}
QUEUE=${QUEUE:-bench-wrk}
bench=""
while getopts "r:b:" opt; do
  case $opt in
  r) ROUNDS=$OPTARG ;;
  b) bench=$OPTARG ;;
  *) exit 2 ;;
  esac
done
shift $((OPTIND - 1))
outdir=${1:?usage: docs/ack-compare.sh [-r ROUNDS] [-b WEBHOOKD_BENCH_BINARY] OUTDIR}
mkdir -p "$outdir"
outdir=$(cd "$outdir" && pwd)
[ -z "$bench" ] || bench=$(realpath "$bench")
cd "$(dirname "$0")/.."

if ! command -v wrk >/dev/null; then
  echo "ack-compare: wrk is missing (Debian: apt-get install -y wrk)" >&2
  exit 1
fi
for tool in go jq psql; do
  command -v "$tool" >/dev/null || { echo "ack-compare: $tool is missing" >&2; exit 1; }
done
work=$(mktemp -d)
server=""
cleanup() {
  if [ -n "$server" ] && kill -0 "$server" 2>/dev/null; then
    kill "$server" 2>/dev/null || true
    wait "$server" 2>/dev/null || true
  fi
  # The bench drops its database when it ends; this covers one that was killed.
  psql -q -h 127.0.0.1 -U postgres -d postgres -c "DROP DATABASE IF EXISTS $DATABASE WITH (FORCE)" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

if [ -z "$bench" ]; then
  go build -o "$work/bench" ./bench/cmd/webhookd-bench
  bench=$work/bench
fi
bench_db=postgres://postgres@127.0.0.1:5432/$DATABASE

# Runs continue the numbering of what OUTDIR already holds.
n=$(find "$outdir" -maxdepth 1 -name '[0-9][0-9]-*' -printf '%f\n' | cut -c1-2 | sort -n | tail -1)
n=$((10#${n:-0}))

# run MODE REQUESTS_FILE: one server-only run loaded by wrk; sets name.
name=""
run() {
  local mode=$1 file=$2 flags=()
  n=$((n + 1))
  name=$(printf '%02d-ack%s-wrk-%s' "$n" "$CONNECTIONS" "$mode")
  local label=ack$CONNECTIONS-wrk/$mode
  [ "$mode" = naive ] && flags+=(--naive)
  # shellcheck disable=SC2086 # BENCH_FLAGS is a list of flags
  "$bench" --serve "127.0.0.1:$PORT" $BENCH_FLAGS "${flags[@]}" --json --no-progress --log-level warn \
    --label "$label" --queue "$QUEUE" --database-url "$bench_db" >"$work/server.json" 2>"$work/server.err" &
  server=$!
  local waited=0
  until grep -q '^ready:' "$work/server.err"; do
    if ! kill -0 "$server" 2>/dev/null || [ $waited -ge 600 ]; then
      echo "ack-compare: the $mode server did not become ready:" >&2
      cat "$work/server.err" >&2
      return 1
    fi
    sleep 0.1
    waited=$((waited + 1))
  done
  # wrk's own CPU (user + system seconds) goes into its summary: what the generator cost.
  local TIMEFORMAT='%U %S'
  { time wrk -t"$THREADS" -c"$CONNECTIONS" -d"$DURATION" -s docs/wrk/presigned.lua "http://127.0.0.1:$PORT" -- "$file" "$THREADS" \
    >"$work/wrk.out" 2>"$work/wrk.err"; } 2>"$work/wrk.time"
  grep '^{' "$work/wrk.out" | tail -1 |
    jq -c --argjson cpu "$(awk '{ print $1 + $2 }' "$work/wrk.time")" \
      '. + {generator_cpu_s: $cpu, generator_us_per_request: (if .requests > 0 then $cpu * 1e6 / .requests else 0 end)}' >"$work/wrk.json"
  # The server sees the connections close, reports and exits (after draining the queue when a worker runs).
  waited=0
  while kill -0 "$server" 2>/dev/null; do
    if [ $waited -ge 3000 ]; then
      echo "ack-compare: the $mode server did not finish within 300 s; stopping it" >&2
      kill "$server" 2>/dev/null || true
      break
    fi
    sleep 0.1
    waited=$((waited + 1))
  done
  local rc=0
  wait "$server" || rc=$?
  server=""
  if [ $rc -ne 0 ]; then
    echo "ack-compare: the $mode server exited with status $rc:" >&2
    cat "$work/server.err" >&2
  fi
  jq --slurpfile w "$work/wrk.json" '. + {wrk: $w[0]}' "$work/server.json" >"$outdir/$name.json"
}

# row NAME: the figures of one run, tab-separated: wrk's 2xx/s and p99, the
# server's acks/s and machine CPU per ack, and whether wrk's 2xx count and the
# server's acks agree (the server may count up to CONNECTIONS more: requests
# in flight when wrk stopped).
row() {
  jq -r --argjson c "$CONNECTIONS" '
    . as $s | .wrk as $w | ($w.requests - $w.non2xx) as $ok | ($s.acks - $ok) as $d |
    [($ok / $w.duration_s | floor), $w.latency_ms.p99, ($s.ack_rate | floor), ($s.cpu.machine_us_per_ack | floor),
     (if $w.repeats > 0 then "REPEATS \($w.repeats)" elif $d >= 0 and $d <= $c and $s.check.passed then "ok" else "MISMATCH wrk \($ok) server \($s.acks)" end)]
    | @tsv' "$outdir/$1.json"
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }'; }

names=()
for r in $(seq 1 "$ROUNDS"); do
  file=$work/requests-$r.bin
  # Signed now, sent within the minute: BENCH_FLAGS may set --scheme and --body-size.
  # shellcheck disable=SC2086
  "$bench" --write-requests "$file" --requests "$REQUESTS" $BENCH_FLAGS
  run webhookd "$file"
  a=$name
  run naive "$file"
  names+=("$a $name")
  rm -f "$file"
done

printf '\n%-5s  %-26s  %-26s  %-7s  %-7s\n' round "webhookd 2xx/s (p99 ms)" "naive 2xx/s (p99 ms)" "ratio" "server"
printf '%-5s  %-26s  %-26s  %-7s  %-7s\n' "" "server acks/s, µs/ack" "server acks/s, µs/ack" "" "ratio"
r=0
for pair in "${names[@]}"; do
  r=$((r + 1))
  read -r a b <<<"$pair"
  IFS=$'\t' read -r wa pa sa ca ka < <(row "$a")
  IFS=$'\t' read -r wb pb sb cb kb < <(row "$b")
  printf '%-5s  %-26s  %-26s  %-7s  %-7s  %s\n' "$r" "$wa ($pa)" "$wb ($pb)" \
    "$(ratio "$wa" "$wb")" "$(ratio "$sa" "$sb")" "$a: $ka; $b: $kb"
  printf '%-5s  %-26s  %-26s\n' "" "$sa, $ca" "$sb, $cb"
done
echo "runs in $outdir"
