#!/bin/sh
# The chart's `helm test`: passes when exactly one replica leads, every replica names it as the
# leader, and (when a leader Service is given) that Service routes to it. It retries until the
# timeout, since a fresh release may still be electing. POSIX sh with nslookup and wget (busybox).
#   LEASEHOLD_TEST_REPLICAS  a DNS name whose addresses are every replica (a headless Service)
#   LEASEHOLD_TEST_PORT      the replicas' HTTP port
#   LEASEHOLD_TEST_SERVICE   host:port of the leader Service, or empty
#   LEASEHOLD_TEST_TIMEOUT   seconds to wait for exactly one leader
set -u

# The replicas' addresses: nslookup's answer section ("Address: 10.0.0.5" in busybox 1.36,
# "Address 1: 10.0.0.5 name" in older ones). The DNS server's own address comes before "Name:".
addresses() {
  nslookup "$LEASEHOLD_TEST_REPLICAS" 2>/dev/null |
    sed -n '/^Name:/,$ s/^Address[^:]*: *\([0-9A-Fa-f.:]*\).*/\1/p' | sort -u
}

# The string value of key $1 in the JSON object on stdin (empty when null or absent).
field() {
  sed -n "s/.*\"$1\":\"\([^\"]*\)\".*/\1/p"
}

get_leader() {
  wget -q -T 2 -O - "http://$1/leader" 2>/dev/null
}

# One look at every replica; prints the verdict, fails unless there is exactly one leader.
check() {
  addrs=$(addresses)
  if [ -z "$addrs" ]; then
    echo "no replica found: $LEASEHOLD_TEST_REPLICAS has no addresses"
    return 1
  fi
  replicas=0
  leaders=0
  leader=""
  seen=""
  for a in $addrs; do
    replicas=$((replicas + 1))
    case "$a" in
      *:*) host="[$a]" ;;
      *) host="$a" ;;
    esac
    if ! json=$(get_leader "$host:$LEASEHOLD_TEST_PORT"); then
      echo "the replica at $a does not answer /leader"
      return 1
    fi
    me=$(printf '%s' "$json" | field identity)
    names=$(printf '%s' "$json" | field leader)
    case "$json" in
      *'"is_leader":true'*)
        leaders=$((leaders + 1))
        leader="$me"
        ;;
    esac
    seen="$seen $me->${names:-nobody}"
  done
  if [ "$leaders" -ne 1 ]; then
    echo "$leaders of $replicas replicas lead, want exactly one (replica->leader it names:$seen)"
    return 1
  fi
  for pair in $seen; do
    if [ "${pair#*->}" != "$leader" ]; then
      echo "${pair%%->*} names ${pair#*->} as the leader, not $leader (replica->leader:$seen)"
      return 1
    fi
  done
  if [ -n "${LEASEHOLD_TEST_SERVICE:-}" ]; then
    if ! json=$(get_leader "$LEASEHOLD_TEST_SERVICE"); then
      echo "the leader Service $LEASEHOLD_TEST_SERVICE does not answer /leader"
      return 1
    fi
    via=$(printf '%s' "$json" | field identity)
    if [ "$via" != "$leader" ]; then
      echo "the leader Service $LEASEHOLD_TEST_SERVICE routes to $via, not to the leader $leader"
      return 1
    fi
  fi
  echo "one leader: $leader; all $replicas replicas name it"
}

deadline=$(($(date +%s) + ${LEASEHOLD_TEST_TIMEOUT:-60}))
while :; do
  if verdict=$(check); then
    echo "$verdict"
    exit 0
  fi
  if [ "$(date +%s)" -ge "$deadline" ]; then
    echo "FAILED: $verdict" >&2
    exit 1
  fi
  echo "waiting: $verdict" >&2
  sleep 1
done
