//! BSON values as mongod compares and prints them: equality that treats numbers by
//! value (an `_id` of 1 and of 1.0 are the same key, and `{n: 1}` matches
//! `n: 1.0`), dotted-path lookup through embedded documents, mongod's type
//! names, and the `{ a: 1, b: "x" }` rendering its messages use.

use bson::{Bson, Document};

/// Equality as mongod's matcher and `_id` index see it: numbers compare by value
/// across int / long / double; documents field by field in order; arrays element
/// by element; everything else by type and value.
pub(crate) fn values_equal(a: &Bson, b: &Bson) -> bool {
    match (number(a), number(b)) {
        (Some(x), Some(y)) => return x == y,
        (Some(_), None) | (None, Some(_)) => return false,
        (None, None) => {}
    }
    match (a, b) {
        (Bson::Document(x), Bson::Document(y)) => documents_equal(x, y),
        (Bson::Array(x), Bson::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| values_equal(p, q))
        }
        _ => a == b,
    }
}

/// Documents equal field by field, in order.
pub(crate) fn documents_equal(x: &Document, y: &Document) -> bool {
    x.len() == y.len()
        && x.iter()
            .zip(y.iter())
            .all(|((ka, va), (kb, vb))| ka == kb && values_equal(va, vb))
}

/// Byte-for-byte the same document (what mongod's no-op detection compares):
/// field order and number types count.
pub(crate) fn identical(x: &Document, y: &Document) -> bool {
    x.len() == y.len()
        && x.iter()
            .zip(y.iter())
            .all(|((ka, va), (kb, vb))| ka == kb && identical_values(va, vb))
}

fn identical_values(a: &Bson, b: &Bson) -> bool {
    match (a, b) {
        (Bson::Document(x), Bson::Document(y)) => identical(x, y),
        (Bson::Array(x), Bson::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| identical_values(p, q))
        }
        _ => a == b,
    }
}

fn number(v: &Bson) -> Option<f64> {
    match v {
        Bson::Int32(i) => Some(*i as f64),
        Bson::Int64(i) => Some(*i as f64),
        Bson::Double(d) => Some(*d),
        _ => None,
    }
}

/// The value at a dotted path through embedded documents (`"a.b"`), if any.
pub(crate) fn get_path<'d>(d: &'d Document, path: &str) -> Option<&'d Bson> {
    let mut parts = path.split('.');
    let mut cur = d.get(parts.next()?)?;
    for part in parts {
        cur = match cur {
            Bson::Document(inner) => inner.get(part)?,
            _ => return None,
        };
    }
    Some(cur)
}

/// mongod's name for a BSON type, as in its "wrong type" messages.
pub(crate) fn type_name(v: &Bson) -> &'static str {
    match v {
        Bson::Double(_) => "double",
        Bson::String(_) => "string",
        Bson::Document(_) => "object",
        Bson::Array(_) => "array",
        Bson::Boolean(_) => "bool",
        Bson::Null => "null",
        Bson::Int32(_) => "int",
        Bson::Int64(_) => "long",
        Bson::ObjectId(_) => "objectId",
        Bson::DateTime(_) => "date",
        Bson::Binary(_) => "binData",
        Bson::Timestamp(_) => "timestamp",
        Bson::Decimal128(_) => "decimal",
        Bson::RegularExpression(_) => "regex",
        Bson::Undefined => "undefined",
        Bson::MinKey => "minKey",
        Bson::MaxKey => "maxKey",
        _ => "other",
    }
}

/// A value as mongod prints it in messages: `{ _id: "x", n: 1 }`, `[ 1, 2 ]`,
/// `ObjectId('...')`.
pub(crate) fn render(v: &Bson) -> String {
    match v {
        Bson::String(s) => format!("{s:?}"),
        Bson::Document(d) => render_document(d),
        Bson::Array(a) if a.is_empty() => "[]".to_string(),
        Bson::Array(a) => format!(
            "[ {} ]",
            a.iter().map(render).collect::<Vec<_>>().join(", ")
        ),
        Bson::ObjectId(o) => format!("ObjectId('{o}')"),
        Bson::Int64(i) => i.to_string(),
        Bson::Int32(i) => i.to_string(),
        Bson::Double(d) if d.fract() == 0.0 && d.is_finite() => format!("{d:.1}"),
        Bson::Double(d) => d.to_string(),
        Bson::Null => "null".to_string(),
        Bson::Boolean(b) => b.to_string(),
        other => other.to_string(),
    }
}

/// A document as mongod prints it: `{ a: 1, b: "x" }`, `{}` when empty.
pub(crate) fn render_document(d: &Document) -> String {
    if d.is_empty() {
        return "{}".to_string();
    }
    let fields: Vec<String> = d
        .iter()
        .map(|(k, v)| format!("{k}: {}", render(v)))
        .collect();
    format!("{{ {} }}", fields.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    #[test]
    fn numbers_compare_by_value_documents_in_order() {
        assert!(values_equal(&Bson::Int32(1), &Bson::Double(1.0)));
        assert!(values_equal(&Bson::Int64(2), &Bson::Int32(2)));
        assert!(!values_equal(&Bson::Int32(1), &Bson::String("1".into())));
        assert!(values_equal(
            &Bson::Document(doc! {"a": 1, "b": 2}),
            &Bson::Document(doc! {"a": 1.0, "b": 2_i64})
        ));
        assert!(!values_equal(
            &Bson::Document(doc! {"a": 1, "b": 2}),
            &Bson::Document(doc! {"b": 2, "a": 1})
        ));
        assert!(!identical(&doc! {"a": 1}, &doc! {"a": 1.0}));
    }

    #[test]
    fn renders_like_mongod_messages() {
        assert_eq!(
            render_document(&doc! {"_id": "featureCompatibilityVersion", "version": "6.0"}),
            r#"{ _id: "featureCompatibilityVersion", version: "6.0" }"#
        );
        assert_eq!(render(&Bson::Double(2.0)), "2.0");
        assert_eq!(render_document(&doc! {}), "{}");
        assert_eq!(
            get_path(&doc! {"a": {"b": 3}}, "a.b"),
            Some(&Bson::Int32(3))
        );
        assert_eq!(get_path(&doc! {"a": 1}, "a.b"), None);
    }
}
