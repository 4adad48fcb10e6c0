#!/usr/bin/env bash
# leasehold on a real cluster: builds the image, starts a kind cluster with a Redis, installs the
# chart with `helm install --wait`, then kills the leader pod and checks that another pod becomes
# leader, ready and labelled, and that the leader Service follows it. Then a graceful handoff, a
# rolling upgrade with --wait, and leader readiness mode.
#
# Needs Docker, kind, kubectl and helm 4 on PATH, and access to Docker Hub (redis and the build's
# base images). It cannot run on this project's CI machines (no container runtime, no image
# registry), so it is not part of scripts/test.sh.
#
#   tests/e2e/kind.sh              # creates the cluster "leasehold-e2e" and deletes it at the end
#   KEEP=1 tests/e2e/kind.sh       # keeps the cluster for a look around
#   CLUSTER=mine tests/e2e/kind.sh # uses an existing kind cluster (never deleted)
set -euo pipefail
cd "$(dirname "$0")/../.."

cluster="${CLUSTER:-leasehold-e2e}"
namespace=leasehold-e2e
release=lh
name=lh-leasehold
image=leasehold:e2e
label=leasehold.io/leader
selector="app.kubernetes.io/instance=$release"

step() { printf '\n== %s\n' "$*" >&2; }
fail() {
  printf 'FAIL: %s\n' "$*" >&2
  kubectl -n "$namespace" get pods -L "$label" -o wide >&2 || true
  kubectl -n "$namespace" logs -l "$selector" --prefix --tail=30 >&2 || true
  exit 1
}

# Polls `$@` every second until it succeeds, for at most $1 seconds.
within() {
  local seconds="$1"
  shift
  local deadline=$((SECONDS + seconds))
  until "$@"; do
    [ "$SECONDS" -lt "$deadline" ] || return 1
    sleep 1
  done
}

for tool in docker kind kubectl helm; do
  command -v "$tool" >/dev/null || { echo "needs $tool on PATH" >&2; exit 2; }
done
helm version --short | grep -q '^v4\.' || { echo "needs helm 4 (helm version --short)" >&2; exit 2; }

created=false
cleanup() {
  if [ "$created" = true ] && [ -z "${KEEP:-}" ]; then
    kind delete cluster --name "$cluster" >/dev/null 2>&1 || true
  fi
}
trap cleanup EXIT

step "build the image"
docker build -t "$image" .
docker image ls "$image" --format 'image size: {{.Size}}' >&2

step "cluster $cluster"
if ! kind get clusters | grep -qx "$cluster"; then
  kind create cluster --name "$cluster" --wait 120s
  created=true
fi
kubectl config use-context "kind-$cluster" >/dev/null
kind load docker-image "$image" --name "$cluster"
kubectl create namespace "$namespace" --dry-run=client -o yaml | kubectl apply -f - >/dev/null

step "a Redis with a password, and the Secret the chart reads"
password="$(head -c 18 /dev/urandom | base64 | tr -d '/+=')"
kubectl -n "$namespace" create secret generic leasehold-redis \
  --from-literal=url="redis://redis.$namespace.svc:6379" \
  --from-literal=password="$password" \
  --dry-run=client -o yaml | kubectl apply -f - >/dev/null
kubectl -n "$namespace" apply -f - >/dev/null <<EOF
apiVersion: apps/v1
kind: Deployment
metadata:
  name: redis
spec:
  replicas: 1
  selector:
    matchLabels: {app: redis}
  template:
    metadata:
      labels: {app: redis}
    spec:
      containers:
        - name: redis
          image: redis:7-alpine
          args: ["--requirepass", "\$(REDIS_PASSWORD)", "--save", "", "--appendonly", "no"]
          env:
            - name: REDIS_PASSWORD
              valueFrom:
                secretKeyRef: {name: leasehold-redis, key: password}
          ports:
            - containerPort: 6379
---
apiVersion: v1
kind: Service
metadata:
  name: redis
spec:
  selector: {app: redis}
  ports:
    - port: 6379
EOF
kubectl -n "$namespace" rollout status deployment/redis --timeout=120s

leaders() {
  kubectl -n "$namespace" get pods -l "$selector,$label=true" \
    --field-selector=status.phase=Running -o jsonpath='{.items[*].metadata.name}'
}
ready() {
  [ "$(kubectl -n "$namespace" get pod "$1" \
    -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]
}
service_endpoints() {
  kubectl -n "$namespace" get endpointslices -l "kubernetes.io/service-name=$name" \
    -o jsonpath='{range .items[*].endpoints[?(@.conditions.ready==true)]}{.targetRef.name}{" "}{end}'
}
# Exactly one leader, ready, and the only endpoint of the leader Service; prints its name.
one_ready_leader() {
  local l
  l="$(leaders)"
  [ -n "$l" ] && [ "$(wc -w <<<"$l")" -eq 1 ] && ready "$l" &&
    [ "$(service_endpoints | xargs)" = "$l" ]
}
current_leader() { leaders | xargs; }

step "helm install --wait (readiness member, the default)"
helm install "$release" charts/leasehold --namespace "$namespace" --wait --timeout 5m \
  --set image.repository=leasehold --set image.tag=e2e
# A new Redis makes everyone wait one lease duration (15 s) before the first election.
within 90 one_ready_leader || fail "no single ready, labelled leader behind the Service"
first="$(current_leader)"
echo "leader: $first" >&2
kubectl -n "$namespace" get lease "$name" -o jsonpath='{.spec.holderIdentity}{"\n"}' | grep -qx "$first" ||
  fail "the Lease mirror does not name $first"
kubectl -n "$namespace" get pods -l "$selector" -L "$label"

step "kill the leader pod ($first): a follower takes over when its lease runs out"
kubectl -n "$namespace" delete pod "$first" --grace-period=0 --force --wait=false >/dev/null 2>&1
new_leader() { one_ready_leader && [ "$(current_leader)" != "$first" ]; }
within 90 new_leader || fail "no other pod became leader, ready and labelled after $first was killed"
second="$(current_leader)"
echo "new leader: $second" >&2

step "delete the leader pod ($second) gracefully: it releases the lease and a follower leads at once"
start=$SECONDS
kubectl -n "$namespace" delete pod "$second" --wait=false >/dev/null
handed_over() { one_ready_leader && [ "$(current_leader)" != "$second" ]; }
within 60 handed_over || fail "no handoff after $second was deleted"
echo "handoff observed after $((SECONDS - start)) s (includes the kubelet and API round trips)" >&2

step "rolling upgrade with --wait"
helm upgrade "$release" charts/leasehold --namespace "$namespace" --wait --timeout 5m \
  --reuse-values --set-string podAnnotations.e2e="$(date +%s)"
within 60 one_ready_leader || fail "no single ready leader after the rolling upgrade"

step "readiness leader: only the leader is ready; rollout status cannot finish (by design)"
helm upgrade "$release" charts/leasehold --namespace "$namespace" --reuse-values \
  --set readiness=leader --set podDisruptionBudget.enabled=false
only_leader_ready() {
  local n
  n="$(kubectl -n "$namespace" get pods -l "$selector" --field-selector=status.phase=Running \
    -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' |
    grep -c True || true)"
  [ "$n" -eq 1 ] && one_ready_leader
}
within 120 only_leader_ready || fail "leader mode: not exactly one ready pod, the leader"
if kubectl -n "$namespace" rollout status "deployment/$name" --timeout=30s; then
  fail "kubectl rollout status finished in leader mode; docs/DEPLOY.md says it cannot"
fi

step "all checks passed"
