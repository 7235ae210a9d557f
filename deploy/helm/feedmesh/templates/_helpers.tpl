{{- define "feedmesh.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "feedmesh.headless" -}}{{ include "feedmesh.fullname" . }}-gossip{{- end -}}

{{- define "feedmesh.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "feedmesh.selector" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "feedmesh.serviceAccount" -}}
{{- if .Values.serviceAccount.create -}}{{ default (include "feedmesh.fullname" .) .Values.serviceAccount.name }}{{- else -}}{{ default "default" .Values.serviceAccount.name }}{{- end -}}
{{- end -}}

{{/* Seconds of a Go duration given as Ns, Nm or Nh. */}}
{{- define "feedmesh.seconds" -}}
{{- $d := toString . -}}
{{- if hasSuffix "ms" $d -}}0
{{- else if hasSuffix "s" $d -}}{{ trimSuffix "s" $d | int }}
{{- else if hasSuffix "m" $d -}}{{ mul (trimSuffix "m" $d | int) 60 }}
{{- else if hasSuffix "h" $d -}}{{ mul (trimSuffix "h" $d | int) 3600 }}
{{- else -}}{{ fail (printf "node.drainTimeout %q: give whole seconds, minutes or hours (30s, 2m)" $d) }}
{{- end -}}
{{- end -}}
