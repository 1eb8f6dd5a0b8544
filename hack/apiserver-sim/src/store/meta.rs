//! Reading and writing an object's metadata: names and their validation,
//! generated names and uids, finalizers, owners, and what counts as a change.

use serde_json::{json, Map, Value};

use crate::registry::ResourceType;

pub(super) fn meta_str<'a>(obj: &'a Value, field: &str) -> &'a str {
    obj.get("metadata")
        .and_then(|m| m.get(field))
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// `metadata` of an object, created (and the object made an object) if missing.
pub(super) fn meta_mut(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj.is_object() {
        *obj = json!({});
    }
    let Value::Object(o) = obj else {
        unreachable!("made an object above")
    };
    let meta = o.entry("metadata").or_insert_with(|| json!({}));
    if !meta.is_object() {
        *meta = json!({});
    }
    match meta {
        Value::Object(m) => m,
        _ => unreachable!("made an object above"),
    }
}

pub(super) fn finalizers(obj: &Value) -> Vec<String> {
    obj.pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

pub(super) fn random_suffix(n: usize) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut x = new_uid_seed();
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            ALPHABET[(x % ALPHABET.len() as u64) as usize] as char
        })
        .collect()
}

pub(super) fn new_uid_seed() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let c = COUNTER.fetch_add(1, Ordering::Relaxed);
    let mut x = t ^ c.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0x2545_F491_4F6C_DD1D;
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x | 1
}

pub(super) fn new_uid() -> String {
    let (a, b) = (new_uid_seed(), new_uid_seed());
    format!(
        "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0xfff,
        0x8000 | ((b >> 48) & 0x3fff),
        b & 0xffff_ffff_ffff
    )
}

pub(super) fn valid_name(name: &str, label: bool) -> Result<(), String> {
    let max = if label { 63 } else { 253 };
    let ok_chars = name
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || (!label && c == '.'));
    let ends_ok = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphanumeric())
        && name
            .chars()
            .last()
            .is_some_and(|c| c.is_ascii_alphanumeric());
    if !name.is_empty() && name.len() <= max && ok_chars && ends_ok {
        return Ok(());
    }
    Err(if label {
        format!("Invalid value: \"{name}\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character")
    } else {
        format!("Invalid value: \"{name}\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character")
    })
}

pub(super) fn valid_path_segment_name(name: &str) -> Result<(), String> {
    if name == "." || name == ".." {
        return Err(format!("Invalid value: \"{name}\": may not be '{name}'"));
    }
    for bad in ["/", "%"] {
        if name.contains(bad) {
            return Err(format!(
                "Invalid value: \"{name}\": may not contain '{bad}'"
            ));
        }
    }
    Ok(())
}

/// Whether two stored objects differ in anything but managedFields timestamps and resourceVersion.
pub(super) fn same_content(a: &Value, b: &Value) -> bool {
    fn normalized(v: &Value) -> Value {
        let mut v = v.clone();
        if let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.remove("resourceVersion");
            if let Some(Value::Array(mf)) = meta.get_mut("managedFields") {
                for e in mf {
                    if let Some(e) = e.as_object_mut() {
                        e.remove("time");
                    }
                }
            }
        }
        v
    }
    normalized(a) == normalized(b)
}

/// Whether the change from `old` to `new` bumps metadata.generation.
pub(super) fn spec_changed(rt: &ResourceType, old: &Value, new: &Value) -> bool {
    let strip = |v: &Value| {
        let mut v = v.clone();
        if let Some(o) = v.as_object_mut() {
            o.remove("metadata");
            if rt.status_subresource || !rt.is_custom() {
                o.remove("status");
            }
        }
        v
    };
    strip(old) != strip(new)
}

pub(super) fn owner_uids(obj: &Value) -> Vec<String> {
    obj.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .map(|refs| {
            refs.iter()
                .filter_map(|r| r.get("uid").and_then(Value::as_str).map(String::from))
                .collect()
        })
        .unwrap_or_default()
}
