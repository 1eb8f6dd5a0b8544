{{/*
Name prefix of the policies: fullnameOverride, or the release name.
*/}}
{{- define "mongodb-member-operator-karmada.fullname" -}}
{{- default .Release.Name .Values.fullnameOverride | trunc 50 | trimSuffix "-" }}
{{- end }}

{{/*
Labels of every object of the chart.
*/}}
{{- define "mongodb-member-operator-karmada.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/*
Labels the mongodb-member-operator chart puts on the operator's objects.
*/}}
{{- define "mongodb-member-operator-karmada.operatorSelector" -}}
labelSelector:
  matchLabels:
    app.kubernetes.io/name: {{ .Values.operator.name }}
    app.kubernetes.io/instance: {{ .Values.operator.releaseName }}
{{- end }}

{{/*
Placement shared by the policies: the chosen clusters, one full copy in each.
*/}}
{{- define "mongodb-member-operator-karmada.placement" -}}
placement:
  {{- with .Values.propagation.clusterAffinity }}
  clusterAffinity:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  replicaScheduling:
    replicaSchedulingType: Duplicated
{{- end }}
