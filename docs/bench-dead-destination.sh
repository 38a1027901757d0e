#!/usr/bin/env bash
# What a dead destination costs the others: one source with two
# destinations, `ledger` (a webhookd sink) and `crm` (nothing listening:
# its calls fail, its circuit opens, its events are held), fed 600
# signed requests/s for 60 s (a fifth repeats, one in twenty with a bad
# signature). Each round runs the build at BEFORE_REV and the working
# tree back to back and prints, per run, the load generator's acks and
# ack latency and what ledger received.
#
#   docs/bench-dead-destination.sh [-b BEFORE_REV] [-r ROUNDS]
#
# BEFORE_REV defaults to 7be24a9 (before parking and gathered issue
# writes). Postgres as in the README (the database webhookd_deadbench is
# dropped and created for each run); redis-server, curl and jq; a Redis of
# its own on port 16393.
set -euo pipefail

before=7be24a9
rounds=2
while getopts "b:r:" opt; do
	case $opt in
	b) before=$OPTARG ;;
	r) rounds=$OPTARG ;;
	*) exit 2 ;;
	esac
done
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	git -C "$root" worktree remove --force "$work/src-before" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
secret=whsec_ZGFzaGJvYXJkLXJ1bi1zZWNyZXQtMzItYnl0ZXMh
db=postgres://postgres@127.0.0.1:5432/webhookd_deadbench

build() { # dir, name
	(cd "$1" && go build -o "$work/webhookd-$2" ./cmd/webhookd)
	(cd "$1/bench" && go build -o "$work/bench-$2" ./cmd/webhookd-bench)
}
echo "building the working tree and $before"
build "$root" after
git -C "$root" worktree add -q --detach "$work/src-before" "$before"
build "$work/src-before" before

cat >"$work/webhookd.yaml" <<EOT
listen: "127.0.0.1:18093"
database_url: $db
redis_url: redis://127.0.0.1:16393/0
log_level: warn
sources:
  - name: shop
    verify: {scheme: stripe, secrets: ["$secret"]}
    event_id: json:id
    destinations:
      - {name: ledger, url: "http://127.0.0.1:19195/hooks/ledger"}
      - {name: crm, url: "http://127.0.0.1:19196/hooks/crm", circuit: {failures: 20, cooldown: 10s}}
EOT

run() { # variant
	local v=$1
	pids=()
	redis-server --port 16393 --bind 127.0.0.1 --save "" --appendonly no --dir "$work" --logfile "$work/redis.log" &
	pids+=($!)
	psql -q -h 127.0.0.1 -U postgres -d postgres -c 'DROP DATABASE IF EXISTS webhookd_deadbench' -c 'CREATE DATABASE webhookd_deadbench' 2>/dev/null
	"$work/webhookd-$v" migrate -f "$work/webhookd.yaml" >/dev/null
	"$work/webhookd-$v" sink --listen 127.0.0.1:19195 >"$work/ledger.log" 2>&1 &
	pids+=($!)
	"$work/webhookd-$v" serve -f "$work/webhookd.yaml" >"$work/webhookd.log" 2>&1 &
	pids+=($!)
	for _ in $(seq 1 60); do curl -fs http://127.0.0.1:18093/readyz >/dev/null && break; sleep 1; done
	echo "$v (load $(cut -d' ' -f1-3 /proc/loadavg))"
	"$work/bench-$v" --target http://127.0.0.1:18093 --source shop --scheme stripe --secret "$secret" \
		--rate 600 --duration 60s --drain-timeout 1s --duplicates 0.2 --bad-signatures 0.05 --database-url "$db" 2>&1 |
		grep -E "^(requests|acks|ack latency)" | sed 's/^/  /'
	echo "  ledger received $(curl -fs http://127.0.0.1:19195/stats | jq .keys) events"
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
}
for _ in $(seq "$rounds"); do
	run before
	run after
done
