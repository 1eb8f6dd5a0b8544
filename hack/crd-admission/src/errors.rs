//! Field errors and the 422 `Status` built from them, worded as apimachinery's
//! `field.Error.Error()` / `ErrorBody()` and `apierrors.NewInvalid` word them.

use std::fmt;

use serde_json::{json, Value};

/// The machine-readable kind of a field error (apimachinery `field.ErrorType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FieldErrorKind {
    /// `FieldValueInvalid`: "Invalid value".
    Invalid,
    /// `FieldValueRequired`: "Required value".
    Required,
    /// `FieldValueNotSupported`: "Unsupported value" (enum).
    NotSupported,
    /// `FieldValueTypeInvalid`: also printed "Invalid value".
    TypeInvalid,
    /// `FieldValueTooLong`: "Too long" (value omitted).
    TooLong,
    /// `FieldValueTooMany`: "Too many".
    TooMany,
    /// `FieldValueDuplicate`: "Duplicate value".
    Duplicate,
    /// `FieldValueForbidden`: "Forbidden".
    Forbidden,
}

impl FieldErrorKind {
    /// The cause `reason` in a `Status` (`field.ErrorType` string).
    pub fn reason(self) -> &'static str {
        match self {
            FieldErrorKind::Invalid => "FieldValueInvalid",
            FieldErrorKind::Required => "FieldValueRequired",
            FieldErrorKind::NotSupported => "FieldValueNotSupported",
            FieldErrorKind::TypeInvalid => "FieldValueTypeInvalid",
            FieldErrorKind::TooLong => "FieldValueTooLong",
            FieldErrorKind::TooMany => "FieldValueTooMany",
            FieldErrorKind::Duplicate => "FieldValueDuplicate",
            FieldErrorKind::Forbidden => "FieldValueForbidden",
        }
    }

    /// The human label (`field.ErrorType.String()`).
    pub fn label(self) -> &'static str {
        match self {
            FieldErrorKind::Invalid | FieldErrorKind::TypeInvalid => "Invalid value",
            FieldErrorKind::Required => "Required value",
            FieldErrorKind::NotSupported => "Unsupported value",
            FieldErrorKind::TooLong => "Too long",
            FieldErrorKind::TooMany => "Too many",
            FieldErrorKind::Duplicate => "Duplicate value",
            FieldErrorKind::Forbidden => "Forbidden",
        }
    }
}

/// One field-level refusal, as kube-apiserver's `field.Error`.
///
/// `field` is the rendered field path (`spec.members`, `spec.list[0].name`,
/// `spec.labels[key]` for CEL map keys); `"<nil>"` stands for the object root,
/// as a nil `*field.Path` prints. `bad_value` `None` means the value is omitted
/// from the message.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldError {
    pub field: String,
    pub kind: FieldErrorKind,
    pub bad_value: Option<Value>,
    pub detail: String,
}

impl FieldError {
    pub(crate) fn new(
        field: &str,
        kind: FieldErrorKind,
        bad_value: Option<Value>,
        detail: impl Into<String>,
    ) -> Self {
        FieldError {
            field: render_path(field),
            kind,
            bad_value,
            detail: detail.into(),
        }
    }

    /// The message without the field (`field.Error.ErrorBody()`), used as the
    /// cause message in a `Status`.
    pub fn body(&self) -> String {
        let mut s = match self.kind {
            FieldErrorKind::Required | FieldErrorKind::Forbidden | FieldErrorKind::TooLong => {
                self.kind.label().to_string()
            }
            _ => match &self.bad_value {
                None => self.kind.label().to_string(),
                Some(v) => format!("{}: {}", self.kind.label(), go_value(v)),
            },
        };
        if !self.detail.is_empty() {
            s.push_str(": ");
            s.push_str(&self.detail);
        }
        s
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.body())
    }
}

impl std::error::Error for FieldError {}

/// A path as this crate builds it (`""` for the root) rendered as a Go
/// `*field.Path` prints (`<nil>` for the root).
pub(crate) fn render_path(path: &str) -> String {
    if path.is_empty() {
        "<nil>".to_string()
    } else {
        path.to_string()
    }
}

/// The full 422 `Status` kube-apiserver returns for these errors
/// (`apierrors.NewInvalid`): the message joins the distinct error strings, one
/// cause per error; empty `details` members are omitted as Go's `omitempty`
/// omits them.
pub fn invalid_status(kind: &str, group: &str, name: &str, errors: &[FieldError]) -> Value {
    let qualified_kind = if group.is_empty() {
        kind.to_string()
    } else {
        format!("{kind}.{group}")
    };
    let mut distinct: Vec<String> = Vec::new();
    for e in errors {
        let msg = e.to_string();
        if !distinct.contains(&msg) {
            distinct.push(msg);
        }
    }
    let message = match distinct.len() {
        0 => format!("{qualified_kind} {} is invalid", go_quote(name)),
        1 => format!(
            "{qualified_kind} {} is invalid: {}",
            go_quote(name),
            distinct[0]
        ),
        _ => format!(
            "{qualified_kind} {} is invalid: [{}]",
            go_quote(name),
            distinct.join(", ")
        ),
    };
    let causes: Vec<Value> = errors
        .iter()
        .map(|e| json!({"reason": e.kind.reason(), "message": e.body(), "field": e.field}))
        .collect();
    let mut details = serde_json::Map::new();
    for (key, value) in [("name", name), ("group", group), ("kind", kind)] {
        if !value.is_empty() {
            details.insert(key.to_string(), json!(value));
        }
    }
    if !causes.is_empty() {
        details.insert("causes".to_string(), Value::Array(causes));
    }
    json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": "Invalid",
        "details": details,
        "code": 422
    })
}

/// A bad value as `ErrorBody` prints it: numbers and booleans plainly, strings
/// Go-quoted, anything else as Go's `json.Marshal` would.
pub(crate) fn go_value(v: &Value) -> String {
    match v {
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => go_number(n),
        Value::String(s) => go_quote(s),
        _ => go_json(v),
    }
}

/// A JSON number as Go's `%v` prints the `int64` or `float64` it decodes to.
pub(crate) fn go_number(n: &serde_json::Number) -> String {
    if let Some(i) = n.as_i64() {
        i.to_string()
    } else if let Some(u) = n.as_u64() {
        // Beyond int64 a Go unstructured decoder yields a float64.
        go_float(u as f64)
    } else {
        go_float(n.as_f64().unwrap_or(f64::NAN))
    }
}

/// Go's `%v` for a `float64` (`%g` with the shortest representation, exponent
/// when the decimal exponent is below -4 or at least 6).
pub(crate) fn go_float(f: f64) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 {
            "+Inf".into()
        } else {
            "-Inf".into()
        };
    }
    if f == 0.0 {
        return if f.is_sign_negative() {
            "-0".into()
        } else {
            "0".into()
        };
    }
    // Shortest round-trip digits in scientific form, e.g. "1.5e3".
    let sci = format!("{f:e}");
    let (mantissa, exp) = match sci.split_once('e') {
        Some((m, e)) => (m, e.parse::<i32>().unwrap_or(0)),
        None => (sci.as_str(), 0),
    };
    if !(-4..6).contains(&exp) {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exp.abs())
    } else {
        // Plain notation; Rust's Display is shortest round-trip without exponent.
        format!("{f}")
    }
}

/// Go's `strconv.Quote` (and `%q`) for a string.
pub(crate) fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Go's `json.Marshal` of a decoded JSON value: object keys sorted, `<`, `>`,
/// `&` escaped as Go escapes them for HTML safety.
pub(crate) fn go_json(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => match n.as_f64() {
            Some(f) if !(n.is_i64() || n.is_u64()) => go_json_float(f),
            _ => n.to_string(),
        },
        Value::String(s) => go_json_string(s),
        Value::Array(items) => {
            let parts: Vec<String> = items.iter().map(go_json).collect();
            format!("[{}]", parts.join(","))
        }
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let parts: Vec<String> = keys
                .into_iter()
                .map(|k| format!("{}:{}", go_json_string(k), go_json(&map[k])))
                .collect();
            format!("{{{}}}", parts.join(","))
        }
    }
}

/// Go's JSON encoding of a float64: plain notation unless the magnitude is
/// below 1e-6 or at least 1e21.
fn go_json_float(f: f64) -> String {
    let abs = f.abs();
    if abs != 0.0 && !(1e-6..1e21).contains(&abs) {
        let sci = format!("{f:e}");
        match sci.split_once('e') {
            Some((m, e)) => {
                let exp = e.parse::<i32>().unwrap_or(0);
                let sign = if exp < 0 { '-' } else { '+' };
                format!("{m}e{sign}{:02}", exp.abs())
            }
            None => sci,
        }
    } else {
        format!("{f}")
    }
}

fn go_json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                out.push_str(&format!("\\u{:04x}", c as u32))
            }
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}
