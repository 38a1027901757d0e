#!/usr/bin/env bash
# Runs every measurement of issue 16 (delivery as fast as ingest) on this
# machine, alternating the binaries compared, and writes each report as
# JSON, labelled <kind>/<variant>, to OUTDIR (docs/runs/issue16 by
# default), where `cd bench/plots && go run .` draws the charts from them.
#
#   docs/bench-issue16.sh [-b BEFORE_REV] [-r ROUNDS] [-k KINDS] [OUTDIR]
#
# -b builds a second binary at BEFORE_REV for the before/after groups
# (end to end, repeats); without it those groups run the working tree only.
# -k picks groups (comma-separated; default all): ack64, ack64-ab (the ack
# path before and after, with -b), ack64-wrk, e2e64, e2e2000, open2000,
# repeats5m. The repeats group preloads 5 M events once
# per binary into a kept database (a few minutes, ~6 GB each) and reuses
# it afterwards. Postgres and Redis as in the README; wrk for ack64-wrk
# (apt-get install wrk). Run it on a quiet machine: every figure is CPU-
# and latency-bound, and the runs share two cores with everything else.
set -euo pipefail

before=""
rounds=3
kinds="ack64,ack64-ab,ack64-wrk,e2e64,e2e2000,open2000,repeats5m"
while getopts "b:r:k:" opt; do
	case $opt in
	b) before=$OPTARG ;;
	r) rounds=$OPTARG ;;
	k) kinds=$OPTARG ;;
	*) exit 2 ;;
	esac
done
shift $((OPTIND - 1))
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/docs/runs/issue16}
mkdir -p "$out"
pg=${PGURL:-postgres://postgres@127.0.0.1:5432}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "building the load generator at the working tree"
(cd "$root" && go build -o "$work/after" ./bench/cmd/webhookd-bench)
if [[ -n $before ]]; then
	echo "building the load generator at $before"
	git -C "$root" worktree add -q --detach "$work/src-before" "$before"
	(cd "$work/src-before" && if [[ -d bench/cmd/webhookd-bench ]]; then go build -o "$work/before" ./bench/cmd/webhookd-bench; else go build -o "$work/before" ./cmd/webhookd-bench; fi)
	git -C "$root" worktree remove --force "$work/src-before"
fi

want() { [[ ,$kinds, == *",$1,"* ]]; }
n=$(find "$out" -name '*.json' | wc -l)

# run LABEL BINARY FLAGS...: one run, its report labelled and saved.
run() {
	local label=$1 bin=$2
	shift 2
	n=$((n + 1))
	local file
	file=$(printf '%s/%02d-%s.json' "$out" "$n" "${label//\//-}")
	echo "run $n: $label ($(cat /proc/loadavg | cut -d' ' -f1-3))"
	if ! "$bin" --no-progress --log-level warn --json "$@" >"$work/report.json"; then
		echo "  run failed or its exactly-once check failed; report kept" >&2
	fi
	jq --arg l "$label" '.label = $l' "$work/report.json" >"$file"
	jq -r '"  acks/s \(.ack_rate|floor)  p50 \(.latency_ms.p50) p99 \(.latency_ms.p99) ms  e2e \(.end_to_end.rate|floor)/s  drain \(.end_to_end.drain_seconds)s  check \(.check.passed)"' "$file"
}

db="--database-url=$pg/webhookd_bench_i16"

if want ack64; then
	for _ in $(seq "$rounds"); do
		run ack64/webhookd "$work/after" -d 15s -c 64 --no-worker "$db"
		run ack64/naive "$work/after" -d 15s -c 64 --no-worker --naive "$db"
	done
fi

if want ack64-ab && [[ -n $before ]]; then
	for _ in $(seq "$rounds"); do
		run ack64-ab/before "$work/before" -d 15s -c 64 --no-worker "$db"
		run ack64-ab/after "$work/after" -d 15s -c 64 --no-worker "$db"
	done
fi

if want ack64-wrk; then
	"$root/docs/ack-compare.sh" -r "$rounds" -b "$work/after" "$out"
	n=$(find "$out" -name '*.json' | wc -l)
fi

if want e2e64; then
	for _ in $(seq "$rounds"); do
		[[ -n $before ]] && run e2e64/before "$work/before" -d 15s -c 64 "$db"
		run e2e64/after "$work/after" -d 15s -c 64 "$db"
	done
fi

if want e2e2000; then
	run e2e2000/after "$work/after" -d 60s --rate 2000 "$db"
fi

if want open2000; then
	for _ in 1 2 3 4 5; do
		run open2000/after "$work/after" -d 20s --rate 2000 --no-worker "$db"
	done
fi

if want repeats5m; then
	preload() { # preload BINARY DATABASE: 5 M finished events, kept
		if ! psql "$pg/$2" -Atc 'SELECT 1' >/dev/null 2>&1; then
			echo "preloading 5 M events into $2"
			"$1" --no-progress --log-level warn -d 5s -c 64 --no-worker --preload 5000000 --keep-db \
				--database-url="$pg/$2" >/dev/null
		fi
	}
	preload "$work/after" webhookd_bench_rep_after
	[[ -n $before ]] && preload "$work/before" webhookd_bench_rep_before
	for _ in 1 2; do
		[[ -n $before ]] && run repeats5m/before "$work/before" -d 20s -c 64 --no-worker --duplicates 1 --reuse-db \
			--database-url="$pg/webhookd_bench_rep_before"
		run repeats5m/after "$work/after" -d 20s -c 64 --no-worker --duplicates 1 --reuse-db \
			--database-url="$pg/webhookd_bench_rep_after"
	done
fi
echo "reports in $out; draw the charts with: cd bench/plots && go run ."
