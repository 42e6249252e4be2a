{{/* Chart name, truncated to the 63 characters a label value allows. */}}
{{- define "karpy.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Full name: the release name, or release-chart when the release name does not contain the chart name. */}}
{{- define "karpy.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "karpy.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "karpy.selectorLabels" -}}
app.kubernetes.io/name: {{ include "karpy.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "karpy.labels" -}}
helm.sh/chart: {{ include "karpy.chart" . }}
{{ include "karpy.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.additionalLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "karpy.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "karpy.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The image reference: digest wins over tag; the tag defaults to appVersion (one version for the stack). */}}
{{- define "karpy.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/* featureGates map -> "NodeRepair=false,ReservedCapacity=true,..." (upstream's FEATURE_GATES format). */}}
{{- define "karpy.featureGates" -}}
{{- $gates := list -}}
{{- range $name, $on := .Values.settings.featureGates -}}
{{- $gates = append $gates (printf "%s%s=%t" (upper (substr 0 1 $name)) (substr 1 -1 $name) $on) -}}
{{- end -}}
{{- join "," $gates -}}
{{- end -}}
