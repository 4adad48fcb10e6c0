{{/*
The flags the chart gives `leasehold run`, as a YAML list: the deployment renders them before
extraArgs, and leasehold.validate refuses an extraArgs flag that repeats one (the parser would
refuse it at every start: a crash loop).
*/}}
{{- define "leasehold.runArgs" -}}
- run
- --kubernetes=on
- {{ printf "--readiness=%s" .Values.readiness | quote }}
- {{ printf "--http-addr=%s" (include "leasehold.httpAddr" .) | quote }}
- {{ printf "--http-max-connections=%d" (int64 .Values.http.maxConnections) | quote }}
- {{ printf "--http-max-event-streams=%d" (int64 .Values.http.maxEventStreams) | quote }}
- {{ printf "--leader-label=%s" .Values.leaderLabel | quote }}
- {{ printf "--lease-duration=%s" (include "leasehold.duration" .Values.timing.leaseDurationSeconds) | quote }}
- {{ printf "--renew-deadline=%s" (include "leasehold.duration" .Values.timing.renewDeadlineSeconds) | quote }}
- {{ printf "--retry-period=%s" (include "leasehold.duration" .Values.timing.retryPeriodSeconds) | quote }}
- {{ printf "--log-format=%s" .Values.logs.format | quote }}
- {{ printf "--log=%s" .Values.logs.filter | quote }}
{{- with .Values.leaseName }}
- {{ printf "--lease-name=%s" . | quote }}
{{- end }}
{{- if not .Values.timing.dataLossCooldown }}
- --no-data-loss-cooldown
{{- end }}
{{- if not .Values.kubernetes.leaseMirror }}
- --no-lease-mirror
{{- end }}
{{- if not .Values.kubernetes.events }}
- --no-events
{{- end }}
{{- if .Values.redis.passwordKey }}
- {{ printf "--redis-password-file=%s" (include "leasehold.passwordFile" .) | quote }}
{{- end }}
{{- if .Values.redis.sentinelPasswordKey }}
- {{ printf "--sentinel-password-file=%s" (include "leasehold.sentinelPasswordFile" .) | quote }}
{{- end }}
{{- with .Values.redis.username }}
- {{ printf "--redis-username=%s" . | quote }}
{{- end }}
{{- if .Values.redis.tls.caKey }}
- {{ printf "--redis-ca-file=%s/ca.crt" (include "leasehold.tlsDir" .) | quote }}
{{- end }}
{{- if .Values.redis.tls.clientCertKey }}
- {{ printf "--redis-client-cert-file=%s/client.crt" (include "leasehold.tlsDir" .) | quote }}
- {{ printf "--redis-client-key-file=%s/client.key" (include "leasehold.tlsDir" .) | quote }}
{{- end }}
{{- if gt (int64 .Values.redis.waitReplicas) 0 }}
- {{ printf "--redis-wait-replicas=%d" (int64 .Values.redis.waitReplicas) | quote }}
- {{ printf "--redis-wait-timeout=%s" (include "leasehold.duration" .Values.redis.waitTimeoutSeconds) | quote }}
{{- end }}
{{- with .Values.redis.keyPrefix }}
- {{ printf "--key-prefix=%s" . | quote }}
{{- end }}
{{- if .Values.exec.enabled }}
- {{ printf "--grace-period=%s" (include "leasehold.duration" .Values.exec.gracePeriodSeconds) | quote }}
{{- if .Values.exec.restartCommand }}
- --restart-command
{{- end }}
{{- end }}
{{- with .Values.candidateCheck }}
{{- if or .url .command }}
{{- if .url }}
- {{ printf "--candidate-check=%s" .url | quote }}
{{- else }}
- {{ printf "--candidate-check-command=%s" .command | quote }}
{{- end }}
- {{ printf "--candidate-check-period=%s" (include "leasehold.duration" .periodSeconds) | quote }}
- {{ printf "--candidate-check-timeout=%s" (include "leasehold.duration" .timeoutSeconds) | quote }}
- {{ printf "--candidate-check-failure-threshold=%d" (int64 .failureThreshold) | quote }}
- {{ printf "--candidate-check-success-threshold=%d" (int64 .successThreshold) | quote }}
- {{ printf "--candidate-check-initial-delay=%s" (include "leasehold.duration" .initialDelaySeconds) | quote }}
{{- end }}
{{- end }}
{{- if .Values.statusFile.enabled }}
- {{ printf "--status-file=%s/leader.json" .Values.statusFile.mountPath | quote }}
{{- end }}
{{- end }}

