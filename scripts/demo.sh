#!/usr/bin/env bash
# The local demo, from a fresh machine: a throwaway redis-server and three `leasehold run`
# replicas, each gating a singleton command. Watch the first election (after the cooldown of
# a fresh Redis), a crash failover (SIGKILL: the others wait for the lease's TTL) and a graceful
# handoff (SIGTERM: the leader releases and a follower takes over within milliseconds).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/ensure-tools.sh
cargo build --quiet --bin leasehold
bin=target/debug/leasehold

work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# A free port, never the default 6379.
port=$(free_port)
redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$work" \
  --logfile "$work/redis.log" &
pids+=($!)
disown
until redis-cli -p "$port" ping >/dev/null 2>&1; do sleep 0.05; done
url="redis://127.0.0.1:$port"
lease="demo/web"
echo "== redis-server on $url; lease $lease; TTL 3 s, renew deadline 2 s, retry period 500 ms"

declare -A replica_pid replica_http
for name in web-a web-b web-c; do
  http="127.0.0.1:$(free_port)"
  replica_http[$name]=$http
  # Only the leader runs the command; it gets the fencing token in its environment.
  RUST_LOG=leasehold=info "$bin" run --redis-url "$url" --lease-name "$lease" --identity "$name" \
    --http-addr "$http" --kubernetes off --log-format text --readiness leader \
    --lease-duration 3s --renew-deadline 2s --retry-period 500ms -- \
    sh -c 'while true; do echo "   [$LEASEHOLD_IDENTITY] singleton work, fencing token $LEASEHOLD_FENCING_TOKEN"; sleep 1.5; done' \
    2> >(grep --line-buffered -E 'became leader|stepped down|following leader|released the lease|started the command|stopping the command|redis is new' \
         | sed -u -E "s/^[^ ]+ +//; s/^/   $name: /") &
  replica_pid[$name]=$!
  pids+=($!)
  disown
done

readiness() {
  local line="   /readyz:"
  for name in web-a web-b web-c; do
    local code
    code=$(curl -s -o /dev/null -w '%{http_code}' "http://${replica_http[$name]}/readyz" 2>/dev/null || true)
    [ "$code" = 000 ] && code=gone
    line+=" $name=$code"
  done
  echo "$line"
}

leader() { redis-cli -p "$port" GET "leasehold:{$lease}" | sed 's/-[0-9a-f-]\{36\}#[0-9]*$//'; }
wait_leader() {
  local not=$1
  for _ in $(seq 1 200); do
    local l; l=$(leader)
    if [ -n "$l" ] && [ "$l" != "$not" ]; then echo "$l"; return; fi
    sleep 0.02
  done
  echo "no leader" >&2; exit 1
}

echo "== a fresh redis cools down for one lease duration before the first election"
first=$(wait_leader "")
sleep 2
readiness
echo "== /leader on the leader:"
curl -s "http://${replica_http[$first]}/leader"; echo
echo "== $first leads; killing it with SIGKILL (no release: the others wait for its TTL)"
kill -9 "${replica_pid[$first]}"
start=$(date +%s%N)
second=$(wait_leader "$first")
echo "== $second took over after $(( ($(date +%s%N) - start) / 1000000 )) ms"
sleep 2
readiness
echo "== sending SIGTERM to $second (graceful: it stops its command, releases, a follower takes over)"
kill -TERM "${replica_pid[$second]}"
start=$(date +%s%N)
third=$(wait_leader "$second")
echo "== $third took over after $(( ($(date +%s%N) - start) / 1000000 )) ms"
sleep 2
readiness
echo "== leasehold status, read from Redis:"
"$bin" status --redis-url "$url" --lease-name "$lease" --log warn | sed 's/^/   /'
kill -TERM "${replica_pid[$third]}" 2>/dev/null || true
sleep 0.5
echo "== demo done"
