//! Label and field selectors, parsed from the `labelSelector` and `fieldSelector`
//! query parameters and matched against stored objects.

use serde_json::Value;

use crate::error::ApiError;

#[derive(Debug, Clone, PartialEq)]
enum LabelRequirement {
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
}

/// A parsed label selector (`a=b,c!=d,e in (f,g),h notin (i),j,!k`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LabelSelector {
    requirements: Vec<LabelRequirement>,
}

/// Splits at commas that are not inside parentheses.
fn split_top_level(s: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut depth = 0i32;
    let mut cur = String::new();
    for c in s.chars() {
        match c {
            '(' => {
                depth += 1;
                cur.push(c)
            }
            ')' => {
                depth -= 1;
                cur.push(c)
            }
            ',' if depth == 0 => parts.push(std::mem::take(&mut cur)),
            _ => cur.push(c),
        }
    }
    parts.push(cur);
    parts
        .into_iter()
        .map(|p| p.trim().to_string())
        .filter(|p| !p.is_empty())
        .collect()
}

fn valid_label_key(k: &str) -> bool {
    !k.is_empty()
        && k.len() <= 317
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
}

impl LabelSelector {
    /// Parses a selector; an empty string selects everything.
    pub fn parse(s: &str) -> Result<Self, ApiError> {
        let bad = |part: &str| {
            ApiError::bad_request(format!(
                "unable to parse requirement: found '{part}', expected: identifier"
            ))
        };
        let mut requirements = Vec::new();
        for part in split_top_level(s) {
            let req = if let Some(key) = part.strip_prefix('!') {
                LabelRequirement::NotExists(key.trim().to_string())
            } else if let Some(open) = part.find('(') {
                let close = part.rfind(')').ok_or_else(|| bad(&part))?;
                let head: Vec<&str> = part[..open].split_whitespace().collect();
                let values: Vec<String> = part[open + 1..close]
                    .split(',')
                    .map(|v| v.trim().to_string())
                    .filter(|v| !v.is_empty())
                    .collect();
                match head.as_slice() {
                    [key, "in"] => LabelRequirement::In(key.to_string(), values),
                    [key, "notin"] => LabelRequirement::NotIn(key.to_string(), values),
                    _ => return Err(bad(&part)),
                }
            } else if let Some((k, v)) = part.split_once("!=") {
                LabelRequirement::NotEquals(k.trim().into(), v.trim().into())
            } else if let Some((k, v)) = part.split_once("==") {
                LabelRequirement::Equals(k.trim().into(), v.trim().into())
            } else if let Some((k, v)) = part.split_once('=') {
                LabelRequirement::Equals(k.trim().into(), v.trim().into())
            } else {
                LabelRequirement::Exists(part.clone())
            };
            let key = match &req {
                LabelRequirement::Equals(k, _)
                | LabelRequirement::NotEquals(k, _)
                | LabelRequirement::In(k, _)
                | LabelRequirement::NotIn(k, _)
                | LabelRequirement::Exists(k)
                | LabelRequirement::NotExists(k) => k,
            };
            if !valid_label_key(key) {
                return Err(bad(&part));
            }
            requirements.push(req);
        }
        Ok(LabelSelector { requirements })
    }

    /// Whether the selector selects everything.
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// Whether an object's labels match.
    pub fn matches(&self, obj: &Value) -> bool {
        let labels = obj.pointer("/metadata/labels");
        let get = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
        self.requirements.iter().all(|r| match r {
            LabelRequirement::Equals(k, v) => get(k) == Some(v.as_str()),
            LabelRequirement::NotEquals(k, v) => get(k) != Some(v.as_str()),
            LabelRequirement::In(k, vs) => get(k).is_some_and(|x| vs.iter().any(|v| v == x)),
            LabelRequirement::NotIn(k, vs) => get(k).is_none_or(|x| vs.iter().all(|v| v != x)),
            LabelRequirement::Exists(k) => get(k).is_some(),
            LabelRequirement::NotExists(k) => get(k).is_none(),
        })
    }
}

/// A parsed field selector (`metadata.name=x,status.phase!=Running`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FieldSelector {
    /// `(field, value, equal?)`
    requirements: Vec<(String, String, bool)>,
}

/// The fields a kind supports in field selectors beyond `metadata.name` and
/// `metadata.namespace`, with the JSON pointer each reads in the stored form.
fn kind_fields(kind: &str, field: &str) -> Option<&'static str> {
    Some(match (kind, field) {
        ("Event", "involvedObject.kind") | ("Event", "regarding.kind") => "/involvedObject/kind",
        ("Event", "involvedObject.namespace") | ("Event", "regarding.namespace") => {
            "/involvedObject/namespace"
        }
        ("Event", "involvedObject.name") | ("Event", "regarding.name") => "/involvedObject/name",
        ("Event", "involvedObject.uid") | ("Event", "regarding.uid") => "/involvedObject/uid",
        ("Event", "involvedObject.apiVersion") | ("Event", "regarding.apiVersion") => {
            "/involvedObject/apiVersion"
        }
        ("Event", "involvedObject.resourceVersion") => "/involvedObject/resourceVersion",
        ("Event", "involvedObject.fieldPath") | ("Event", "regarding.fieldPath") => {
            "/involvedObject/fieldPath"
        }
        ("Event", "reason") => "/reason",
        ("Event", "type") => "/type",
        ("Event", "reportingComponent") | ("Event", "reportingController") => "/reportingComponent",
        ("Event", "source") => "/source/component",
        ("Pod", "spec.nodeName") => "/spec/nodeName",
        ("Pod", "spec.restartPolicy") => "/spec/restartPolicy",
        ("Pod", "spec.schedulerName") => "/spec/schedulerName",
        ("Pod", "spec.serviceAccountName") => "/spec/serviceAccountName",
        ("Pod", "status.phase") => "/status/phase",
        ("Pod", "status.podIP") => "/status/podIP",
        ("Pod", "status.nominatedNodeName") => "/status/nominatedNodeName",
        ("Secret", "type") => "/type",
        ("Namespace", "status.phase") => "/status/phase",
        ("Node", "spec.unschedulable") => "/spec/unschedulable",
        ("StatefulSet", "status.successful") => "/status/successful",
        _ => return None,
    })
}

impl FieldSelector {
    /// Parses a selector for objects of `kind`; unsupported fields are a 400 as in kube-apiserver.
    pub fn parse(s: &str, kind: &str) -> Result<Self, ApiError> {
        let mut requirements = Vec::new();
        for part in split_top_level(s) {
            let (field, value, eq) = if let Some((f, v)) = part.split_once("!=") {
                (f, v, false)
            } else if let Some((f, v)) = part.split_once("==") {
                (f, v, true)
            } else if let Some((f, v)) = part.split_once('=') {
                (f, v, true)
            } else {
                return Err(ApiError::bad_request(format!(
                    "invalid selector: '{s}'; can't understand '{part}'"
                )));
            };
            let field = field.trim().to_string();
            if field != "metadata.name"
                && field != "metadata.namespace"
                && kind_fields(kind, &field).is_none()
            {
                return Err(ApiError::bad_request(format!(
                    "field label not supported: {field}"
                )));
            }
            requirements.push((field, value.trim().to_string(), eq));
        }
        Ok(FieldSelector {
            requirements: requirements
                .into_iter()
                .map(|(f, v, e)| (kindless(kind, f), v, e))
                .collect(),
        })
    }

    /// Whether the selector selects everything.
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// The `metadata.name` this selector pins, if any (`kubectl delete --wait`, `get NAME -w`).
    pub fn pinned_name(&self) -> Option<&str> {
        self.requirements
            .iter()
            .find(|(f, _, eq)| f == "/metadata/name" && *eq)
            .map(|(_, v, _)| v.as_str())
    }

    /// Whether an object (in stored form) matches.
    pub fn matches(&self, obj: &Value) -> bool {
        self.requirements.iter().all(|(pointer, value, eq)| {
            let actual = match obj.pointer(pointer) {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Null) | None => String::new(),
                Some(v) => v.to_string(),
            };
            (actual == *value) == *eq
        })
    }
}

fn kindless(kind: &str, field: String) -> String {
    match field.as_str() {
        "metadata.name" => "/metadata/name".into(),
        "metadata.namespace" => "/metadata/namespace".into(),
        f => kind_fields(kind, f).unwrap_or_default().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(labels: Value) -> Value {
        json!({"metadata": {"name": "a", "namespace": "ns", "labels": labels}})
    }

    #[test]
    fn label_selector_supports_every_operator() {
        let o = obj(json!({"app": "db", "tier": "back"}));
        let yes = [
            "app=db",
            "app==db",
            "app!=web",
            "app in (db,web)",
            "tier notin (front)",
            "app",
            "!missing",
            "app=db,tier=back",
            "",
        ];
        let no = [
            "app=web",
            "app!=db",
            "app in (web)",
            "tier notin (back, x)",
            "missing",
            "!app",
            "app=db,tier=front",
        ];
        for s in yes {
            assert!(
                LabelSelector::parse(s).unwrap().matches(&o),
                "{s} should match"
            );
        }
        for s in no {
            assert!(
                !LabelSelector::parse(s).unwrap().matches(&o),
                "{s} should not match"
            );
        }
    }

    #[test]
    fn label_selector_rejects_garbage() {
        assert_eq!(LabelSelector::parse("a in b)").unwrap_err().code, 400);
        assert_eq!(LabelSelector::parse("=x").unwrap_err().code, 400);
    }

    #[test]
    fn field_selector_matches_event_involved_object() {
        let ev = json!({"metadata": {"name": "e", "namespace": "ns"}, "involvedObject": {"name": "db", "kind": "MongoDB", "uid": "u1"}, "type": "Normal"});
        let sel = FieldSelector::parse(
            "involvedObject.name=db,involvedObject.kind=MongoDB,involvedObject.uid=u1,type=Normal",
            "Event",
        )
        .unwrap();
        assert!(sel.matches(&ev));
        assert!(!FieldSelector::parse("involvedObject.name=other", "Event")
            .unwrap()
            .matches(&ev));
        assert!(FieldSelector::parse("involvedObject.namespace!=x", "Event")
            .unwrap()
            .matches(&ev));
    }

    #[test]
    fn field_selector_rejects_unsupported_fields() {
        let e = FieldSelector::parse("spec.foo=bar", "ConfigMap").unwrap_err();
        assert_eq!(e.code, 400);
        assert!(e.message.contains("field label not supported"));
        assert!(FieldSelector::parse("status.phase=Running", "Pod").is_ok());
    }
}
