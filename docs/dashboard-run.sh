#!/usr/bin/env bash
# Draws docs/dashboard.png, the README's picture of the Grafana dashboard:
# the panels of deploy/grafana/webhookd.json, their own queries run by a
# real Prometheus (Debian's package, unpacked) that scraped a real
# webhookd for a few minutes of traffic. No Grafana server is needed:
# bench/cmd/webhookd-dashboard runs the queries and draws the panels.
#
# The run: `webhookd serve` (gateway and worker) with one Stripe-signed
# source and two destinations, a Redis of its own and a database of its own
# (webhookd_dashboard, dropped first), fed by webhookd-bench at 150
# requests/s, then 600/s, then 150/s again, a fifth of them repeats and
# one in twenty with a bad signature. The `ledger` destination (a
# webhookd sink) answers from the start; `crm` has nothing listening until
# the last phase: its calls fail, its circuit opens, and its backlog drains
# once a sink starts there.
#
#	docs/dashboard-run.sh            # from the repository's root; about 10 minutes
set -euo pipefail
cd "$(dirname "$0")/.."

tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  psql -q -h 127.0.0.1 -U postgres -d postgres -c 'DROP DATABASE IF EXISTS webhookd_dashboard' 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
log() { printf '== %s %s\n' "$(date -u +%H:%M:%S)" "$*"; }

redis_port=16391
http_port=18091
prom_port=19091
ledger_port=19191
crm_port=19192
secret=whsec_ZGFzaGJvYXJkLXJ1bi1zZWNyZXQtMzItYnl0ZXMh

log "building webhookd, webhookd-bench, webhookd-dashboard; unpacking prometheus"
go build -o "$tmp/webhookd" ./cmd/webhookd
(cd bench && go build -o "$tmp/webhookd-bench" ./cmd/webhookd-bench && go build -o "$tmp/webhookd-dashboard" ./cmd/webhookd-dashboard)
(cd "$tmp" && { apt-get download -qq prometheus 2>/dev/null || { apt-get update -qq && apt-get download -qq prometheus; }; })
dpkg-deb --fsys-tarfile "$tmp"/prometheus_*.deb | tar -xO ./usr/bin/prometheus >"$tmp/prometheus"
chmod 755 "$tmp/prometheus"

redis-server --port "$redis_port" --bind 127.0.0.1 --save "" --appendonly no --dir "$tmp" --logfile "$tmp/redis.log" &
pids+=($!)
psql -q -h 127.0.0.1 -U postgres -d postgres -c 'DROP DATABASE IF EXISTS webhookd_dashboard' -c 'CREATE DATABASE webhookd_dashboard' 2>/dev/null

cat >"$tmp/webhookd.yaml" <<EOF
listen: "127.0.0.1:$http_port"
database_url: postgres://postgres@127.0.0.1:5432/webhookd_dashboard
redis_url: redis://127.0.0.1:$redis_port/0
log_level: warn
sources:
  - name: shop
    verify: {scheme: stripe, secrets: ["$secret"]}
    event_id: json:id
    destinations:
      - {name: ledger, url: "http://127.0.0.1:$ledger_port/hooks/ledger"}
      - {name: crm, url: "http://127.0.0.1:$crm_port/hooks/crm", circuit: {failures: 20, cooldown: 10s}}
EOF
cat >"$tmp/prometheus.yml" <<EOF
global: {scrape_interval: 5s, evaluation_interval: 5s}
scrape_configs:
  - job_name: webhookd
    static_configs:
      - targets: ["127.0.0.1:$http_port"]
        labels: {namespace: demo}
EOF

"$tmp/webhookd" migrate -f "$tmp/webhookd.yaml" >/dev/null
"$tmp/webhookd" sink --listen "127.0.0.1:$ledger_port" >"$tmp/ledger.log" 2>&1 &
pids+=($!)
"$tmp/webhookd" serve -f "$tmp/webhookd.yaml" >"$tmp/webhookd.log" 2>&1 &
pids+=($!)
"$tmp/prometheus" --config.file "$tmp/prometheus.yml" --storage.tsdb.path "$tmp/tsdb" \
  --web.listen-address "127.0.0.1:$prom_port" >"$tmp/prometheus.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 60); do curl -fs "http://127.0.0.1:$http_port/readyz" >/dev/null && break; sleep 1; done
curl -fs "http://127.0.0.1:$http_port/readyz" >/dev/null

from=$(date -u +%Y-%m-%dT%H:%M:%SZ)
sleep 20 # the scrapes before traffic: the panels start at rest
send() { # rate, duration
  log "sending $1 requests/s for $2"
  "$tmp/webhookd-bench" --target "http://127.0.0.1:$http_port" --source shop --scheme stripe --secret "$secret" \
    --rate "$1" --duration "$2" --drain-timeout 1s --duplicates 0.2 --bad-signatures 0.05 --database-url postgres://postgres@127.0.0.1:5432/webhookd_dashboard >"$tmp/bench-$1-$2.log" 2>&1 || {
    cat "$tmp/bench-$1-$2.log"
    exit 1
  }
}
send 150 60s
send 600 50s
log "crm's destination comes up"
"$tmp/webhookd" sink --listen "127.0.0.1:$crm_port" >"$tmp/crm.log" 2>&1 &
pids+=($!)
send 150 60s
sleep 40 # the drain, and the rates' windows closing
to=$(date -u +%Y-%m-%dT%H:%M:%SZ)

"$tmp/webhookd-dashboard" --prometheus "http://127.0.0.1:$prom_port" --dashboard deploy/grafana/webhookd.json \
  --from "$from" --to "$to" --step 5s --rate-interval 30s --var namespace=demo --var job=webhookd --out docs/dashboard.png
