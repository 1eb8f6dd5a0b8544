//! PATCH bodies: JSON merge patch (RFC 7386), JSON patch (RFC 6902), strategic
//! merge patch for built-in kinds, and the structural merge server-side apply
//! uses to lay an applied configuration over the live object.
//!
//! Strategic merge simplifications: lists merge by the keys in
//! [`ResourceType::list_kind`] (first key only, like `patchMergeKey`), primitive
//! sets (finalizers) are unioned, other lists are replaced; the directives
//! `$patch: delete|replace|merge` and `$deleteFromPrimitiveList/…` are honoured,
//! `$setElementOrder/…` and `$retainKeys` are accepted and ignored.

use serde_json::{Map, Value};

use crate::error::ApiError;
use crate::fieldset::{key_value, names, PathElement};
use crate::registry::{ListKind, ResourceType};

/// The patch formats of `PATCH` requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    /// `application/merge-patch+json`
    Merge,
    /// `application/json-patch+json`
    Json,
    /// `application/strategic-merge-patch+json`
    Strategic,
    /// `application/apply-patch+yaml` (server-side apply)
    Apply,
}

impl PatchType {
    /// The patch type named by a Content-Type header.
    pub fn from_content_type(ct: &str) -> Option<Self> {
        match ct.split(';').next().unwrap_or("").trim() {
            "application/merge-patch+json" => Some(PatchType::Merge),
            "application/json-patch+json" => Some(PatchType::Json),
            "application/strategic-merge-patch+json" => Some(PatchType::Strategic),
            "application/apply-patch+yaml" | "application/apply-patch+json" => {
                Some(PatchType::Apply)
            }
            _ => None,
        }
    }

    /// Every accepted patch Content-Type.
    pub const CONTENT_TYPES: &'static [&'static str] = &[
        "application/json-patch+json",
        "application/merge-patch+json",
        "application/apply-patch+yaml",
        "application/strategic-merge-patch+json",
    ];
}

/// Applies a merge, JSON or strategic patch to `target` (in the served form).
pub fn apply_patch(
    rt: &ResourceType,
    target: &mut Value,
    kind: PatchType,
    body: &Value,
) -> Result<(), ApiError> {
    match kind {
        PatchType::Merge => {
            if !body.is_object() {
                return Err(ApiError::bad_request(
                    "merge patch body must be a JSON object",
                ));
            }
            json_patch::merge(target, body);
            Ok(())
        }
        PatchType::Json => {
            let ops: json_patch::Patch = serde_json::from_value(body.clone()).map_err(|e| {
                ApiError::bad_request(format!(
                    "the server rejected our request due to an error in our request: {e}"
                ))
            })?;
            let ops = without_null_tests_of_absent_paths(target, ops);
            json_patch::patch(target, &ops).map_err(|e| {
                ApiError::invalid(
                    &rt.group,
                    &rt.kind,
                    name_of(target),
                    &[(
                        String::new(),
                        format!(
                            "the server rejected our request due to an error in our request: {e}"
                        ),
                    )],
                )
            })
        }
        PatchType::Strategic => {
            if rt.is_custom() {
                return Err(ApiError::unsupported_media_type(
                    "application/strategic-merge-patch+json",
                    &[
                        "application/json-patch+json",
                        "application/merge-patch+json",
                        "application/apply-patch+yaml",
                    ],
                ));
            }
            if !body.is_object() {
                return Err(ApiError::bad_request(
                    "strategic merge patch body must be a JSON object",
                ));
            }
            merge_structural(rt, target, body, &mut Vec::new(), Mode::Strategic);
            Ok(())
        }
        PatchType::Apply => Err(ApiError::internal(
            "apply patches are handled by server-side apply",
        )),
    }
}

fn name_of(v: &Value) -> &str {
    v.pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// How [`merge_structural`] treats nulls, directives and list keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Strategic merge patch: nulls delete, `$patch` directives apply, map lists merge by their first key.
    Strategic,
    /// Server-side apply: nulls are ignored, map lists merge by all their keys.
    Apply,
}

/// Merges `patch` into `target` following the resource's list rules.
pub fn merge_structural(
    rt: &ResourceType,
    target: &mut Value,
    patch: &Value,
    path: &mut Vec<PathElement>,
    mode: Mode,
) {
    let Some(pm) = patch.as_object() else {
        *target = patch.clone();
        return;
    };
    if mode == Mode::Strategic && pm.get("$patch").and_then(Value::as_str) == Some("replace") {
        let mut p = pm.clone();
        p.remove("$patch");
        *target = Value::Object(p);
        return;
    }
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    for (k, pv) in pm {
        if mode == Mode::Strategic {
            if k == "$patch" || k == "$retainKeys" || k.starts_with("$setElementOrder/") {
                continue;
            }
            if let Some(field) = k.strip_prefix("$deleteFromPrimitiveList/") {
                if let (Some(Value::Array(list)), Some(del)) =
                    (target.get_mut(field), pv.as_array())
                {
                    list.retain(|x| !del.contains(x));
                }
                continue;
            }
        }
        let Some(tm) = target.as_object_mut() else {
            return;
        };
        if pv.is_null() {
            if mode == Mode::Strategic {
                tm.remove(k);
            }
            continue;
        }
        path.push(PathElement::Field(k.clone()));
        match pv {
            Value::Object(inner) => {
                if mode == Mode::Strategic
                    && inner.get("$patch").and_then(Value::as_str) == Some("delete")
                {
                    tm.remove(k);
                } else {
                    let slot = tm
                        .entry(k.clone())
                        .or_insert_with(|| Value::Object(Map::new()));
                    merge_structural(rt, slot, pv, path, mode);
                }
            }
            Value::Array(items) => {
                let slot = tm.entry(k.clone()).or_insert_with(|| Value::Array(vec![]));
                merge_list(rt, slot, items, path, mode);
            }
            _ => {
                tm.insert(k.clone(), pv.clone());
            }
        }
        path.pop();
    }
}

fn strip_directives(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| !k.starts_with('$'))
                .map(|(k, v)| (k.clone(), strip_directives(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(strip_directives).collect()),
        other => other.clone(),
    }
}

fn merge_list(
    rt: &ResourceType,
    target: &mut Value,
    items: &[Value],
    path: &mut Vec<PathElement>,
    mode: Mode,
) {
    let kind = rt.list_kind(&names(path));
    let replace = mode == Mode::Strategic
        && items
            .iter()
            .any(|i| i.get("$patch").and_then(Value::as_str) == Some("replace"));
    if replace {
        *target = Value::Array(
            items
                .iter()
                .filter(|i| i.get("$patch").is_none())
                .map(strip_directives)
                .collect(),
        );
        return;
    }
    let existing = match target {
        Value::Array(a) => a,
        _ => {
            *target = Value::Array(items.iter().map(strip_directives).collect());
            return;
        }
    };
    match kind {
        ListKind::Map(keys) if !keys.is_empty() && items.iter().all(Value::is_object) => {
            let keys: Vec<String> = if mode == Mode::Strategic {
                keys[..1].to_vec()
            } else {
                keys
            };
            let same =
                |a: &Value, b: &Value| keys.iter().all(|k| key_value(a, k) == key_value(b, k));
            for item in items {
                let delete = mode == Mode::Strategic
                    && item.get("$patch").and_then(Value::as_str) == Some("delete");
                match existing.iter().position(|e| same(e, item)) {
                    Some(i) if delete => {
                        existing.remove(i);
                    }
                    Some(i) => {
                        path.push(PathElement::Key(String::new()));
                        merge_structural(rt, &mut existing[i], item, path, mode);
                        path.pop();
                    }
                    None if delete => {}
                    None => existing.push(strip_directives(item)),
                }
            }
        }
        ListKind::Set => {
            for item in items {
                if !existing.contains(item) {
                    existing.push(item.clone());
                }
            }
        }
        _ => *target = Value::Array(items.iter().map(strip_directives).collect()),
    }
}

/// kube-apiserver applies JSON patches with evanphx/json-patch, whose `test`
/// operation succeeds when the expected value is `null` and the path does not
/// exist (RFC 6902 would fail it). kube-runtime's finalizer helper relies on this
/// (`test /metadata/finalizers null`, then `add`), so such tests are dropped here.
fn without_null_tests_of_absent_paths(target: &Value, ops: json_patch::Patch) -> json_patch::Patch {
    let kept = ops
        .0
        .into_iter()
        .filter(|op| match op {
            json_patch::PatchOperation::Test(test) => {
                !(test.value.is_null()
                    && target
                        .pointer(test.path.as_str())
                        .is_none_or(Value::is_null))
            }
            _ => true,
        })
        .collect();
    json_patch::Patch(kept)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::{Gvr, Registry};
    use serde_json::json;

    #[test]
    fn strategic_merge_merges_containers_and_env_by_name() {
        let rt = Registry::new()
            .get(&Gvr::new("apps", "v1", "statefulsets"))
            .unwrap();
        let mut sts = json!({"spec": {"template": {"spec": {"containers": [
            {"name": "a", "image": "1", "env": [{"name": "X", "value": "1"}, {"name": "Y", "value": "2"}]},
            {"name": "b", "image": "1"}]}}}});
        let patch = json!({"spec": {"template": {"spec": {
            "$setElementOrder/containers": [{"name": "a"}, {"name": "b"}],
            "containers": [{"name": "a", "image": "2", "env": [{"name": "Y", "$patch": "delete"}, {"name": "Z", "value": "3"}]},
                           {"name": "c", "image": "9"}]}}}});
        apply_patch(&rt, &mut sts, PatchType::Strategic, &patch).unwrap();
        let cs = &sts["spec"]["template"]["spec"]["containers"];
        assert_eq!(cs[0]["image"], "2");
        assert_eq!(
            cs[0]["env"],
            json!([{"name": "X", "value": "1"}, {"name": "Z", "value": "3"}])
        );
        assert_eq!(cs[1]["name"], "b");
        assert_eq!(cs[2]["name"], "c");
    }

    #[test]
    fn strategic_merge_is_refused_for_custom_resources_with_415() {
        let mut rt = (*Registry::new().get(&Gvr::core("configmaps")).unwrap()).clone();
        rt.crd = Some("x.example.com".into());
        let e = apply_patch(&rt, &mut json!({}), PatchType::Strategic, &json!({})).unwrap_err();
        assert_eq!(e.code, 415);
    }

    #[test]
    fn merge_and_json_patches() {
        let rt = Registry::new().get(&Gvr::core("configmaps")).unwrap();
        let mut cm = json!({"data": {"a": "1", "b": "2"}});
        apply_patch(
            &rt,
            &mut cm,
            PatchType::Merge,
            &json!({"data": {"a": null, "c": "3"}}),
        )
        .unwrap();
        assert_eq!(cm["data"], json!({"b": "2", "c": "3"}));
        apply_patch(
            &rt,
            &mut cm,
            PatchType::Json,
            &json!([{"op": "replace", "path": "/data/b", "value": "x"}]),
        )
        .unwrap();
        assert_eq!(cm["data"]["b"], "x");
        let e = apply_patch(
            &rt,
            &mut cm,
            PatchType::Json,
            &json!([{"op": "test", "path": "/data/b", "value": "y"}]),
        )
        .unwrap_err();
        assert_eq!(e.code, 422);
    }

    #[test]
    fn json_patch_test_for_null_passes_on_an_absent_path_like_kube_apiserver() {
        let rt = Registry::new().get(&Gvr::core("configmaps")).unwrap();
        let mut cm = json!({"metadata": {"name": "x"}});
        let finalizer_patch = json!([
            {"op": "test", "path": "/metadata/finalizers", "value": null},
            {"op": "add", "path": "/metadata/finalizers", "value": ["f"]}
        ]);
        apply_patch(&rt, &mut cm, PatchType::Json, &finalizer_patch).unwrap();
        assert_eq!(cm["metadata"]["finalizers"], json!(["f"]));
        let e = apply_patch(
            &rt,
            &mut cm,
            PatchType::Json,
            &json!([{"op": "test", "path": "/metadata/finalizers", "value": null}]),
        )
        .unwrap_err();
        assert_eq!(e.code, 422, "a null test on a present path still fails");
    }
}
