#!/usr/bin/env bash
# The local demo, from a fresh machine with cargo: a throwaway redis-server and three
# `leasehold run` replicas, each gating a singleton command. Watch the first election (after the
# cooldown of a fresh Redis), a crash failover (SIGKILL: the others wait for the lease's TTL) and
# a graceful handoff (SIGTERM: the leader releases and a follower takes over within milliseconds).
#
# It needs cargo and a redis-server, and installs redis-server (Debian's package) when it is
# missing; nothing else: the tests' tools (scripts/ensure-tools.sh) are the test command's. Redis
# listens on a Unix socket and each replica on a port the kernel picks, so no free-port helper is
# needed, and the HTTP requests go through bash's /dev/tcp, so neither curl nor python is.
# DEMO_LEASEHOLD_BIN runs a binary already built instead of building one (the demo's own test).
set -euo pipefail
cd "$(dirname "$0")/.."

as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}

if ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-cli >/dev/null 2>&1; then
  echo "== installing redis-server (Debian package)"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server redis-tools >/dev/null
fi

if [ -n "${DEMO_LEASEHOLD_BIN:-}" ]; then
  bin=$DEMO_LEASEHOLD_BIN
else
  # cargo's own progress (a bar on a terminal, a line per crate otherwise): the first build
  # compiles a few hundred crates, minutes on a small machine.
  echo "== building leasehold (the first build takes a few minutes; later ones seconds)"
  cargo build --locked --bin leasehold
  bin=target/debug/leasehold
fi

work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

# A Unix socket in a directory of our own: never the default port 6379, nor anyone's Redis.
sock="$work/redis.sock"
redis-server --port 0 --unixsocket "$sock" --unixsocketperm 700 --save "" --appendonly no \
  --dir "$work" --logfile "$work/redis.log" &
pids+=($!)
disown
for _ in $(seq 1 200); do
  redis-cli -s "$sock" ping >/dev/null 2>&1 && break
  sleep 0.05
done
redis-cli -s "$sock" ping >/dev/null 2>&1 || { echo "redis-server did not start:" >&2; cat "$work/redis.log" >&2; exit 1; }
url="unix://$sock"
lease="demo/web"
echo "== redis-server on $url; lease $lease; TTL 3 s, renew deadline 2 s, retry period 500 ms"

# `GET path` on host:port: prints the status code, then the body. HTTP/1.0, so the server closes.
http_get() {
  local host=${1%:*} port=${1##*:} path=$2 status body
  exec 3<>"/dev/tcp/$host/$port" || return 1
  printf 'GET %s HTTP/1.0\r\nHost: %s\r\n\r\n' "$path" "$1" >&3
  IFS=' ' read -r _ status _ <&3 || { exec 3<&-; return 1; }
  while IFS= read -r line <&3 && [ "${line%$'\r'}" != "" ]; do :; done
  body=$(cat <&3)
  exec 3<&-
  echo "$status"
  echo "$body"
}

declare -A replica_pid replica_http
for name in web-a web-b web-c; do
  # Only the leader runs the command; it gets the fencing token in its environment.
  RUST_LOG=leasehold=info "$bin" run --redis-url "$url" --lease-name "$lease" --identity "$name" \
    --http-addr 127.0.0.1:0 --kubernetes off --log-format text --readiness leader \
    --lease-duration 3s --renew-deadline 2s --retry-period 500ms -- \
    sh -c 'while true; do echo "   [$LEASEHOLD_IDENTITY] singleton work, fencing token $LEASEHOLD_FENCING_TOKEN"; sleep 1.5; done' \
    2> >(tee "$work/$name.log" \
         | grep --line-buffered -E 'became leader|stepped down|following leader|released the lease|started the command|stopping the command|redis is new' \
         | sed -u -E "s/^[^ ]+ +//; s/^/   $name: /") &
  replica_pid[$name]=$!
  pids+=($!)
  disown
done

# Each replica's HTTP address, from its start line (`http=127.0.0.1:PORT`).
for name in web-a web-b web-c; do
  for _ in $(seq 1 200); do
    addr=$(grep -o -m1 -E 'http=[0-9.]+:[0-9]+' "$work/$name.log" 2>/dev/null | cut -d= -f2 || true)
    [ -n "$addr" ] && break
    sleep 0.05
  done
  [ -n "$addr" ] || { echo "$name did not start:" >&2; cat "$work/$name.log" >&2; exit 1; }
  replica_http[$name]=$addr
done

readiness() {
  local line="   /readyz:"
  for name in web-a web-b web-c; do
    local code
    code=$(http_get "${replica_http[$name]}" /readyz 2>/dev/null | head -n1 || true)
    line+=" $name=${code:-gone}"
  done
  echo "$line"
}

leader() { redis-cli -s "$sock" GET "leasehold:{$lease}" | sed 's/-[0-9a-f-]\{36\}#[0-9]*$//'; }
wait_leader() {
  local not=$1
  for _ in $(seq 1 500); do
    local l; l=$(leader)
    if [ -n "$l" ] && [ "$l" != "$not" ]; then echo "$l"; return; fi
    sleep 0.02
  done
  echo "no leader" >&2; exit 1
}

# Sends the leader $1 the signal $2, waits for another leader (left in $next), says how long it
# took and shows the readiness once things settled.
take_over() {
  local start
  kill "$2" "${replica_pid[$1]}"
  start=$(date +%s%N)
  next=$(wait_leader "$1")
  echo "== $next took over after $(( ($(date +%s%N) - start) / 1000000 )) ms"
  sleep 2
  readiness
}

echo "== a fresh redis cools down for one lease duration before the first election"
first=$(wait_leader "")
sleep 2
readiness
echo "== /leader on the leader:"
http_get "${replica_http[$first]}" /leader | tail -n +2
echo "== $first leads; killing it with SIGKILL (no release: the others wait for its TTL)"
take_over "$first" -9
second=$next
echo "== sending SIGTERM to $second (graceful: it stops its command, releases, a follower takes over)"
take_over "$second" -TERM
third=$next
echo "== leasehold status, read from Redis:"
"$bin" status --redis-url "$url" --lease-name "$lease" --log warn | sed 's/^/   /'
kill -TERM "${replica_pid[$third]}" 2>/dev/null || true
sleep 0.5
echo "== demo done"
