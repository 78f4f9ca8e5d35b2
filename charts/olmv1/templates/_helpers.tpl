{{/* The controller's namespace. */}}
{{- define "olmv1.namespace" -}}
{{ .Values.namespace.name }}
{{- end -}}

{{/* The controller image: repository with the digest when set, else the tag. */}}
{{- define "olmv1.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag }}
{{- end -}}
{{- end -}}

{{/* The Secret with the metrics certificate, or nothing. */}}
{{- define "olmv1.metricsCertSecret" -}}
{{- if .Values.metrics.certSecret -}}
{{ .Values.metrics.certSecret }}
{{- else if .Values.metrics.certManager.enabled -}}
olmv1-metrics-cert
{{- end -}}
{{- end -}}
