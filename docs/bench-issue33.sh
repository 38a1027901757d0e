#!/usr/bin/env bash
# Issue 33's before/after: end to end (closed loop, 64 in flight, 1 KiB,
# 20 s, worker in the process), the binary at BEFORE_REV and the working
# tree alternated back to back, ROUNDS pairs, each report kept as JSON in
# OUTDIR (docs/runs/issue33 by default); at the end a table of every pair
# and the medians.
#
#   docs/bench-issue33.sh [-m MODE] [-b BEFORE_REV] [-r ROUNDS] [OUTDIR]
#
# MODE is what each pair runs:
#   e2e    (default) as above;
#   ack    acks alone (--no-worker), BEFORE_REV against the working tree:
#          what the ack path costs against an earlier build;
#   naive  acks alone, the working tree's webhookd ("after") against its
#          naive verify-insert-enqueue ingest ("before", --naive): the
#          ratio of issue 33's second target.
#
# BEFORE_REV defaults to 7be24a9 (the last commit before issue 33's
# changes); addef08 is the build before issues 23–33 (the features this
# round added, all configured off in this run). Postgres and Redis as in the README; jq. Run it on a quiet
# machine: the figures are CPU-bound and the runs share two cores with
# everything else.
set -euo pipefail

before=7be24a9
rounds=5
mode=e2e
while getopts "m:b:r:" opt; do
	case $opt in
	m) mode=$OPTARG ;;
	b) before=$OPTARG ;;
	r) rounds=$OPTARG ;;
	*) exit 2 ;;
	esac
done
shift $((OPTIND - 1))
case $mode in
e2e) flags=() before_flags=() ;;
ack) flags=(--no-worker) before_flags=(--no-worker) ;;
naive) flags=(--no-worker) before_flags=(--no-worker --naive) ;;
*)
	echo "unknown mode $mode (e2e, ack or naive)" >&2
	exit 2
	;;
esac
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/docs/runs/issue33}
mkdir -p "$out"
work=$(mktemp -d)
trap 'git -C "$root" worktree remove --force "$work/src-before" 2>/dev/null || true; rm -rf "$work"' EXIT

echo "building the load generator at the working tree$([[ $mode == naive ]] || echo " and at $before")"
(cd "$root/bench" && go build -o "$work/after" ./cmd/webhookd-bench)
if [[ $mode == naive ]]; then
	cp "$work/after" "$work/before"
else
	git -C "$root" worktree add -q --detach "$work/src-before" "$before"
	# The load generator moved to its own module (bench/) after 2026-12-03.
	(cd "$work/src-before" && if [[ -d bench/cmd/webhookd-bench ]]; then cd bench; fi && go build -o "$work/before" ./cmd/webhookd-bench)
fi

for i in $(seq "$rounds"); do
	for variant in before after; do
		file=$(printf '%s/%02d-%s64-%s.json' "$out" "$i" "$mode" "$variant")
		echo "round $i, $variant (load $(cut -d' ' -f1-3 /proc/loadavg))"
		if [[ $variant == before ]]; then vflags=("${before_flags[@]}"); else vflags=("${flags[@]}"); fi
		"$work/$variant" --duration 20s --concurrency 64 --no-progress --log-level warn "${vflags[@]}" \
			--label "${mode}64/$variant" --json >"$file" || echo "  the run or its exactly-once check failed; report kept" >&2
	done
done

# One line per report, then the medians of each variant.
if [[ $mode == e2e ]]; then
	summary='{file: (input_filename | split("/") | last), acks_per_s: (.ack_rate | floor),
	  delivered_per_s: (.end_to_end.rate | floor),
	  drain_us_per_event: (.end_to_end.drain_cpu.machine_us_per_ack | floor),
	  drain_postgres_us: ([.end_to_end.drain_cpu.groups[] | select(.name | startswith("postgres (webhookd")) | .us_per_ack | floor] | first),
	  drain_process_us: (.end_to_end.drain_cpu.process_us_per_ack | floor),
	  exactly_once: .check.passed}'
	medians='{delivered_per_s: (map(.end_to_end.rate) | median | floor),
	  acks_per_s: (map(.ack_rate) | median | floor),
	  drain_us_per_event: (map(.end_to_end.drain_cpu.machine_us_per_ack) | median | floor)}'
else
	summary='{file: (input_filename | split("/") | last), acks_per_s: (.ack_rate | floor),
	  p99_ms: .latency_ms.p99, machine_us_per_ack: (.cpu.machine_us_per_ack | floor),
	  postgres_us_per_ack: ([.cpu.groups[] | select(.name | startswith("postgres (webhookd")) | .us_per_ack | floor] | first),
	  process_us_per_ack: (.cpu.process_us_per_ack | floor)}'
	medians='{acks_per_s: (map(.ack_rate) | median | floor), p99_ms: (map(.latency_ms.p99) | median),
	  machine_us_per_ack: (map(.cpu.machine_us_per_ack) | median | floor)}'
fi
jq -c "$summary" "$out"/*-"$mode"64-*.json
for variant in before after; do
	jq -s -c --arg v "$variant" "def median: sort | .[length / 2 | floor]; {variant: \$v, runs: length} + $medians" \
		"$out"/*-"$mode"64-"$variant".json
done
