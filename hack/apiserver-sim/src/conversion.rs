//! Presenting stored objects at a served group/version and back: `apiVersion`
//! rewriting for custom resources (conversion strategy `None`) and the
//! core/v1 ⇄ events.k8s.io/v1 Event field mapping (both served from one store).

use serde_json::{Map, Value};

use crate::registry::{ResourceType, View};

/// (core/v1 field, events.k8s.io/v1 field)
const EVENT_FIELDS: &[(&str, &str)] = &[
    ("involvedObject", "regarding"),
    ("message", "note"),
    ("reportingComponent", "reportingController"),
    ("source", "deprecatedSource"),
    ("firstTimestamp", "deprecatedFirstTimestamp"),
    ("lastTimestamp", "deprecatedLastTimestamp"),
    ("count", "deprecatedCount"),
];

fn rename(obj: &mut Value, pairs: impl Iterator<Item = (&'static str, &'static str)>) {
    if let Some(map) = obj.as_object_mut() {
        let mut out = Map::new();
        let pairs: Vec<_> = pairs.collect();
        for (k, v) in std::mem::take(map) {
            let k = pairs
                .iter()
                .find(|(from, _)| *from == k)
                .map(|(_, to)| to.to_string())
                .unwrap_or(k);
            out.insert(k, v);
        }
        *map = out;
    }
}

/// The stored object as served by `rt`.
pub fn to_view(rt: &ResourceType, stored: &Value) -> Value {
    let mut v = stored.clone();
    if rt.view == View::EventsV1 {
        rename(&mut v, EVENT_FIELDS.iter().copied());
    }
    set_type_meta(rt, &mut v);
    v
}

/// An object sent to `rt`, in stored form.
pub fn to_storage(rt: &ResourceType, viewed: &Value) -> Value {
    let mut v = viewed.clone();
    if rt.view == View::EventsV1 {
        rename(&mut v, EVENT_FIELDS.iter().map(|(a, b)| (*b, *a)));
    }
    if let Some(o) = v.as_object_mut() {
        o.insert(
            "apiVersion".into(),
            Value::String(rt.storage_api_version.clone()),
        );
        o.insert("kind".into(), Value::String(rt.kind.clone()));
    }
    v
}

/// Sets `apiVersion` and `kind` to the served ones.
pub fn set_type_meta(rt: &ResourceType, v: &mut Value) {
    if let Some(o) = v.as_object_mut() {
        o.insert("apiVersion".into(), Value::String(rt.api_version()));
        o.insert("kind".into(), Value::String(rt.kind.clone()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::{Gvr, Registry};
    use serde_json::json;

    #[test]
    fn events_v1_and_core_events_share_storage() {
        let reg = Registry::new();
        let v1 = reg.get(&Gvr::new("events.k8s.io", "v1", "events")).unwrap();
        let sent = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e"},
            "regarding": {"name": "db"}, "note": "hello", "reportingController": "op", "reason": "R"});
        let stored = to_storage(&v1, &sent);
        assert_eq!(stored["apiVersion"], "v1");
        assert_eq!(stored["involvedObject"]["name"], "db");
        assert_eq!(stored["message"], "hello");
        assert_eq!(to_view(&v1, &stored), sent);
    }
}
