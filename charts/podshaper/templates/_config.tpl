{{/* podshaper-webhook's config.yaml. */}}
{{- define "podshaper.webhookConfig" -}}
# podshaper-webhook configuration (README "Config"); every key optional.
{{- if .Values.webhook.configText }}
{{ .Values.webhook.configText | trim }}
{{- else if .Values.webhook.config }}
{{ toYaml .Values.webhook.config }}
{{- end }}
memlock: {{ include "podshaper.memlock" . }}
{{- end -}}

{{/* podshaper-operator's config.yaml (docs/operator.md). */}}
{{- define "podshaper.operatorConfig" -}}
{{- $ns := include "podshaper.namespace" . -}}
{{- $le := .Values.operator.leaderElection -}}
# podshaper-operator configuration (docs/operator.md); every key optional.
listen: ":8443"
eventNamespace: {{ .Values.operator.eventNamespace | quote }}
pendingGrace: {{ .Values.operator.pendingGrace }}
{{- with .Values.operator.shmProfiles }}
shmProfiles:
  {{- toYaml . | nindent 2 }}
{{- end }}
leaderElection:
  namespace: {{ $ns }}
  name: podshaper-operator
  leaseDuration: {{ $le.leaseDuration }}
  renewDeadline: {{ $le.renewDeadline }}
  retryPeriod: {{ $le.retryPeriod }}
webhookCertificate:
{{- if eq .Values.certificates.mode "cert-manager" }}
  mode: external            # cert-manager makes the certificate and injects the caBundle
{{- else }}
  mode: operator            # a CA and a serving certificate made and renewed by the operator
  namespace: {{ $ns }}
  secretName: podshaper-webhook-tls
  webhookConfiguration: podshaper
  service: podshaper-webhook
  validity: {{ .Values.certificates.validity }}
  renewBefore: {{ .Values.certificates.renewBefore }}
{{- end }}
{{- end -}}
