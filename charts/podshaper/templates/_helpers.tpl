{{/* The namespace podshaper runs in. */}}
{{- define "podshaper.namespace" -}}
{{- .Values.namespace | default .Release.Namespace -}}
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
{{- range $k := list "interval" "heartbeat" }}
{{- $v := index $.Values.agent $k }}
{{- if or (not (include "podshaper.isNumber" $v)) (lt (float64 $v) 1.0) }}
{{- fail (printf "agent.%s: %v: expected seconds, at least 1" $k $v) }}
{{- end }}
{{- end }}
{{- end -}}
