{{/*
Names, labels and the computed settings of the leasehold chart.
*/}}

{{/* The chart name, or nameOverride. */}}
{{- define "leasehold.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The full name of the release's objects: fullnameOverride, else the release name, followed by
the chart name unless the release name already holds it. Kept to 63 characters (a label value).
*/}}
{{- define "leasehold.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := include "leasehold.name" . }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* The metrics Service's name: a DNS label of at most 63 characters, the full name cut to fit. */}}
{{- define "leasehold.metricsService" -}}
{{- printf "%s-metrics" (include "leasehold.fullname" . | trunc 55 | trimSuffix "-") }}
{{- end }}

{{/* Chart name and version, for the helm.sh/chart label. */}}
{{- define "leasehold.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The labels that select the release's pods. They never include the leader label. */}}
{{- define "leasehold.selectorLabels" -}}
app.kubernetes.io/name: {{ include "leasehold.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* The labels of the `helm test` Pod that select it; not the Deployment's (its ReplicaSet would
adopt a Pod that its selector matches). */}}
{{- define "leasehold.testSelectorLabels" -}}
app.kubernetes.io/name: {{ include "leasehold.name" . }}-test
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: helm-test
{{- end }}

{{/* The standard labels of every object, then commonLabels (the schema keeps them off the
chart's own keys). */}}
{{- define "leasehold.labels" -}}
helm.sh/chart: {{ include "leasehold.chart" . }}
{{ include "leasehold.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: {{ include "leasehold.name" . }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/*
An object's `annotations:` block: commonAnnotations, then the object's own (`extra`, which win
on the same key); nothing when both are empty. Call with (dict "ctx" $ "extra" <map or nil>).
*/}}
{{- define "leasehold.annotations" -}}
{{- $all := merge (deepCopy (.extra | default dict)) (.ctx.Values.commonAnnotations | default dict) }}
{{- with $all }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* The ServiceAccount the pods run as. */}}
{{- define "leasehold.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "leasehold.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
An image reference from (dict "image" <repository, tag, digest, registry> "global" .Values.global):
`registry/repository@digest` when the digest is set, else `registry/repository:tag`. The registry
is global.imageRegistry when set (a parent chart's mirror for every image), else the image's own
registry; without either, the repository alone.
*/}}
{{- define "leasehold.imageRef" -}}
{{- $registry := (.global | default dict).imageRegistry | default .image.registry }}
{{- $repository := .image.repository }}
{{- if $registry }}{{ $repository = printf "%s/%s" (trimSuffix "/" $registry) $repository }}{{ end }}
{{- if .image.digest }}
{{- printf "%s@%s" $repository .image.digest }}
{{- else }}
{{- printf "%s:%s" $repository (toString .image.tag) }}
{{- end }}
{{- end }}

{{/* The leasehold image, or the user's image in exec mode. */}}
{{- define "leasehold.image" -}}
{{- if .Values.exec.enabled }}
{{- include "leasehold.imageRef" (dict "image" .Values.exec.image "global" .Values.global) }}
{{- else }}
{{- include "leasehold.imageRef" (dict "image" (merge (dict "tag" (.Values.image.tag | default .Chart.AppVersion)) .Values.image) "global" .Values.global) }}
{{- end }}
{{- end }}

{{/*
Whether to adapt the security contexts to OpenShift (global.compatibility.openshift
.adaptSecurityContext): "force", or "auto" on a cluster that serves security.openshift.io/v1.
*/}}
{{- define "leasehold.adaptToOpenShift" -}}
{{- $adapt := ((((.Values.global | default dict).compatibility | default dict).openshift | default dict).adaptSecurityContext | default "auto") }}
{{- if or (eq $adapt "force") (and (eq $adapt "auto") (.Capabilities.APIVersions.Has "security.openshift.io/v1")) }}true{{ end }}
{{- end }}

{{/*
A securityContext from (dict "ctx" $ "context" <map>): as given, but without the fixed user, group
and fsGroup when adapting to OpenShift, whose restricted SCC assigns them from the namespace's
range and refuses pods that name others.
*/}}
{{- define "leasehold.securityContext" -}}
{{- $context := .context | default dict }}
{{- if include "leasehold.adaptToOpenShift" .ctx }}
{{- $context = omit $context "runAsUser" "runAsGroup" "fsGroup" }}
{{- end }}
{{- toYaml $context }}
{{- end }}

{{/*
The Grafana dashboard's uid: grafanaDashboard.uid, else `<namespace>-<full name>`; when that is
longer than Grafana's 40 characters, its first 31, a dash and 8 hex digits of its SHA-256, so
that two long names that share a beginning still differ.
*/}}
{{- define "leasehold.dashboardUid" -}}
{{- $uid := printf "%s-%s" .Release.Namespace (include "leasehold.fullname" .) }}
{{- if .Values.grafanaDashboard.uid }}
{{- .Values.grafanaDashboard.uid }}
{{- else if le (len $uid) 40 }}
{{- $uid }}
{{- else }}
{{- printf "%s-%s" (trunc 31 $uid | trimSuffix "-") (sha256sum $uid | trunc 8) }}
{{- end }}
{{- end }}

{{/* The lease as leasehold names it: `<namespace>/<name>`. */}}
{{- define "leasehold.leaseName" -}}
{{- $name := .Values.leaseName | default (include "leasehold.fullname" .) }}
{{- if contains "/" $name }}{{ $name }}{{ else }}{{ .Release.Namespace }}/{{ $name }}{{ end }}
{{- end }}

{{/* A Prometheus duration (`30s`, `1m30s`, `500ms`; the schema checks the form) in seconds. */}}
{{- define "leasehold.promSeconds" -}}
{{- $total := 0.0 }}
{{- range regexFindAll "[0-9]+(ms|s|m|h)" . -1 }}
{{- if hasSuffix "ms" . }}{{ $total = addf $total (divf (trimSuffix "ms" . | float64) 1000.0) }}
{{- else if hasSuffix "s" . }}{{ $total = addf $total (trimSuffix "s" . | float64) }}
{{- else if hasSuffix "m" . }}{{ $total = addf $total (mulf (trimSuffix "m" . | float64) 60.0) }}
{{- else }}{{ $total = addf $total (mulf (trimSuffix "h" . | float64) 3600.0) }}
{{- end }}
{{- end }}
{{- $total }}
{{- end }}

{{/* PromQL label matchers of this release's series (prometheusRule.selector). */}}
{{- define "leasehold.alertSelector" -}}
{{- .Values.prometheusRule.selector | default (printf "job=%q, namespace=%q" (include "leasehold.metricsService" .) .Release.Namespace) }}
{{- end }}

{{/*
The alerts' waits and thresholds, in seconds, from the timing and the scrape interval S
(values.yaml lists them): a dict of noLeaderFor, multipleLeadersFor, redisUnreachableFor,
renewalWindow and renewalSlowSeconds.
*/}}
{{- define "leasehold.alertTimes" -}}
{{- $t := .Values.timing }}
{{- $lease := float64 $t.leaseDurationSeconds }}
{{- $renew := float64 $t.renewDeadlineSeconds }}
{{- $retry := float64 $t.retryPeriodSeconds }}
{{- $scrape := include "leasehold.promSeconds" .Values.serviceMonitor.interval | float64 }}
{{- $twoScrapes := mulf 2.0 $scrape }}
{{- dict
  "noLeaderFor" (maxf (mulf 2.0 $lease) $twoScrapes)
  "multipleLeadersFor" $twoScrapes
  "redisUnreachableFor" (maxf $renew $twoScrapes)
  "renewalWindow" (maxf (mulf 4.0 $scrape) (mulf 30.0 $retry))
  "renewalSlowSeconds" (round (minf (divf (maxf $retry (divf $renew 3.0)) 2.0) 26.0) 3)
  | toJson }}
{{- end }}

{{/*
A number of seconds as a leasehold duration flag value: whole seconds as `15s`, anything finer
in milliseconds (`500ms`).
*/}}
{{- define "leasehold.duration" -}}
{{- $ms := include "leasehold.ms" . | int64 }}
{{- if eq (mod $ms 1000) 0 }}{{ div $ms 1000 }}s{{ else }}{{ $ms }}ms{{ end }}
{{- end }}

{{/* A number of seconds in whole milliseconds, as the flags carry it. */}}
{{- define "leasehold.ms" -}}
{{ round (mulf (float64 .) 1000) 0 | int64 }}
{{- end }}

{{/* Where the Redis password file is mounted, and its path. */}}
{{- define "leasehold.passwordDir" -}}
/var/run/secrets/leasehold/redis
{{- end }}
{{- define "leasehold.passwordFile" -}}
{{ include "leasehold.passwordDir" . }}/password
{{- end }}
{{- define "leasehold.sentinelPasswordFile" -}}
{{ include "leasehold.passwordDir" . }}/sentinel-password
{{- end }}

{{/* Where the TLS files for rediss:// are mounted. */}}
{{- define "leasehold.tlsDir" -}}
/var/run/secrets/leasehold/redis-tls
{{- end }}

{{/* Whether a Secret volume for passwords, or one for TLS files, is needed. */}}
{{- define "leasehold.passwordVolume" -}}
{{- if or .Values.redis.passwordKey .Values.redis.sentinelPasswordKey }}true{{ end }}
{{- end }}
{{- define "leasehold.tlsVolume" -}}
{{- $t := .Values.redis.tls }}
{{- if or $t.caKey $t.clientCertKey $t.clientKeyKey }}true{{ end }}
{{- end }}

{{/*
The longest a graceful shutdown of leasehold takes, in seconds (src/run.rs): the singleton
command's grace period (exec mode only), plus one Redis call to release the lease (the retry
period, at least 1 s, at most the renew deadline), plus 5 s of slack for stepping down, plus 2 s
to flush the Kubernetes notes (label removal, Event).
*/}}
{{- define "leasehold.shutdownBoundSeconds" -}}
{{- $t := .Values.timing }}
{{- $call := minf (maxf (float64 $t.retryPeriodSeconds) 1.0) (float64 $t.renewDeadlineSeconds) }}
{{- $grace := 0.0 }}
{{- if .Values.exec.enabled }}{{ $grace = float64 .Values.exec.gracePeriodSeconds }}{{ end }}
{{- addf $grace $call 5.0 2.0 }}
{{- end }}

{{/* terminationGracePeriodSeconds: the value given, or the shutdown bound plus 10 s. */}}
{{- define "leasehold.terminationGracePeriodSeconds" -}}
{{- $bound := include "leasehold.shutdownBoundSeconds" . | float64 }}
{{- if kindIs "invalid" .Values.terminationGracePeriodSeconds }}
{{- add (ceil $bound | int64) 10 }}
{{- else }}
{{- $given := .Values.terminationGracePeriodSeconds | int64 }}
{{- if le (float64 $given) $bound }}
{{- fail (printf "terminationGracePeriodSeconds %d must exceed leasehold's own bound on a graceful shutdown, %v s (exec grace period + one Redis call + 7 s); the kubelet would SIGKILL it before it released the lease. Leave it empty to have it computed." $given $bound) }}
{{- end }}
{{- $given }}
{{- end }}
{{- end }}

{{/* The Deployment's strategy (see values.yaml for why). */}}
{{- define "leasehold.strategy" -}}
{{- if .Values.strategy }}
{{- toYaml .Values.strategy }}
{{- else if eq .Values.readiness "leader" }}
type: RollingUpdate
rollingUpdate:
  maxSurge: 1
  maxUnavailable: "100%"
{{- else }}
type: RollingUpdate
rollingUpdate:
  maxSurge: 1
  maxUnavailable: 0
{{- end }}
{{- end }}

{{/*
Checks the rules that values.schema.json cannot express, and fails with a message that names the
value and the rule.
*/}}
{{- define "leasehold.validate" -}}
{{- $t := .Values.timing }}
{{- /* Compared in whole milliseconds, as the flags carry them (and the binary compares them). */}}
{{- $lease := include "leasehold.ms" $t.leaseDurationSeconds | int64 }}
{{- $renew := include "leasehold.ms" $t.renewDeadlineSeconds | int64 }}
{{- $retry := include "leasehold.ms" $t.retryPeriodSeconds | int64 }}
{{- if le $lease $renew }}
{{- fail (printf "timing.leaseDurationSeconds %v must be greater than timing.renewDeadlineSeconds %v (rule: lease duration > renew deadline > retry period × 1.2)" $t.leaseDurationSeconds $t.renewDeadlineSeconds) }}
{{- end }}
{{- if le (float64 $renew) (mulf (float64 $retry) 1.2) }}
{{- fail (printf "timing.renewDeadlineSeconds %v must be greater than timing.retryPeriodSeconds × 1.2 = %v (rule: lease duration > renew deadline > retry period × 1.2)" $t.renewDeadlineSeconds (mulf (float64 $t.retryPeriodSeconds) 1.2)) }}
{{- end }}
{{- /* The command is killed 100 ms before the validity deadline (the lease duration less 1 % and
2 ms), which a renewal moves only when its answer comes: a retry period and an attempt's bound
later. */}}
{{- /* A fresh Redis: nobody leads through the data-loss cooldown (a lease duration), then the
first try comes within a retry period. */}}
{{- $first := ternary (add $lease $retry) $retry $t.dataLossCooldown }}
{{- if and .Values.helmTest.enabled (le (mul (int64 .Values.helmTest.timeoutSeconds) 1000) $first) }}
{{- fail (printf "helmTest.timeoutSeconds %v is not longer than a fresh Redis's first election may take (%v ms: timing.leaseDurationSeconds of data-loss cooldown and a retry period); the test would fail on a fresh install: raise it" .Values.helmTest.timeoutSeconds $first) }}
{{- end }}
{{- $renewed := addf (float64 $retry) (maxf (float64 $retry) (divf (float64 $renew) 3.0)) 100.0 }}
{{- $drift := 0.01 }}
{{- range .Values.extraArgs }}{{ if hasPrefix "--drift-factor=" . }}{{ $drift = float64 (trimPrefix "--drift-factor=" .) }}{{ end }}{{ end }}
{{- range .Values.extraEnv }}{{ if and (eq .name "LEASEHOLD_DRIFT_FACTOR") .value }}{{ $drift = float64 .value }}{{ end }}{{ end }}
{{- if and .Values.exec.enabled (le (subf (mulf (float64 $lease) (subf 1.0 $drift)) 2.0) $renewed) }}
{{- fail (printf "timing.leaseDurationSeconds %v is too short for exec: it must be greater than the drift margin, timing.retryPeriodSeconds, a renewal attempt's bound (timing.renewDeadlineSeconds / 3, or the retry period) and 100 ms: the command is killed 100 ms before its term's validity deadline" $t.leaseDurationSeconds) }}
{{- end }}
{{- if ge (int64 .Values.http.maxEventStreams) (int64 .Values.http.maxConnections) }}
{{- fail (printf "http.maxEventStreams %v must be lower than http.maxConnections %v: event streams are connections too, and the others need some" .Values.http.maxEventStreams .Values.http.maxConnections) }}
{{- end }}
{{- with .Values.candidateCheck }}
{{- if or .url .command }}
{{- $period := include "leasehold.ms" .periodSeconds | int64 }}
{{- if gt (include "leasehold.ms" .timeoutSeconds | int64) $period }}
{{- fail (printf "candidateCheck.timeoutSeconds %v must be no longer than candidateCheck.periodSeconds %v" .timeoutSeconds .periodSeconds) }}
{{- end }}
{{- range $name, $n := dict "failureThreshold" .failureThreshold "successThreshold" .successThreshold }}
{{- if gt (mul $period (int64 $n)) 3600000 }}
{{- fail (printf "candidateCheck.%s %v times candidateCheck.periodSeconds must be at most 3600 seconds: a check that takes longer to judge never puts a sick replica out" $name $n) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- if and .Values.candidateCheck.command (not .Values.exec.enabled) }}
{{- fail "candidateCheck.command runs by /bin/sh -c, and leasehold's image has no shell: every check would fail and no replica lead; use candidateCheck.url, or exec.enabled with your image" }}
{{- end }}
{{- if and (not .Values.serviceAccount.create) (not .Values.serviceAccount.name) .Values.rbac.create }}
{{- fail "serviceAccount.create=false: name the ServiceAccount the pods run as (serviceAccount.name); the Role would else be bound to the namespace's `default`, which every pod without its own runs as" }}
{{- end }}
{{- if and .Values.rbac.create (eq (toString .Values.serviceAccount.name) "default") }}
{{- fail "serviceAccount.name default: every pod of the namespace without its own ServiceAccount runs as it, and the Role (patch on pods) would be bound to it; name one for leasehold" }}
{{- end }}
{{- /* Loopback: 127.0.0.0/8, localhost, ::1 in any of its spellings, and IPv4's as IPv6 maps it. */}}
{{- if regexMatch "^(127\\.|localhost$|[0:]*:0*1$|(?i:[0:]*:ffff:127\\.))" (toString .Values.http.bindAddress) }}
{{- fail (printf "http.bindAddress %s: the kubelet probes the pod's IP, which a loopback address does not listen on; every probe would fail" .Values.http.bindAddress) }}
{{- end }}
{{- with .Values.strategy }}
{{- with .rollingUpdate }}
{{- if and (hasKey . "maxSurge") (hasKey . "maxUnavailable") (eq (toString .maxSurge) "0") (eq (toString .maxUnavailable) "0") }}
{{- fail "strategy.rollingUpdate: maxSurge and maxUnavailable both 0 leave a rollout nothing to do; the API server refuses it" }}
{{- end }}
{{- end }}
{{- end }}
{{- if and (not .Values.timing.dataLossCooldown) (not .Values.redis.urlKey) (regexMatch "\\+(sentinel|cluster)://" (.Values.redis.url | default "")) }}
{{- fail "timing.dataLossCooldown=false is only for a Redis that never fails over, and a redis+sentinel:// or redis+cluster:// one does: leasehold refuses it at start" }}
{{- end }}
{{- if regexMatch "[?&](?i:pass|password)=" (.Values.redis.url | default "") }}
{{- fail "redis.url: carries a password (a pass= or password= parameter), which would show in the Deployment; put it in the Secret (redis.passwordKey)" }}
{{- end }}
{{- if and (not .Values.redis.urlKey) (not .Values.redis.url) }}
{{- fail "redis: set redis.urlKey (a key of the Secret redis.existingSecret that holds the URL) or redis.url" }}
{{- end }}
{{- $tls := .Values.redis.tls }}
{{- if and $tls.existingSecret (not (include "leasehold.tlsVolume" .)) }}
{{- fail "redis.tls.existingSecret: name the keys it holds (redis.tls.caKey, and clientCertKey with clientKeyKey for mutual TLS); without them nothing of it is mounted" }}
{{- end }}
{{- if and (include "leasehold.tlsVolume" .) (not $tls.existingSecret) }}
{{- fail "redis.tls: caKey, clientCertKey and clientKeyKey name keys of a Secret; set redis.tls.existingSecret" }}
{{- end }}
{{- if ne (not $tls.clientCertKey) (not $tls.clientKeyKey) }}
{{- fail "redis.tls: mutual TLS needs both clientCertKey and clientKeyKey, or neither" }}
{{- end }}
{{- if and (gt (int64 .Values.redis.waitReplicas) 0) (ge (float64 .Values.redis.waitTimeoutSeconds) (float64 $t.retryPeriodSeconds)) }}
{{- fail (printf "redis.waitTimeoutSeconds %v must be shorter than timing.retryPeriodSeconds %v: a renewal that waits for replicas must finish before the next one is due" .Values.redis.waitTimeoutSeconds $t.retryPeriodSeconds) }}
{{- end }}
{{- if and .Values.redis.sentinelPasswordKey .Values.redis.url (not .Values.redis.urlKey) (not (contains "+sentinel://" .Values.redis.url)) }}
{{- fail "redis.sentinelPasswordKey is only for redis+sentinel:// URLs" }}
{{- end }}
{{- range $key, $_ := .Values.commonLabels }}
{{- if or (eq $key "helm.sh/chart") (hasPrefix "app.kubernetes.io/" $key) }}
{{- fail (printf "commonLabels: %s is one of the chart's own labels (helm.sh/chart, app.kubernetes.io/*), which name the release and select its pods; choose another key" $key) }}
{{- end }}
{{- end }}
{{- range $key, $_ := .Values.podLabels }}
{{- if has $key (list "app.kubernetes.io/name" "app.kubernetes.io/instance") }}
{{- fail (printf "podLabels: %s is one of the labels that select the release's pods; choose another key" $key) }}
{{- end }}
{{- end }}
{{- if has .Values.leaderLabel (list "app.kubernetes.io/name" "app.kubernetes.io/instance" "pod-template-hash") }}
{{- fail (printf "leaderLabel: %s is a label that selects the release's pods (app.kubernetes.io/name, app.kubernetes.io/instance, and the Deployment's pod-template-hash); leasehold keeps the leader label on the leader's pod alone, so the followers would lose it: choose another key" .Values.leaderLabel) }}
{{- end }}
{{- range $values := list "commonLabels" "podLabels" }}
{{- $labels := index $.Values $values | default dict }}
{{- if hasKey $labels $.Values.leaderLabel }}
{{- fail (printf "%s: %s is the leader label (leaderLabel), which leasehold keeps on the leader's pod alone; choose another key" $values $.Values.leaderLabel) }}
{{- end }}
{{- end }}
{{- $chartFlags := list }}
{{- range include "leasehold.runArgs" . | fromYamlArray }}
{{- $chartFlags = append $chartFlags (regexReplaceAll "=.*$" . "") }}
{{- end }}
{{- /* client-go's names, which `leasehold run` takes as aliases. */}}
{{- $aliases := dict "--leader-elect-resource-name" "--lease-name" "--leader-elect-lease-duration" "--lease-duration" "--leader-elect-renew-deadline" "--renew-deadline" "--leader-elect-retry-period" "--retry-period" "--leader-elect-resource-namespace" "--namespace" }}
{{- $given := list }}
{{- range .Values.extraArgs }}
{{- $flag := regexReplaceAll "=.*$" . "" }}
{{- $flag = get $aliases $flag | default $flag }}
{{- $given = append $given (list "extraArgs" $flag $flag) }}
{{- end }}
{{- range .Values.extraEnv }}
{{- if hasPrefix "LEASEHOLD_" .name }}
{{- $given = append $given (list "extraEnv" .name (printf "--%s" (trimPrefix "LEASEHOLD_" .name | lower | replace "_" "-"))) }}
{{- end }}
{{- end }}
{{- /* What the pod gives leasehold: its name is the identity, its namespace the lease's. */}}
{{- $pods := dict "--identity" "the pod's name, which the chart gives (POD_NAME) and the Kubernetes integration requires" "--namespace" "the pod's namespace, which the chart gives (POD_NAMESPACE) and its Role is for" }}
{{- range $given }}
{{- $where := printf "%s: %s" (index . 0) (index . 1) }}
{{- $flag := index . 2 }}
{{- $other := ternary (replace "--no-" "--" $flag) (replace "--" "--no-" $flag) (hasPrefix "--no-" $flag) }}
{{- if has $flag $chartFlags }}
{{- if eq (index . 0) "extraArgs" }}
{{- fail (printf "%s repeats a flag the chart sets from its values (see the chart's README): set that value instead; leasehold refuses a flag given twice, at every start" $where) }}
{{- end }}
{{- fail (printf "%s repeats %s, a flag the chart sets from its values (see the chart's README): set that value instead; the flag would win over the variable, in silence" $where $flag) }}
{{- else if has $other $chartFlags }}
{{- fail (printf "%s undoes %s, which the chart sets from its values (see the chart's README): set that value instead" $where $other) }}
{{- else if hasKey $pods $flag }}
{{- fail (printf "%s is %s: leave it out" $where (get $pods $flag)) }}
{{- end }}
{{- end }}
{{- if and .Values.exec.enabled (not .Values.exec.command) }}
{{- fail "exec.enabled: exec.command must name the command to run while leading, e.g. [\"/app/worker\"]" }}
{{- end }}
{{- if and .Values.exec.enabled (not .Values.exec.image.repository) }}
{{- fail "exec.enabled: exec.image.repository must name your image, which holds your command and the leasehold binary at exec.leaseholdPath" }}
{{- end }}
{{- if and .Values.exec.enabled (not .Values.exec.image.tag) (not .Values.exec.image.digest) }}
{{- fail "exec.enabled: set exec.image.tag or exec.image.digest to the version of your image; there is no default, because a floating tag such as `latest` can run different code on different nodes" }}
{{- end }}
{{- if eq .Values.readiness "leader" }}
{{- if .Values.podDisruptionBudget.enabled }}
{{- fail "readiness=leader: only the leader pod is ever ready, so a PodDisruptionBudget would block every eviction of the leader (node drains hang), and `helm --wait` and `kubectl rollout status` never see the Deployment rolled out (they count ready replicas). Set podDisruptionBudget.enabled=false, install without --wait (or with --wait=legacy), and watch leadership with the leader label; or keep readiness=member, whose Service still routes to the leader alone. See docs/DEPLOY.md." }}
{{- end }}
{{- with .Values.strategy }}
{{- /* Without a type the API server takes it for RollingUpdate. */}}
{{- if eq (toString (.type | default "RollingUpdate")) "RollingUpdate" }}
{{- $mu := "" }}
{{- if .rollingUpdate }}{{ $mu = .rollingUpdate.maxUnavailable }}{{ end }}
{{- $ok := false }}
{{- if kindIs "string" $mu }}{{ $ok = eq $mu "100%" }}{{ else if not (kindIs "invalid" $mu) }}{{ $ok = ge (int64 $mu) (int64 $.Values.replicaCount) }}{{ end }}
{{- if not $ok }}
{{- fail (printf "readiness=leader with strategy.rollingUpdate.maxUnavailable %v: the Deployment controller counts only ready pods (the leader) as available and would never replace the old leader; use maxUnavailable \"100%%\" or type Recreate, or leave strategy empty" $mu) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}

{{/* --http-addr: the bind address and port (an IPv6 address in brackets). */}}
{{- define "leasehold.httpAddr" -}}
{{- if contains ":" .Values.http.bindAddress }}
{{- printf "[%s]:%v" .Values.http.bindAddress .Values.http.port }}
{{- else }}
{{- printf "%s:%v" .Values.http.bindAddress .Values.http.port }}
{{- end }}
{{- end }}
