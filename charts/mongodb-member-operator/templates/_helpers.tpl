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
{{- if .Values.image.digest }}
{{- if not (hasPrefix "sha256:" .Values.image.digest) }}
{{- fail (printf "image.digest must be sha256:<hex>, not %q" .Values.image.digest) }}
{{- end }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) }}
{{- end }}
{{- end }}

{{/*
Rules on namespaced resources: exactly the API calls the operator makes for its
MongoDB objects (src/controller/), nothing more: no update (every write is a
patch or server-side apply), no pods/exec. `create` sits beside `patch` where the
operator server-side applies, because an apply that creates its object is also
authorized as a create. Granted cluster-wide (ClusterRole) or in the watched
namespace (Role). Keep in step with the operator and with
hack/deploy-check/tests/helm_charts.rs.
*/}}
{{- define "mongodb-member-operator.namespacedRules" -}}
# list, watch: the controller's watch of MongoDB objects; patch: the finalizer
# added and removed with a JSON patch (finalizer.rs).
- apiGroups: ["middleware.fedstate.io"]
  resources: ["mongodbs"]
  verbs: ["list", "watch", "patch"]
# patch: status written with server-side apply (write_status).
- apiGroups: ["middleware.fedstate.io"]
  resources: ["mongodbs/status"]
  verbs: ["patch"]
# list, watch: the cache of owned StatefulSets (a pass lists nothing);
# create, patch: server-side apply (apply.rs) and the recorded member entry
# annotation (record.rs, merge patch); delete: a member removed (delete_member),
# or replaced with its pod left running to take a larger claim template (grow.rs).
- apiGroups: ["apps"]
  resources: ["statefulsets"]
  verbs: ["list", "watch", "create", "patch", "delete"]
# list, watch: the cache of owned exporter Deployments; create, patch:
# server-side apply (apply.rs); delete: an exporter no longer wanted (the
# exporter disabled, its member gone: remove_unwanted_exporters).
- apiGroups: ["apps"]
  resources: ["deployments"]
  verbs: ["list", "watch", "create", "patch", "delete"]
# list, watch: the cache of Services with an instance label (member Services),
# and the metadata-only watch that tells when FedState's arbiter Service, read
# by name (get), changed; create, patch: server-side apply of the Services the operator owns, and the
# finalizer that holds a deleted member Service while its member is in the
# set; delete: the metrics Service of a disabled exporter
# (remove_unwanted_exporters).
- apiGroups: [""]
  resources: ["services"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
# get: the Secrets dereference reads by name (kept until the watch shows them
# changed); list, watch: the metadata-only Secret watch; create, patch: server-side apply of the
# Secrets the operator derives; delete: a keyfile Secret no member mounts any
# more (controller/keyfile.rs).
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
# get: hostconf and the custom config, read by name; list, watch: the
# metadata-only watch that tells when they changed.
- apiGroups: [""]
  resources: ["configmaps"]
  verbs: ["get", "list", "watch"]
# list, watch: the data claims' cache (their size); patch: a claim expanded to
# spec.persistence.storage (grow.rs); delete: a removed member's data claim
# (delete_member).
- apiGroups: [""]
  resources: ["persistentvolumeclaims"]
  verbs: ["list", "watch", "patch", "delete"]
# list, watch: the member pods' cache; delete: the roll replaces a member's
# pod (OnDelete StatefulSets).
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["list", "watch", "delete"]
# list, watch: owned PodDisruptionBudgets (Controller::owns); create, patch:
# server-side apply.
- apiGroups: ["policy"]
  resources: ["poddisruptionbudgets"]
  verbs: ["list", "watch", "create", "patch"]
# create, patch: the operator's Event recorder publishes events.k8s.io/v1
# Events and patches a repeated one's series.
- apiGroups: ["events.k8s.io"]
  resources: ["events"]
  verbs: ["create", "patch"]
{{- end }}

{{/*
The startup check: get the MongoDB CRD by name (cluster-scoped, so always a
ClusterRole rule), and only that CRD.
*/}}
{{- define "mongodb-member-operator.crdRule" -}}
# get: wait_for_crd (main.rs) reads this one CRD by name.
- apiGroups: ["apiextensions.k8s.io"]
  resources: ["customresourcedefinitions"]
  resourceNames: ["mongodbs.middleware.fedstate.io"]
  verbs: ["get"]
{{- end }}
