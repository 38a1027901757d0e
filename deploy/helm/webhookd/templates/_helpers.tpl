{{/* The chart's name, or nameOverride. */}}
{{- define "webhookd.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The release's base name for every object; a component adds -gateway or -worker. */}}
{{- define "webhookd.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 52 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 52 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 52 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Labels every object carries. */}}
{{- define "webhookd.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "webhookd.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* Labels that select the release's pods. */}}
{{- define "webhookd.selectorLabels" -}}
app.kubernetes.io/name: {{ include "webhookd.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* The service account the pods run as. */}}
{{- define "webhookd.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "webhookd.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The image reference. */}}
{{- define "webhookd.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* The config file's content. */}}
{{- define "webhookd.config" -}}
{{- toYaml .Values.config -}}
{{- end -}}

{{/*
The container environment: the listen address, one variable per secretEnv
entry (read from an existing Secret), then extraEnv.
*/}}
{{- define "webhookd.env" -}}
- name: WEBHOOKD_LISTEN
  value: {{ printf ":%d" (int .Values.containerPort) | quote }}
{{- range $name, $ref := .Values.secretEnv }}
{{- if $ref }}
- name: {{ $name }}
  valueFrom:
    secretKeyRef:
      name: {{ required (printf "secretEnv.%s.name is required" $name) $ref.name }}
      key: {{ required (printf "secretEnv.%s.key is required" $name) $ref.key }}
      {{- if $ref.optional }}
      optional: true
      {{- end }}
{{- end }}
{{- end }}
{{- with .Values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end -}}
