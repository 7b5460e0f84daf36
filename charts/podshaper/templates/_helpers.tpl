{{/* The namespace podshaper runs in. */}}
{{- define "podshaper.namespace" -}}
{{- .Values.namespace | default .Release.Namespace -}}
{{- end -}}

{{/* The namespace podshaper-shm runs in, alone (Pod Security privileged). */}}
{{- define "podshaper.shmNamespace" -}}
{{- .Values.shm.namespace -}}
{{- end -}}

{{/* Labels on every object (the kustomize base's, plus Helm's). */}}
{{- define "podshaper.labels" -}}
app.kubernetes.io/part-of: podshaper
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end -}}

{{/* A component's image: include "podshaper.image" (list $ .Values.webhook.image) */}}
{{- define "podshaper.image" -}}
{{- $root := index . 0 -}}
{{- $image := index . 1 -}}
{{- with $image.registry }}{{ trimSuffix "/" . }}/{{ end }}{{ $image.repository }}:{{ $image.tag | default $root.Chart.AppVersion }}
{{- end -}}

{{/* The pod-level fields every component shares:
     include "podshaper.podScheduling" (list $ .Values.webhook) */}}
{{- define "podshaper.podScheduling" -}}
{{- $root := index . 0 -}}
{{- $c := index . 1 -}}
{{- with $c.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with $root.Values.imagePullSecrets }}
imagePullSecrets:
{{- range . }}
- name: {{ . }}
{{- end }}
{{- end }}
securityContext:
  {{- toYaml $root.Values.podSecurityContext | nindent 2 }}
{{- with $c.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $c.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $c.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* "true" when the value is a number (values files give float64, --set int64). */}}
{{- define "podshaper.isNumber" -}}
{{- if or (kindIs "float64" .) (kindIs "int64" .) (kindIs "int" .) }}true{{ end -}}
{{- end -}}

{{/* The memlock value as text: unlimited, or the quantity as given ("4Mi"; a number
     from a values file is a float64, written back whole). */}}
{{- define "podshaper.memlock" -}}
{{- $m := .Values.memlock -}}
{{- if include "podshaper.isNumber" $m }}{{ int64 $m }}{{ else }}{{ toString $m }}{{ end -}}
{{- end -}}

{{/* RLIMIT_MEMLOCK for the NRI ulimit annotation: 18446744073709551615 (unlimited), or
     the quantity in bytes. The webhook reads any Kubernetes quantity; here a whole
     number with an optional suffix (Ki Mi Gi Ti Pi Ei, k M G T P E). */}}
{{- define "podshaper.memlockRlimit" -}}
{{- $m := include "podshaper.memlock" . -}}
{{- if eq $m "unlimited" -}}
18446744073709551615
{{- else -}}
{{- $parts := regexFindAll "^([0-9]+)(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$" $m 1 -}}
{{- if not $parts }}
{{- fail (printf "memlock: %q: expected unlimited or a whole quantity of bytes such as 4Mi or 64Gi" $m) }}
{{- end }}
{{- $digits := regexReplaceAll "[^0-9].*$" $m "" -}}
{{- $suffix := trimPrefix $digits $m -}}
{{- $scale := get (dict "" 1 "Ki" 1024 "Mi" 1048576 "Gi" 1073741824 "Ti" 1099511627776 "Pi" 1125899906842624 "Ei" 1152921504606846976 "k" 1000 "M" 1000000 "G" 1000000000 "T" 1000000000000 "P" 1000000000000000 "E" 1000000000000000000) $suffix -}}
{{- if gt (mulf (float64 $digits) (float64 $scale)) 9.2e18 }}
{{- fail (printf "memlock: %q: more than a 64-bit count of bytes; use unlimited" $m) }}
{{- end }}
{{- if eq (int64 $digits) 0 }}
{{- fail (printf "memlock: %q: a locked-memory limit is at least 1 byte" $m) }}
{{- end }}
{{- mul (int64 $digits) $scale -}}
{{- end -}}
{{- end -}}

{{/* The logging flags of all three components, as more items of an args flow list: none
at the defaults, so that the default render is the manifests' objects. */}}
{{- define "podshaper.logArgs" -}}
{{- if ne (toString .Values.logLevel) "info" }}, --log-level, {{ .Values.logLevel | quote }}{{ end }}
{{- if ne (toString .Values.logFormat) "text" }}, --log-format, {{ .Values.logFormat | quote }}{{ end }}
{{- end -}}

{{/* Values that would install a broken podshaper fail the render, naming the value. */}}
{{- define "podshaper.validate" -}}
{{- if not (has .Values.certificates.mode (list "operator" "cert-manager")) }}
{{- fail (printf "certificates.mode: %q: expected operator or cert-manager" (toString .Values.certificates.mode)) }}
{{- end }}
{{- if not (has .Values.webhook.failurePolicy (list "Fail" "Ignore")) }}
{{- fail (printf "webhook.failurePolicy: %q: expected Fail or Ignore" (toString .Values.webhook.failurePolicy)) }}
{{- end }}
{{- $t := .Values.webhook.timeoutSeconds }}
{{- if or (not (include "podshaper.isNumber" $t)) (lt (float64 $t) 1.0) (gt (float64 $t) 30.0) (ne (float64 $t) (float64 (int $t))) }}
{{- fail (printf "webhook.timeoutSeconds: %v: expected whole seconds from 1 to 30 (the API server's limit)" $t) }}
{{- end }}
{{- range $c := list "webhook" "operator" }}
{{- $r := (index $.Values $c).replicas }}
{{- if or (not (include "podshaper.isNumber" $r)) (lt (float64 $r) 0.0) }}
{{- fail (printf "%s.replicas: %v: expected a whole number" $c $r) }}
{{- end }}
{{- end }}
{{- if hasKey (.Values.webhook.config | default dict) "memlock" }}
{{- fail "webhook.config.memlock: set the top-level value memlock instead: it feeds the agent's memlock-probe too" }}
{{- end }}
{{- if regexMatch "(?m)^memlock:" (.Values.webhook.configText | default "") }}
{{- fail "webhook.configText: leave memlock out and set the top-level value memlock: it feeds the agent's memlock-probe too" }}
{{- end }}
{{- $_ := include "podshaper.memlockRlimit" . }}
{{- if not (has (toString .Values.logLevel) (list "trace" "debug" "info" "warn" "error")) }}
{{- fail (printf "logLevel: %q: expected trace, debug, info, warn or error" (toString .Values.logLevel)) }}
{{- end }}
{{- if not (has (toString .Values.logFormat) (list "text" "json")) }}
{{- fail (printf "logFormat: %q: expected text or json" (toString .Values.logFormat)) }}
{{- end }}
{{- if .Values.shm.enabled }}
{{- if eq (include "podshaper.shmNamespace" .) (include "podshaper.namespace" .) }}
{{- fail (printf "shm.namespace: %q is podshaper's own namespace, which runs under Pod Security restricted: podshaper-shm needs one of its own (privileged)" (include "podshaper.shmNamespace" .)) }}
{{- end }}
{{- if not (regexMatch "^([0-9]+(\\.[0-9]+)?(ms|s|m|h))+$" (toString .Values.shm.interval)) }}
{{- fail (printf "shm.interval: %q: expected a duration such as 1s or 500ms" (toString .Values.shm.interval)) }}
{{- end }}
{{- if regexMatch "^([0-9]{1,2}(\\.[0-9]+)?ms|0+(\\.0+)?(s|m|h))$" (toString .Values.shm.interval) }}
{{- fail (printf "shm.interval: %q: below 100ms (podshaper-shm refuses it)" (toString .Values.shm.interval)) }}
{{- end }}
{{- end }}
{{- range $k := list "interval" "heartbeat" }}
{{- $v := index $.Values.agent $k }}
{{- if or (not (include "podshaper.isNumber" $v)) (lt (float64 $v) 1.0) }}
{{- fail (printf "agent.%s: %v: expected seconds, at least 1" $k $v) }}
{{- end }}
{{- end }}
{{- end -}}

{{/* The annotations of the prune hook's objects (templates/prune.yaml); the argument: its weight. */}}
{{- define "podshaper.pruneHook" -}}
helm.sh/hook: pre-delete
helm.sh/hook-weight: {{ . | quote }}
helm.sh/hook-delete-policy: before-hook-creation,hook-succeeded
{{- end }}

{{/* The annotations of `helm test`'s objects (templates/tests/); the argument: its weight. */}}
{{- define "podshaper.testHook" -}}
helm.sh/hook: test
helm.sh/hook-weight: {{ . | quote }}
helm.sh/hook-delete-policy: before-hook-creation,hook-succeeded
{{- end }}
