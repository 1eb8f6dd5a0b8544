//! Decoding of Kubernetes protobuf request bodies (`application/vnd.kubernetes.protobuf`)
//! for the few built-in kinds kubectl's typed generators send that way
//! (`kubectl create namespace|configmap|secret|serviceaccount`). Other kinds
//! are refused with 415; responses are always JSON (clients accept it).

use base64::Engine;
use serde_json::{json, Map, Value};

use crate::error::ApiError;

/// The Content-Type of Kubernetes protobuf.
pub const CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf";

#[derive(Debug)]
enum Field<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    Fixed,
}

fn varint(buf: &[u8], pos: &mut usize) -> Option<u64> {
    let mut out = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *buf.get(*pos)?;
        *pos += 1;
        out |= ((b & 0x7f) as u64) << shift;
        if b & 0x80 == 0 {
            return Some(out);
        }
    }
    None
}

/// The fields of one message, in order.
fn fields(buf: &[u8]) -> Option<Vec<(u64, Field<'_>)>> {
    let mut pos = 0;
    let mut out = Vec::new();
    while pos < buf.len() {
        let tag = varint(buf, &mut pos)?;
        let f = match tag & 7 {
            0 => Field::Varint(varint(buf, &mut pos)?),
            1 => {
                pos = pos.checked_add(8).filter(|p| *p <= buf.len())?;
                Field::Fixed
            }
            2 => {
                let len = varint(buf, &mut pos)? as usize;
                let end = pos.checked_add(len).filter(|e| *e <= buf.len())?;
                let b = &buf[pos..end];
                pos = end;
                Field::Bytes(b)
            }
            5 => {
                pos = pos.checked_add(4).filter(|p| *p <= buf.len())?;
                Field::Fixed
            }
            _ => return None,
        };
        out.push((tag >> 3, f));
    }
    Some(out)
}

fn text(b: &[u8]) -> Value {
    Value::String(String::from_utf8_lossy(b).into_owned())
}

/// Sets a string field unless empty (protobuf carries empty strings that JSON omits).
fn set_text(obj: &mut Map<String, Value>, field: &str, b: &[u8]) {
    if !b.is_empty() {
        obj.insert(field.into(), text(b));
    }
}

fn b64(b: &[u8]) -> Value {
    Value::String(base64::engine::general_purpose::STANDARD.encode(b))
}

/// A `map<string, X>` entry (`1: key, 2: value`).
fn map_entry(b: &[u8], value: fn(&[u8]) -> Value) -> Option<(String, Value)> {
    let mut key = String::new();
    let mut val = Value::String(String::new());
    for (n, f) in fields(b)? {
        match (n, f) {
            (1, Field::Bytes(k)) => key = String::from_utf8_lossy(k).into_owned(),
            (2, Field::Bytes(v)) => val = value(v),
            _ => {}
        }
    }
    Some((key, val))
}

fn insert_entry(
    obj: &mut Map<String, Value>,
    field: &str,
    b: &[u8],
    value: fn(&[u8]) -> Value,
) -> Option<()> {
    let (k, v) = map_entry(b, value)?;
    let m = obj.entry(field).or_insert_with(|| json!({}));
    m.as_object_mut()?.insert(k, v);
    Some(())
}

fn push(obj: &mut Map<String, Value>, field: &str, v: Value) -> Option<()> {
    obj.entry(field)
        .or_insert_with(|| json!([]))
        .as_array_mut()?
        .push(v);
    Some(())
}

fn owner_reference(b: &[u8]) -> Option<Value> {
    let mut r = Map::new();
    for (n, f) in fields(b)? {
        match (n, f) {
            (1, Field::Bytes(v)) => r.insert("kind".into(), text(v)),
            (3, Field::Bytes(v)) => r.insert("name".into(), text(v)),
            (4, Field::Bytes(v)) => r.insert("uid".into(), text(v)),
            (5, Field::Bytes(v)) => r.insert("apiVersion".into(), text(v)),
            (6, Field::Varint(v)) => r.insert("controller".into(), json!(v != 0)),
            (7, Field::Varint(v)) => r.insert("blockOwnerDeletion".into(), json!(v != 0)),
            _ => None,
        };
    }
    Some(Value::Object(r))
}

fn object_meta(b: &[u8]) -> Option<Value> {
    let mut m = Map::new();
    for (n, f) in fields(b)? {
        match (n, f) {
            (1, Field::Bytes(v)) => set_text(&mut m, "name", v),
            (2, Field::Bytes(v)) => set_text(&mut m, "generateName", v),
            (3, Field::Bytes(v)) => set_text(&mut m, "namespace", v),
            (6, Field::Bytes(v)) => set_text(&mut m, "resourceVersion", v),
            (11, Field::Bytes(v)) => insert_entry(&mut m, "labels", v, text)?,
            (12, Field::Bytes(v)) => insert_entry(&mut m, "annotations", v, text)?,
            (13, Field::Bytes(v)) => push(&mut m, "ownerReferences", owner_reference(v)?)?,
            (14, Field::Bytes(v)) => push(&mut m, "finalizers", text(v))?,
            _ => {}
        }
    }
    Some(Value::Object(m))
}

fn decode_kind(kind: &str, raw: &[u8]) -> Option<Result<Value, ApiError>> {
    let mut obj = Map::new();
    let supported = matches!(
        kind,
        "Namespace" | "ConfigMap" | "Secret" | "ServiceAccount"
    );
    if !supported {
        return Some(Err(ApiError::unsupported_media_type(
            &format!("{CONTENT_TYPE} ({kind})"),
            &["application/json", "application/yaml"],
        )));
    }
    for (n, f) in fields(raw)? {
        match (kind, n, f) {
            (_, 1, Field::Bytes(v)) => {
                obj.insert("metadata".into(), object_meta(v)?);
            }
            ("ConfigMap", 2, Field::Bytes(v)) => insert_entry(&mut obj, "data", v, text)?,
            ("ConfigMap", 3, Field::Bytes(v)) => insert_entry(&mut obj, "binaryData", v, b64)?,
            ("ConfigMap", 4, Field::Varint(v)) | ("Secret", 5, Field::Varint(v)) => {
                obj.insert("immutable".into(), json!(v != 0));
            }
            ("Secret", 2, Field::Bytes(v)) => insert_entry(&mut obj, "data", v, b64)?,
            ("Secret", 3, Field::Bytes(v)) => set_text(&mut obj, "type", v),
            ("Secret", 4, Field::Bytes(v)) => insert_entry(&mut obj, "stringData", v, text)?,
            ("Namespace", 2, Field::Bytes(v)) => {
                let mut spec = Map::new();
                for (sn, sf) in fields(v)? {
                    if let (1, Field::Bytes(fin)) = (sn, sf) {
                        push(&mut spec, "finalizers", text(fin))?;
                    }
                }
                obj.insert("spec".into(), Value::Object(spec));
            }
            ("ServiceAccount", 4, Field::Varint(v)) => {
                obj.insert("automountServiceAccountToken".into(), json!(v != 0));
            }
            _ => {}
        }
    }
    Some(Ok(Value::Object(obj)))
}

/// Decodes a protobuf request body (`k8s\0` + `runtime.Unknown`) into JSON.
pub fn decode(body: &[u8]) -> Result<Value, ApiError> {
    let bad =
        || ApiError::bad_request("the request body is not a valid Kubernetes protobuf message");
    let inner = body.strip_prefix(b"k8s\0").ok_or_else(bad)?;
    let (mut api_version, mut kind, mut raw) = (String::new(), String::new(), &[][..]);
    for (n, f) in fields(inner).ok_or_else(bad)? {
        match (n, f) {
            (1, Field::Bytes(tm)) => {
                for (tn, tf) in fields(tm).ok_or_else(bad)? {
                    match (tn, tf) {
                        (1, Field::Bytes(v)) => {
                            api_version = String::from_utf8_lossy(v).into_owned()
                        }
                        (2, Field::Bytes(v)) => kind = String::from_utf8_lossy(v).into_owned(),
                        _ => {}
                    }
                }
            }
            (2, Field::Bytes(r)) => raw = r,
            _ => {}
        }
    }
    let mut obj = decode_kind(&kind, raw).ok_or_else(bad)??;
    obj["apiVersion"] = json!(api_version);
    obj["kind"] = json!(kind);
    Ok(obj)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ld(field: u64, b: &[u8]) -> Vec<u8> {
        let mut out = vec![(field << 3 | 2) as u8, b.len() as u8];
        out.extend_from_slice(b);
        out
    }

    #[test]
    fn decodes_a_secret_as_kubectl_create_secret_sends_it() {
        let meta = [ld(1, b"s"), ld(3, b"default")].concat();
        let entry = [ld(1, b"user"), ld(2, b"root")].concat();
        let secret = [ld(1, &meta), ld(2, &entry), ld(3, b"Opaque")].concat();
        let type_meta = [ld(1, b"v1"), ld(2, b"Secret")].concat();
        let unknown = [ld(1, &type_meta), ld(2, &secret)].concat();
        let body = [b"k8s\0".to_vec(), unknown].concat();
        let v = decode(&body).unwrap();
        assert_eq!(
            v,
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "default"}, "data": {"user": "cm9vdA=="}, "type": "Opaque"})
        );
        assert_eq!(decode(b"k8s\0\xff").unwrap_err().code, 400);
    }
}
