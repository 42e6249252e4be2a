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

{{/* The image reference, as upstream's chart spells it: repository:tag, pinned with @digest when one is given. The
tag defaults to appVersion (one version for the stack). No repository is assumed: none is published under a default
name, so an unset one fails the render with what to set instead of a pod that can never pull its image. */}}
{{- define "karpy.image" -}}
{{- $image := .Values.controller.image -}}
{{- $repository := required "controller.image.repository is required: the karpy image you built from the Dockerfile and pushed (the Pulumi component sets the one it builds)" $image.repository -}}
{{- $reference := printf "%s:%s" $repository (default .Chart.AppVersion $image.tag) -}}
{{- if $image.digest -}}
{{- $reference = printf "%s@%s" $reference $image.digest -}}
{{- end -}}
{{- $reference -}}
{{- end -}}

{{/* Pod (anti-)affinity terms without a labelSelector select the controller's own pods (upstream's patch). */}}
{{- define "karpy.podAffinityTerms" -}}
{{- $selector := dict "matchLabels" (include "karpy.selectorLabels" .root | fromYaml) -}}
{{- $patched := dict -}}
{{- range $key, $terms := .affinity -}}
{{- $out := list -}}
{{- range $term := $terms -}}
{{- $term = deepCopy $term -}}
{{- $target := ternary $term.podAffinityTerm $term (eq $key "preferredDuringSchedulingIgnoredDuringExecution") -}}
{{- if not (hasKey $target "labelSelector") -}}
{{- $_ := set $target "labelSelector" $selector -}}
{{- end -}}
{{- $out = append $out $term -}}
{{- end -}}
{{- $_ := set $patched $key $out -}}
{{- end -}}
{{- toYaml $patched -}}
{{- end -}}

{{/* The user's affinity (Helm has merged it with the defaults key by key) with two guarantees: every required node
selector term keeps karpy off the nodes it manages (`karpenter.sh/nodepool DoesNotExist`, unless the term names that
key itself), and pod affinity terms select the controller's pods when they name no labelSelector. */}}
{{- define "karpy.affinity" -}}
{{- $affinity := deepCopy (.Values.affinity | default dict) -}}
{{- $node := $affinity.nodeAffinity | default dict -}}
{{- $required := $node.requiredDuringSchedulingIgnoredDuringExecution | default dict -}}
{{- $terms := list -}}
{{- range $term := ($required.nodeSelectorTerms | default (list dict)) -}}
{{- $expressions := $term.matchExpressions | default list -}}
{{- $named := false -}}
{{- range $expression := $expressions -}}
{{- if eq $expression.key "karpenter.sh/nodepool" -}}{{- $named = true -}}{{- end -}}
{{- end -}}
{{- if not $named -}}
{{- $expressions = append $expressions (dict "key" "karpenter.sh/nodepool" "operator" "DoesNotExist") -}}
{{- end -}}
{{- $terms = append $terms (merge (dict "matchExpressions" $expressions) (deepCopy $term)) -}}
{{- end -}}
{{- $_ := set $required "nodeSelectorTerms" $terms -}}
{{- $_ := set $node "requiredDuringSchedulingIgnoredDuringExecution" $required -}}
{{- $_ := set $affinity "nodeAffinity" $node -}}
{{- range $key := list "podAffinity" "podAntiAffinity" -}}
{{- with get $affinity $key -}}
{{- $_ := set $affinity $key (include "karpy.podAffinityTerms" (dict "root" $ "affinity" .) | fromYaml) -}}
{{- end -}}
{{- end -}}
{{- toYaml $affinity -}}
{{- end -}}

{{/* Topology spread constraints without a labelSelector select the controller's pods (upstream's patch). */}}
{{- define "karpy.topologySpreadConstraints" -}}
{{- $selector := dict "matchLabels" (include "karpy.selectorLabels" . | fromYaml) -}}
{{- $out := list -}}
{{- range $constraint := .Values.topologySpreadConstraints -}}
{{- $constraint = deepCopy $constraint -}}
{{- if not (hasKey $constraint "labelSelector") -}}
{{- $_ := set $constraint "labelSelector" $selector -}}
{{- end -}}
{{- $out = append $out $constraint -}}
{{- end -}}
{{- toYaml $out -}}
{{- end -}}

{{/* The container security context: fixed hardening, with controller.securityContext merged over it. */}}
{{- define "karpy.securityContext" -}}
{{- $fixed := dict "privileged" false "allowPrivilegeEscalation" false "readOnlyRootFilesystem" true "runAsNonRoot" true "runAsUser" 65532 "runAsGroup" 65532 "capabilities" (dict "drop" (list "ALL")) -}}
{{- toYaml (merge (deepCopy (.Values.controller.securityContext | default dict)) $fixed) -}}
{{- end -}}

{{/* A gates map -> "NodeRepair=false,ReservedCapacity=true,..." (upstream's FEATURE_GATES / AWS_FEATURE_GATES). */}}
{{- define "karpy.featureGates" -}}
{{- $gates := list -}}
{{- range $name, $on := .gates -}}
{{- $gates = append $gates (printf "%s%s=%t" (upper (substr 0 1 $name)) (substr 1 -1 $name) $on) -}}
{{- end -}}
{{- join "," $gates -}}
{{- end -}}

{{/* The leader-election Lease: the controller's LEADER_ELECTION_NAME and the only Lease the Role lets it write. */}}
{{- define "karpy.leaderElectionName" -}}
{{- default (printf "%s-leader-election" (include "karpy.fullname" .)) .Values.settings.leaderElectionName -}}
{{- end -}}
