//! The kinds the server serves: built-in resources and the ones that registered
//! CustomResourceDefinitions add, with what the rest of the server needs to know
//! about each (scope, names, status subresource, schema, printer columns, how
//! its lists merge).

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

use crate::admission::CustomAdmission;

/// A group/version/resource triple naming what a request addresses.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Gvr {
    /// API group (`""` for the core group).
    pub group: String,
    /// Version (`v1`).
    pub version: String,
    /// Plural resource name (`pods`).
    pub resource: String,
}

impl Gvr {
    /// Any group/version/resource.
    pub fn new(group: &str, version: &str, resource: &str) -> Self {
        Gvr {
            group: group.into(),
            version: version.into(),
            resource: resource.into(),
        }
    }
    /// A core/v1 resource (`pods`, `services`, …).
    pub fn core(resource: &str) -> Self {
        Self::new("", "v1", resource)
    }
}

/// How the items of a list merge (strategic merge patch and server-side apply).
#[derive(Debug, Clone, PartialEq)]
pub enum ListKind {
    /// Replaced as a whole.
    Atomic,
    /// Items identified by the values of these keys.
    Map(Vec<String>),
    /// Items are scalars identified by value.
    Set,
}

/// Where the `/scale` subresource reads and writes (JSONPaths like `.spec.replicas`).
#[derive(Debug, Clone, PartialEq)]
pub struct ScalePaths {
    /// Desired replicas.
    pub spec_replicas: String,
    /// Observed replicas.
    pub status_replicas: String,
    /// A label selector string (custom resources), if any; built-in kinds use `.spec.selector`.
    pub label_selector: Option<String>,
}

/// How stored objects are presented at this group/version.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum View {
    /// As stored (only `apiVersion` changes between served versions).
    Identity,
    /// `events.k8s.io/v1` Events over the core/v1 Event storage.
    EventsV1,
}

/// One `additionalPrinterColumns` entry.
#[derive(Debug, Clone)]
pub struct PrinterColumn {
    /// Column header.
    pub name: String,
    /// OpenAPI type (`string`, `integer`, `date`, …).
    pub type_: String,
    /// JSONPath (subset: `.a.b[0].c`).
    pub json_path: String,
    /// Description.
    pub description: String,
    /// 0 shows by default, >0 only with `-o wide`.
    pub priority: i64,
}

/// A served resource at one group/version.
#[derive(Clone)]
pub struct ResourceType {
    /// API group.
    pub group: String,
    /// Version.
    pub version: String,
    /// Kind.
    pub kind: String,
    /// Plural (URL) name.
    pub plural: String,
    /// Singular name.
    pub singular: String,
    /// Namespaced or cluster-scoped.
    pub namespaced: bool,
    /// kubectl short names.
    pub short_names: Vec<String>,
    /// Categories (`all`).
    pub categories: Vec<String>,
    /// Whether `/status` is a separate subresource.
    pub status_subresource: bool,
    /// The `/scale` subresource, if served.
    pub scale: Option<ScalePaths>,
    /// Storage key shared by every version (and view) of the resource: `group/plural`.
    pub storage: String,
    /// `apiVersion` objects of this resource are stored with.
    pub storage_api_version: String,
    /// How objects are presented at this version.
    pub view: View,
    /// `openAPIV3Schema` for custom resources.
    pub schema: Option<Value>,
    /// Printer columns for custom resources.
    pub printer_columns: Vec<PrinterColumn>,
    /// Custom resource admission (schema validation, defaulting, pruning, CEL).
    pub admission: Option<Arc<CustomAdmission>>,
    /// Name of the CRD that defines this resource, if any.
    pub crd: Option<String>,
}

impl std::fmt::Debug for ResourceType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "ResourceType({}/{} {})",
            self.group, self.version, self.plural
        )
    }
}

impl ResourceType {
    /// `group/version`, or `version` for the core group.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// This resource's Gvr.
    pub fn gvr(&self) -> Gvr {
        Gvr::new(&self.group, &self.version, &self.plural)
    }

    /// Whether the resource is a custom resource.
    pub fn is_custom(&self) -> bool {
        self.crd.is_some()
    }

    /// Whether objects carry `metadata.generation` (custom resources and the
    /// built-in kinds whose strategy sets it).
    pub fn tracks_generation(&self) -> bool {
        self.is_custom()
            || matches!(
                self.kind.as_str(),
                "StatefulSet"
                    | "Deployment"
                    | "ReplicaSet"
                    | "PodDisruptionBudget"
                    | "CustomResourceDefinition"
            )
    }

    /// The verbs served on the main endpoint.
    pub fn verbs(&self) -> Vec<&'static str> {
        vec![
            "create",
            "delete",
            "deletecollection",
            "get",
            "list",
            "patch",
            "update",
            "watch",
        ]
    }

    /// How the list at `path` merges. `path` holds field names, with `[]` for list items.
    pub fn list_kind(&self, path: &[String]) -> ListKind {
        if path.first().map(String::as_str) == Some("metadata") {
            return builtin_list_kind("", path);
        }
        match &self.schema {
            Some(schema) => schema_list_kind(schema, path),
            None if self.is_custom() => ListKind::Atomic,
            None => builtin_list_kind(&self.kind, path),
        }
    }
}

fn schema_list_kind(schema: &Value, path: &[String]) -> ListKind {
    let mut node = schema;
    for step in path {
        let next = if step == "[]" {
            node.get("items")
        } else {
            node.get("properties")
                .and_then(|p| p.get(step.as_str()))
                .or_else(|| node.get("additionalProperties"))
        };
        match next {
            Some(n) if n.is_object() => node = n,
            _ => return ListKind::Atomic,
        }
    }
    match node.get("x-kubernetes-list-type").and_then(Value::as_str) {
        Some("map") => ListKind::Map(
            node.get("x-kubernetes-list-map-keys")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|k| k.as_str().map(String::from))
                        .collect()
                })
                .unwrap_or_default(),
        ),
        Some("set") => ListKind::Set,
        _ => ListKind::Atomic,
    }
}

/// Merge keys of the built-in kinds' lists that kubectl and controllers rely on
/// (the `patchMergeKey`/`listType=map` markers of the Go types). Lists not named here are atomic.
fn builtin_list_kind(kind: &str, path: &[String]) -> ListKind {
    let keys = |k: &[&str]| ListKind::Map(k.iter().map(|s| s.to_string()).collect());
    let last = path.last().map(String::as_str).unwrap_or("");
    let in_container = path
        .iter()
        .any(|p| p == "containers" || p == "initContainers" || p == "ephemeralContainers");
    match last {
        "finalizers" if path.len() == 2 => ListKind::Set,
        "ownerReferences" if path.len() == 2 => keys(&["uid"]),
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "volumes"
        | "imagePullSecrets" => keys(&["name"]),
        "env" if in_container => keys(&["name"]),
        "volumeMounts" if in_container => keys(&["mountPath"]),
        "volumeDevices" if in_container => keys(&["devicePath"]),
        "ports" if in_container => keys(&["containerPort", "protocol"]),
        "ports" if kind == "Service" => keys(&["port", "protocol"]),
        "conditions" => keys(&["type"]),
        "containerStatuses" | "initContainerStatuses" => keys(&["name"]),
        _ => ListKind::Atomic,
    }
}

/// Static description of a built-in resource.
struct Builtin {
    group: &'static str,
    kind: &'static str,
    plural: &'static str,
    namespaced: bool,
    short: &'static [&'static str],
    all: bool,
    status: bool,
}

const BUILTINS: &[Builtin] = &[
    Builtin {
        group: "",
        kind: "Namespace",
        plural: "namespaces",
        namespaced: false,
        short: &["ns"],
        all: false,
        status: true,
    },
    Builtin {
        group: "",
        kind: "Node",
        plural: "nodes",
        namespaced: false,
        short: &["no"],
        all: false,
        status: true,
    },
    Builtin {
        group: "",
        kind: "Pod",
        plural: "pods",
        namespaced: true,
        short: &["po"],
        all: true,
        status: true,
    },
    Builtin {
        group: "",
        kind: "Service",
        plural: "services",
        namespaced: true,
        short: &["svc"],
        all: true,
        status: true,
    },
    Builtin {
        group: "",
        kind: "Endpoints",
        plural: "endpoints",
        namespaced: true,
        short: &["ep"],
        all: false,
        status: false,
    },
    Builtin {
        group: "",
        kind: "ConfigMap",
        plural: "configmaps",
        namespaced: true,
        short: &["cm"],
        all: false,
        status: false,
    },
    Builtin {
        group: "",
        kind: "Secret",
        plural: "secrets",
        namespaced: true,
        short: &[],
        all: false,
        status: false,
    },
    Builtin {
        group: "",
        kind: "ServiceAccount",
        plural: "serviceaccounts",
        namespaced: true,
        short: &["sa"],
        all: false,
        status: false,
    },
    Builtin {
        group: "",
        kind: "PersistentVolumeClaim",
        plural: "persistentvolumeclaims",
        namespaced: true,
        short: &["pvc"],
        all: false,
        status: true,
    },
    Builtin {
        group: "",
        kind: "ResourceQuota",
        plural: "resourcequotas",
        namespaced: true,
        short: &["quota"],
        all: false,
        status: true,
    },
    Builtin {
        group: "",
        kind: "LimitRange",
        plural: "limitranges",
        namespaced: true,
        short: &["limits"],
        all: false,
        status: false,
    },
    Builtin {
        group: "",
        kind: "PersistentVolume",
        plural: "persistentvolumes",
        namespaced: false,
        short: &["pv"],
        all: false,
        status: true,
    },
    Builtin {
        group: "discovery.k8s.io",
        kind: "EndpointSlice",
        plural: "endpointslices",
        namespaced: true,
        short: &[],
        all: false,
        status: false,
    },
    Builtin {
        group: "storage.k8s.io",
        kind: "StorageClass",
        plural: "storageclasses",
        namespaced: false,
        short: &["sc"],
        all: false,
        status: false,
    },
    Builtin {
        group: "apps",
        kind: "ControllerRevision",
        plural: "controllerrevisions",
        namespaced: true,
        short: &[],
        all: false,
        status: false,
    },
    Builtin {
        group: "",
        kind: "Event",
        plural: "events",
        namespaced: true,
        short: &["ev"],
        all: false,
        status: false,
    },
    Builtin {
        group: "events.k8s.io",
        kind: "Event",
        plural: "events",
        namespaced: true,
        short: &["ev"],
        all: false,
        status: false,
    },
    Builtin {
        group: "coordination.k8s.io",
        kind: "Lease",
        plural: "leases",
        namespaced: true,
        short: &[],
        all: false,
        status: false,
    },
    Builtin {
        group: "apps",
        kind: "StatefulSet",
        plural: "statefulsets",
        namespaced: true,
        short: &["sts"],
        all: true,
        status: true,
    },
    Builtin {
        group: "apps",
        kind: "Deployment",
        plural: "deployments",
        namespaced: true,
        short: &["deploy"],
        all: true,
        status: true,
    },
    Builtin {
        group: "apps",
        kind: "ReplicaSet",
        plural: "replicasets",
        namespaced: true,
        short: &["rs"],
        all: true,
        status: true,
    },
    Builtin {
        group: "policy",
        kind: "PodDisruptionBudget",
        plural: "poddisruptionbudgets",
        namespaced: true,
        short: &["pdb"],
        all: false,
        status: true,
    },
    Builtin {
        group: "rbac.authorization.k8s.io",
        kind: "Role",
        plural: "roles",
        namespaced: true,
        short: &[],
        all: false,
        status: false,
    },
    Builtin {
        group: "rbac.authorization.k8s.io",
        kind: "RoleBinding",
        plural: "rolebindings",
        namespaced: true,
        short: &[],
        all: false,
        status: false,
    },
    Builtin {
        group: "rbac.authorization.k8s.io",
        kind: "ClusterRole",
        plural: "clusterroles",
        namespaced: false,
        short: &[],
        all: false,
        status: false,
    },
    Builtin {
        group: "rbac.authorization.k8s.io",
        kind: "ClusterRoleBinding",
        plural: "clusterrolebindings",
        namespaced: false,
        short: &[],
        all: false,
        status: false,
    },
    Builtin {
        group: "apiextensions.k8s.io",
        kind: "CustomResourceDefinition",
        plural: "customresourcedefinitions",
        namespaced: false,
        short: &["crd", "crds"],
        all: false,
        status: true,
    },
];

/// Every served resource, built-in and custom.
#[derive(Debug, Clone)]
pub struct Registry {
    builtin: Vec<Arc<ResourceType>>,
    /// Custom resources by CRD name, one entry per served version.
    custom: BTreeMap<String, Vec<Arc<ResourceType>>>,
}

impl Default for Registry {
    fn default() -> Self {
        Self::new()
    }
}

impl Registry {
    /// The built-in resources.
    pub fn new() -> Self {
        let builtin = BUILTINS
            .iter()
            .map(|b| {
                let storage_group = if b.plural == "events" { "" } else { b.group };
                Arc::new(ResourceType {
                    group: b.group.into(),
                    version: "v1".into(),
                    kind: b.kind.into(),
                    plural: b.plural.into(),
                    singular: b.kind.to_lowercase(),
                    namespaced: b.namespaced,
                    short_names: b.short.iter().map(|s| s.to_string()).collect(),
                    categories: if b.all { vec!["all".into()] } else { vec![] },
                    status_subresource: b.status,
                    scale: matches!(b.kind, "StatefulSet" | "Deployment" | "ReplicaSet").then(
                        || ScalePaths {
                            spec_replicas: ".spec.replicas".into(),
                            status_replicas: ".status.replicas".into(),
                            label_selector: None,
                        },
                    ),
                    storage: format!("{storage_group}/{}", b.plural),
                    storage_api_version: if storage_group.is_empty() {
                        "v1".into()
                    } else {
                        format!("{storage_group}/v1")
                    },
                    view: if b.group == "events.k8s.io" {
                        View::EventsV1
                    } else {
                        View::Identity
                    },
                    schema: None,
                    printer_columns: vec![],
                    admission: None,
                    crd: None,
                })
            })
            .collect();
        Registry {
            builtin,
            custom: BTreeMap::new(),
        }
    }

    /// Every served resource.
    pub fn all(&self) -> impl Iterator<Item = &Arc<ResourceType>> {
        self.builtin.iter().chain(self.custom.values().flatten())
    }

    /// The resource served at a group/version/plural.
    pub fn lookup(&self, group: &str, version: &str, plural: &str) -> Option<Arc<ResourceType>> {
        self.all()
            .find(|r| r.group == group && r.version == version && r.plural == plural)
            .cloned()
    }

    /// The resource at a Gvr.
    pub fn get(&self, gvr: &Gvr) -> Option<Arc<ResourceType>> {
        self.lookup(&gvr.group, &gvr.version, &gvr.resource)
    }

    /// The resource serving a kind at an apiVersion (`apps/v1`, `v1`).
    pub fn by_kind(&self, api_version: &str, kind: &str) -> Option<Arc<ResourceType>> {
        self.all()
            .find(|r| r.api_version() == api_version && r.kind == kind)
            .cloned()
    }

    /// API groups in discovery order (core group first), each with its versions.
    pub fn groups(&self) -> Vec<(String, Vec<String>)> {
        let mut out: Vec<(String, Vec<String>)> = Vec::new();
        for r in self.all() {
            match out.iter_mut().find(|(g, _)| *g == r.group) {
                Some((_, vs)) => {
                    if !vs.contains(&r.version) {
                        vs.push(r.version.clone())
                    }
                }
                None => out.push((r.group.clone(), vec![r.version.clone()])),
            }
        }
        out
    }

    /// Registers (or re-registers) the kinds a CRD defines.
    pub fn register_crd(&mut self, crd_name: &str, types: Vec<Arc<ResourceType>>) {
        self.custom.insert(crd_name.to_string(), types);
    }

    /// Unregisters a CRD's kinds.
    pub fn unregister_crd(&mut self, crd_name: &str) {
        self.custom.remove(crd_name);
    }
}

/// The resources a CustomResourceDefinition serves (one per served version), or
/// the reasons it is invalid as `(field, message)` pairs.
pub fn types_from_crd(crd: &Value) -> Result<Vec<Arc<ResourceType>>, Vec<(String, String)>> {
    let mut errors = Vec::new();
    let name = crd
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let spec = crd.get("spec").cloned().unwrap_or(Value::Null);
    let s = |p: &str| {
        spec.pointer(p)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let group = s("/group");
    let plural = s("/names/plural");
    let kind = s("/names/kind");
    let singular = {
        let v = s("/names/singular");
        if v.is_empty() {
            kind.to_lowercase()
        } else {
            v
        }
    };
    if group.is_empty() {
        errors.push(("spec.group".into(), "Required value".into()));
    }
    if plural.is_empty() {
        errors.push(("spec.names.plural".into(), "Required value".into()));
    }
    if kind.is_empty() {
        errors.push(("spec.names.kind".into(), "Required value".into()));
    }
    if !group.is_empty() && !plural.is_empty() && name != format!("{plural}.{group}") {
        errors.push((
            "metadata.name".into(),
            format!("Invalid value: \"{name}\": must be spec.names.plural+\".\"+spec.group"),
        ));
    }
    let scope = s("/scope");
    if scope != "Namespaced" && scope != "Cluster" {
        errors.push((
            "spec.scope".into(),
            format!(
                "Unsupported value: \"{scope}\": supported values: \"Cluster\", \"Namespaced\""
            ),
        ));
    }
    let strings = |p: &str| -> Vec<String> {
        spec.pointer(p)
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    };
    let versions = spec
        .get("versions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if versions.is_empty() {
        errors.push((
            "spec.versions".into(),
            "Invalid value: must have exactly one version marked as storage version".into(),
        ));
    }
    let storage_count = versions
        .iter()
        .filter(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        .count();
    if !versions.is_empty() && storage_count != 1 {
        errors.push((
            "spec.versions".into(),
            "Invalid value: must have exactly one version marked as storage version".into(),
        ));
    }
    let storage_version = versions
        .iter()
        .find(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        .and_then(|v| v.get("name").and_then(Value::as_str))
        .unwrap_or_default()
        .to_string();
    let mut out = Vec::new();
    for (i, v) in versions.iter().enumerate() {
        let vname = v
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let Some(schema) = v.pointer("/schema/openAPIV3Schema").cloned() else {
            errors.push((
                format!("spec.versions[{i}].schema.openAPIV3Schema"),
                "Required value: schemas are required".into(),
            ));
            continue;
        };
        let admission = match CustomAdmission::new(&schema) {
            Ok(a) => Some(Arc::new(a)),
            Err(e) => {
                errors.push((format!("spec.versions[{i}].schema.openAPIV3Schema"), e));
                None
            }
        };
        let served = v.get("served").and_then(Value::as_bool).unwrap_or(false);
        if !served {
            continue;
        }
        let printer_columns = v
            .get("additionalPrinterColumns")
            .and_then(Value::as_array)
            .map(|cols| {
                cols.iter()
                    .map(|c| PrinterColumn {
                        name: c
                            .get("name")
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .into(),
                        type_: c
                            .get("type")
                            .and_then(Value::as_str)
                            .unwrap_or("string")
                            .into(),
                        json_path: c
                            .get("jsonPath")
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .into(),
                        description: c
                            .get("description")
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .into(),
                        priority: c.get("priority").and_then(Value::as_i64).unwrap_or(0),
                    })
                    .collect()
            })
            .unwrap_or_default();
        out.push(Arc::new(ResourceType {
            group: group.clone(),
            version: vname,
            kind: kind.clone(),
            plural: plural.clone(),
            singular: singular.clone(),
            namespaced: scope == "Namespaced",
            short_names: strings("/names/shortNames"),
            categories: strings("/names/categories"),
            status_subresource: v.pointer("/subresources/status").is_some(),
            scale: v.pointer("/subresources/scale").map(|sc| ScalePaths {
                spec_replicas: sc
                    .get("specReplicasPath")
                    .and_then(Value::as_str)
                    .unwrap_or(".spec.replicas")
                    .into(),
                status_replicas: sc
                    .get("statusReplicasPath")
                    .and_then(Value::as_str)
                    .unwrap_or(".status.replicas")
                    .into(),
                label_selector: sc
                    .get("labelSelectorPath")
                    .and_then(Value::as_str)
                    .map(String::from),
            }),
            storage: format!("{group}/{plural}"),
            storage_api_version: format!("{group}/{storage_version}"),
            view: View::Identity,
            schema: Some(schema),
            printer_columns,
            admission,
            crd: Some(name.to_string()),
        }));
    }
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(errors)
    }
}
