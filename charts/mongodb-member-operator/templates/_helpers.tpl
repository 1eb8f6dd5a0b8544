{{/*
Chart name, or nameOverride.
*/}}
{{- define "mongodb-member-operator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Full name of the release's objects: fullnameOverride, or the release name with the
chart name appended when the release name does not already contain it.
*/}}
{{- define "mongodb-member-operator.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/*
Chart name and version, for the helm.sh/chart label.
*/}}
{{- define "mongodb-member-operator.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Labels selecting the operator pod.
*/}}
{{- define "mongodb-member-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "mongodb-member-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/*
Labels of every object (the Karmada chart selects the objects to propagate by
app.kubernetes.io/name and app.kubernetes.io/instance).
*/}}
{{- define "mongodb-member-operator.labels" -}}
helm.sh/chart: {{ include "mongodb-member-operator.chart" . }}
{{ include "mongodb-member-operator.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/component: operator
app.kubernetes.io/part-of: mongodb-member-operator
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/*
Name of the operator's ServiceAccount.
*/}}
{{- define "mongodb-member-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "mongodb-member-operator.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
The operator container's image.
*/}}
{{- define "mongodb-member-operator.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) }}
{{- end }}

{{/*
Rules on namespaced resources: everything the operator reads and writes for its
MongoDB objects. Granted cluster-wide (ClusterRole) or in the watched namespace
(Role). Keep in step with the operator's controllers.
*/}}
{{- define "mongodb-member-operator.namespacedRules" -}}
- apiGroups: ["middleware.fedstate.io"]
  resources: ["mongodbs"]
  verbs: ["get", "list", "watch", "patch", "update"]
- apiGroups: ["middleware.fedstate.io"]
  resources: ["mongodbs/status"]
  verbs: ["get", "patch", "update"]
- apiGroups: ["middleware.fedstate.io"]
  resources: ["mongodbs/finalizers"]
  verbs: ["update"]
- apiGroups: ["apps"]
  resources: ["statefulsets"]
  verbs: ["get", "list", "watch", "create", "update", "patch", "delete"]
- apiGroups: [""]
  resources: ["services", "secrets"]
  verbs: ["get", "list", "watch", "create", "patch", "update", "delete"]
- apiGroups: [""]
  resources: ["configmaps"]
  verbs: ["get", "list", "watch"]
- apiGroups: [""]
  resources: ["persistentvolumeclaims"]
  verbs: ["get", "list", "watch", "delete"]
# delete: a member's pod is replaced by the operator for a roll (OnDelete StatefulSets).
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["get", "list", "watch", "delete"]
- apiGroups: ["policy"]
  resources: ["poddisruptionbudgets"]
  verbs: ["get", "list", "watch", "create", "patch", "update", "delete"]
- apiGroups: ["events.k8s.io"]
  resources: ["events"]
  verbs: ["create", "patch"]
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create", "patch"]
{{- end }}

{{/*
The startup check: read the MongoDB CRD (cluster-scoped, so always a ClusterRole
rule), and only that CRD.
*/}}
{{- define "mongodb-member-operator.crdRule" -}}
- apiGroups: ["apiextensions.k8s.io"]
  resources: ["customresourcedefinitions"]
  resourceNames: ["mongodbs.middleware.fedstate.io"]
  verbs: ["get", "list", "watch"]
{{- end }}
