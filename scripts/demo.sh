#!/usr/bin/env bash
# The local demo, from a fresh machine: a throwaway redis-server, three replicas electing, the
# leader killed (crash failover, about one lease duration), then a graceful handoff (SIGTERM:
# the leader releases and a follower takes over within milliseconds).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/ensure-tools.sh
cargo build --quiet --example contender
bin=target/debug/examples/contender

work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

# A free port, never the default 6379.
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$work" \
  --logfile "$work/redis.log" &
pids+=($!)
disown
until redis-cli -p "$port" ping >/dev/null 2>&1; do sleep 0.05; done
url="redis://127.0.0.1:$port"
lease="demo/web"
echo "redis-server on $url; lease $lease; TTL 3 s, renew deadline 2 s, retry period 500 ms"

declare -A replica_pid
for name in web-a web-b web-c; do
  # Each replica prints its events; actions are summarised so the screen stays readable.
  "$bin" "$url" "$lease" "$name" 3000 2000 500 2>"$work/$name.log" > >(
    n=0
    while IFS= read -r line; do
      case "$line" in
        action*) n=$((n + 1)); [ $((n % 50)) = 1 ] && echo "   $name: acting (${line#action })" ;;
        *) echo "   $name: $line" ;;
      esac
    done) &
  replica_pid[$name]=$!
  pids+=($!)
  disown
done

leader() { redis-cli -p "$port" GET "leasehold:{$lease}" | sed 's/-[0-9a-f-]\{36\}$//'; }
wait_leader() {
  local not=$1
  for _ in $(seq 1 200); do
    local l; l=$(leader)
    if [ -n "$l" ] && [ "$l" != "$not" ]; then echo "$l"; return; fi
    sleep 0.05
  done
  echo "no leader" >&2; exit 1
}

echo "-- a fresh redis cools down for one lease duration before the first election"
first=$(wait_leader "")
sleep 2
echo "-- $first leads; killing it with SIGKILL (no release: the others wait for its TTL)"
kill -9 "${replica_pid[$first]}"
start=$(date +%s%N)
second=$(wait_leader "$first")
echo "-- $second took over after $(( ($(date +%s%N) - start) / 1000000 )) ms"
sleep 2
echo "-- sending SIGTERM to $second (graceful: it releases and a follower takes over at once)"
kill -TERM "${replica_pid[$second]}"
start=$(date +%s%N)
third=$(wait_leader "$second")
echo "-- $third took over after $(( ($(date +%s%N) - start) / 1000000 )) ms"
sleep 2
echo "-- demo done"
kill -TERM "${replica_pid[@]}" 2>/dev/null || true
sleep 0.5
