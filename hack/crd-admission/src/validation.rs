//! OpenAPI value validation of a (pruned, defaulted) custom resource, worded as
//! kube-openapi's validate package and apiextensions-apiserver's conversion of
//! its results into field errors, plus the `x-kubernetes-list-type` set/map
//! uniqueness checks.
//!
//! Paths follow kube-openapi: properties and map entries joined with `.`,
//! list items as `[i]`. On update, a value equal to its correlated old value
//! is not validated (validation ratcheting, on by default since Kubernetes
//! 1.30): old values correlate through object fields and, in
//! `x-kubernetes-list-type: map` lists, through the map keys.

use serde_json::{json, Map, Value};

use crate::errors::{go_float, go_json, go_quote, FieldError, FieldErrorKind};
use crate::schema::{ListType, Node};

fn child(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// The JSON Schema type name of a value (as kube-openapi names the kind of
/// the data it got).
pub(crate) fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Validates `value` against `node`, appending errors.
pub(crate) fn validate(
    value: &Value,
    old: Option<&Value>,
    node: &Node,
    path: &str,
    errs: &mut Vec<FieldError>,
) {
    if old == Some(value) {
        return; // ratcheted: unchanged values keep whatever errors they had
    }
    validate_type(value, node, path, errs);
    if value.is_null() {
        // A null is only type- and enum-checked.
        validate_enum(value, node, path, errs);
        return;
    }
    validate_combinators(value, node, path, errs);
    match value {
        Value::String(s) => {
            validate_string(s, node, path, errs);
            validate_format(s, node, path, errs);
        }
        Value::Number(n) => validate_number(n, node, path, errs),
        Value::Array(items) => validate_array(items, old, node, path, errs),
        _ => {}
    }
    validate_enum(value, node, path, errs);
    if let Value::Object(map) = value {
        validate_object(map, old.and_then(Value::as_object), node, path, errs);
    }
}

fn type_error(path: &str, expected: &str, actual: &str) -> FieldError {
    FieldError::new(
        path,
        FieldErrorKind::TypeInvalid,
        Some(json!(actual)),
        format!(
            "{path} in body must be of type {expected}: {}",
            go_quote(actual)
        ),
    )
}

/// The JSON type of a decoded value and the format kube-openapi infers for
/// it (`int64` for integers, `float64` for other numbers).
fn inferred_type_and_format(v: &Value) -> (&'static str, &'static str) {
    match json_type(v) {
        "integer" => ("integer", "int64"),
        "number" => ("number", "float64"),
        other => (other, ""),
    }
}

/// kube-openapi's type validator, including its format quirks: with a
/// `format`, a non-string, non-array value of another type is reported
/// against the format (`must be of type int32: "float64"`), and a string or
/// array under a non-numeric type with a format is not type-checked at all.
fn validate_type(value: &Value, node: &Node, path: &str, errs: &mut Vec<FieldError>) {
    if node.int_or_string && node.any_of.is_empty() {
        // Kubernetes models int-or-string as anyOf [integer, string].
        if !matches!(json_type(value), "integer" | "string") && !integral_float(value) {
            errs.push(FieldError::new(
                "",
                FieldErrorKind::Invalid,
                Some(json!("")),
                format!("\"{path}\" must validate at least one schema (anyOf)"),
            ));
            errs.push(type_error(path, "integer", json_type(value)));
        }
        return;
    }
    let Some(expected) = node.type_.as_deref() else {
        return;
    };
    if value.is_null() {
        if !node.nullable {
            errs.push(type_error(path, expected, "null"));
        }
        return;
    }
    let format = node.format.as_deref().unwrap_or("");
    let (actual, actual_format) = inferred_type_and_format(value);
    let float_int = actual == "number" && integral_float(value) && expected == "integer";
    let int_float = actual == "integer" && expected == "number";
    let string_or_array = matches!(value, Value::String(_) | Value::Array(_));
    if !string_or_array
        && !format.is_empty()
        && expected != actual
        && actual_format != format
        && !float_int
        && !int_float
    {
        errs.push(type_error(path, format, actual_format));
        return;
    }
    if !matches!(expected, "number" | "integer") && !format.is_empty() && string_or_array {
        return;
    }
    if !(expected == actual || float_int || int_float) {
        errs.push(type_error(path, expected, actual));
    }
}

fn integral_float(v: &Value) -> bool {
    matches!(v, Value::Number(n) if n.as_f64().is_some_and(|f| f.fract() == 0.0 && f.is_finite()))
}

fn validate_combinators(value: &Value, node: &Node, path: &str, errs: &mut Vec<FieldError>) {
    for sub in &node.all_of {
        validate(value, None, sub, path, errs);
    }
    if !node.any_of.is_empty() {
        let results: Vec<Vec<FieldError>> = node
            .any_of
            .iter()
            .map(|s| errors_of(value, s, path))
            .collect();
        if results.iter().all(|r| !r.is_empty()) {
            errs.push(FieldError::new(
                "",
                FieldErrorKind::Invalid,
                Some(json!("")),
                format!("\"{path}\" must validate at least one schema (anyOf)"),
            ));
            errs.extend(results.into_iter().next().unwrap_or_default());
        }
    }
    if !node.one_of.is_empty() {
        let results: Vec<Vec<FieldError>> = node
            .one_of
            .iter()
            .map(|s| errors_of(value, s, path))
            .collect();
        let valid = results.iter().filter(|r| r.is_empty()).count();
        if valid != 1 {
            errs.push(FieldError::new(
                "",
                FieldErrorKind::Invalid,
                Some(json!("")),
                format!("\"{path}\" must validate one and only one schema (oneOf)"),
            ));
            if valid == 0 {
                errs.extend(results.into_iter().next().unwrap_or_default());
            }
        }
    }
    if let Some(not) = &node.not {
        if errors_of(value, not, path).is_empty() {
            errs.push(FieldError::new(
                "",
                FieldErrorKind::Invalid,
                Some(json!("")),
                format!("\"{path}\" must not validate the schema (not)"),
            ));
        }
    }
}

fn errors_of(value: &Value, node: &Node, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    validate(value, None, node, path, &mut errs);
    errs
}

fn validate_string(s: &str, node: &Node, path: &str, errs: &mut Vec<FieldError>) {
    let len = s.chars().count() as i64;
    if let Some(max) = node.max_length {
        if len > max {
            let unit = if max == 1 { "byte" } else { "bytes" };
            errs.push(FieldError::new(
                path,
                FieldErrorKind::TooLong,
                None,
                format!("may not be more than {max} {unit}"),
            ));
            return;
        }
    }
    if let Some(min) = node.min_length {
        if len < min {
            errs.push(FieldError::new(
                path,
                FieldErrorKind::Invalid,
                Some(json!(s)),
                format!("{path} in body should be at least {min} chars long"),
            ));
            return;
        }
    }
    if let Some((pattern, re)) = &node.pattern {
        if !re.is_match(s) {
            errs.push(FieldError::new(
                path,
                FieldErrorKind::Invalid,
                Some(json!(s)),
                format!("{path} in body should match '{pattern}'"),
            ));
        }
    }
}

fn validate_format(s: &str, node: &Node, path: &str, errs: &mut Vec<FieldError>) {
    let Some(format) = node.format.as_deref() else {
        return;
    };
    let valid = match format {
        "ipv4" => s.parse::<std::net::Ipv4Addr>().is_ok(),
        "ipv6" => s.parse::<std::net::Ipv6Addr>().is_ok(),
        "cidr" => is_cidr(s),
        "uuid" | "uuid3" | "uuid4" | "uuid5" => is_uuid(s, format),
        "date" => is_date(s),
        "date-time" | "datetime" => is_date_time(s),
        "byte" => is_base64(s),
        "mac" => is_mac(s),
        "hostname" => is_hostname(s),
        _ => true, // formats not checked here (see README)
    };
    if !valid {
        errs.push(FieldError::new(
            path,
            FieldErrorKind::TypeInvalid,
            Some(json!(s)),
            format!("{path} in body must be of type {format}: {}", go_quote(s)),
        ));
    }
}

fn is_cidr(s: &str) -> bool {
    let Some((ip, bits)) = s.split_once('/') else {
        return false;
    };
    let Ok(bits) = bits.parse::<u8>() else {
        return false;
    };
    if ip.parse::<std::net::Ipv4Addr>().is_ok() {
        bits <= 32
    } else {
        ip.parse::<std::net::Ipv6Addr>().is_ok() && bits <= 128
    }
}

fn is_uuid(s: &str, format: &str) -> bool {
    let b = s.as_bytes();
    if b.len() != 36 {
        return false;
    }
    let shape_ok = b.iter().enumerate().all(|(i, c)| match i {
        8 | 13 | 18 | 23 => *c == b'-',
        _ => c.is_ascii_hexdigit(),
    });
    let version_ok = match format {
        "uuid3" => b[14] == b'3',
        "uuid4" => b[14] == b'4',
        "uuid5" => b[14] == b'5',
        _ => true,
    };
    shape_ok && version_ok
}

fn is_date(s: &str) -> bool {
    let b = s.as_bytes();
    if !s.is_ascii() || b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return false;
    }
    let (Ok(_y), Ok(m), Ok(d)) = (
        s[0..4].parse::<u32>(),
        s[5..7].parse::<u32>(),
        s[8..10].parse::<u32>(),
    ) else {
        return false;
    };
    (1..=12).contains(&m) && (1..=31).contains(&d)
}

fn is_date_time(s: &str) -> bool {
    // RFC 3339: date "T" time [".frac"] ("Z" | ±hh:mm)
    if s.len() < 20 || !s.is_char_boundary(10) || !is_date(&s[..10]) {
        return false;
    }
    let rest = &s[10..];
    let Some(rest) = rest.strip_prefix(['T', 't', ' ']) else {
        return false;
    };
    let b = rest.as_bytes();
    if b.len() < 9 || b[2] != b':' || b[5] != b':' {
        return false;
    }
    let digits = |r: &[u8]| r.iter().all(u8::is_ascii_digit);
    if !digits(&b[0..2]) || !digits(&b[3..5]) || !digits(&b[6..8]) {
        return false;
    }
    let mut tail = &b[8..];
    if tail.first() == Some(&b'.') {
        let n = tail[1..].iter().take_while(|c| c.is_ascii_digit()).count();
        if n == 0 {
            return false;
        }
        tail = &tail[1 + n..];
    }
    match tail {
        [b'Z'] | [b'z'] => true,
        [sign, h1, h2, b':', m1, m2] if (*sign == b'+' || *sign == b'-') => {
            digits(&[*h1, *h2, *m1, *m2])
        }
        _ => false,
    }
}

fn is_base64(s: &str) -> bool {
    let trimmed = s.trim_end_matches('=');
    s.len().is_multiple_of(4)
        && s.len() - trimmed.len() <= 2
        && trimmed
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'+' || c == b'/')
}

fn is_mac(s: &str) -> bool {
    let parts: Vec<&str> = s.split([':', '-']).collect();
    matches!(parts.len(), 6 | 8 | 20)
        && parts
            .iter()
            .all(|p| p.len() == 2 && p.bytes().all(|c| c.is_ascii_hexdigit()))
}

fn is_hostname(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 255
        && s.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label
                    .bytes()
                    .all(|c| c.is_ascii_alphanumeric() || c == b'-')
        })
}

fn validate_number(n: &serde_json::Number, node: &Node, path: &str, errs: &mut Vec<FieldError>) {
    let bad = Some(Value::Number(n.clone()));
    let as_int = n.as_i64();
    let value = n.as_f64().unwrap_or(f64::NAN);
    // The limit is printed as the Go type the value decoded to: int64 or float64.
    let limit = |l: f64| match as_int {
        Some(_) => (l as i64).to_string(),
        None => go_float(l),
    };
    if let Some(factor) = node.multiple_of {
        let not_multiple = match as_int {
            Some(i) if factor.fract() == 0.0 && factor as i64 != 0 => {
                i.wrapping_rem(factor as i64) != 0
            }
            _ => {
                let mult = if factor < 1.0 {
                    1.0 / factor * value
                } else {
                    value / factor
                };
                mult.fract() != 0.0
            }
        };
        if not_multiple {
            errs.push(FieldError::new(
                path,
                FieldErrorKind::Invalid,
                bad.clone(),
                format!("{path} in body should be a multiple of {}", limit(factor)),
            ));
        }
    }
    if let Some(min) = node.minimum {
        let below = match as_int {
            Some(i) => {
                let m = min as i64;
                if node.exclusive_minimum {
                    i <= m
                } else {
                    i < m
                }
            }
            None => {
                if node.exclusive_minimum {
                    value <= min
                } else {
                    value < min
                }
            }
        };
        if below {
            let word = if node.exclusive_minimum {
                "greater than"
            } else {
                "greater than or equal to"
            };
            errs.push(FieldError::new(
                path,
                FieldErrorKind::Invalid,
                bad.clone(),
                format!("{path} in body should be {word} {}", limit(min)),
            ));
        }
    }
    if let Some(max) = node.maximum {
        let above = match as_int {
            Some(i) => {
                let m = max as i64;
                if node.exclusive_maximum {
                    i >= m
                } else {
                    i > m
                }
            }
            None => {
                if node.exclusive_maximum {
                    value >= max
                } else {
                    value > max
                }
            }
        };
        if above {
            let word = if node.exclusive_maximum {
                "less than"
            } else {
                "less than or equal to"
            };
            errs.push(FieldError::new(
                path,
                FieldErrorKind::Invalid,
                bad,
                format!("{path} in body should be {word} {}", limit(max)),
            ));
        }
    }
}

/// The old item correlated with `item` in a map-type list: the one with the
/// same key values.
fn correlate_item<'a>(item: &Value, old: Option<&'a Value>, node: &Node) -> Option<&'a Value> {
    let Some(ListType::Map(keys)) = &node.list_type else {
        return None;
    };
    let old_items = old?.as_array()?;
    let key_of = |v: &Value| -> Option<Vec<Value>> {
        let obj = v.as_object()?;
        Some(
            keys.iter()
                .map(|k| obj.get(k).cloned().unwrap_or(Value::Null))
                .collect(),
        )
    };
    let wanted = key_of(item)?;
    old_items
        .iter()
        .find(|o| key_of(o).as_ref() == Some(&wanted))
}

fn validate_array(
    items: &[Value],
    old: Option<&Value>,
    node: &Node,
    path: &str,
    errs: &mut Vec<FieldError>,
) {
    if let Some(item_schema) = node.items.as_deref() {
        for (i, item) in items.iter().enumerate() {
            let old_item = correlate_item(item, old, node);
            validate(item, old_item, item_schema, &format!("{path}[{i}]"), errs);
        }
    }
    let len = items.len() as i64;
    if let Some(min) = node.min_items {
        if len < min {
            errs.push(FieldError::new(
                path,
                FieldErrorKind::Invalid,
                Some(json!(len)),
                format!("{path} in body should have at least {min} items"),
            ));
        }
    }
    if let Some(max) = node.max_items {
        if len > max {
            errs.push(too_many(path, len, max));
        }
    }
}

fn too_many(path: &str, actual: i64, max: i64) -> FieldError {
    let unit = if max == 1 { "item" } else { "items" };
    FieldError::new(
        path,
        FieldErrorKind::TooMany,
        Some(json!(actual)),
        format!("must have at most {max} {unit}"),
    )
}

fn validate_enum(value: &Value, node: &Node, path: &str, errs: &mut Vec<FieldError>) {
    let Some(allowed) = &node.enum_values else {
        return;
    };
    if allowed.is_empty() || allowed.iter().any(|a| json_equal(a, value)) {
        return;
    }
    let supported: Vec<String> = allowed
        .iter()
        .map(|a| match a {
            Value::String(s) => go_quote(s),
            other => go_quote(&go_json(other)),
        })
        .collect();
    errs.push(FieldError::new(
        path,
        FieldErrorKind::NotSupported,
        Some(value.clone()),
        format!("supported values: {}", supported.join(", ")),
    ));
}

/// JSON equality with numbers compared by value (`1` equals `1.0`).
pub(crate) fn json_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64()) {
            (Some(i), Some(j)) => i == j,
            _ => x.as_f64() == y.as_f64(),
        },
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| json_equal(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_equal(v, w)))
        }
        _ => a == b,
    }
}

fn validate_object(
    map: &Map<String, Value>,
    old: Option<&Map<String, Value>>,
    node: &Node,
    path: &str,
    errs: &mut Vec<FieldError>,
) {
    let count = map.len() as i64;
    if let Some(min) = node.min_properties {
        if count < min {
            errs.push(FieldError::new(
                path,
                FieldErrorKind::Invalid,
                Some(json!(count)),
                format!("{path} in body should have at least {min} properties"),
            ));
            return;
        }
    }
    if let Some(max) = node.max_properties {
        if count > max {
            errs.push(too_many(path, count, max));
            return;
        }
    }
    if let Some(ap) = node.additional_properties.as_deref() {
        for (k, v) in map {
            if !node.properties.contains_key(k) {
                validate(v, old.and_then(|o| o.get(k)), ap, &child(path, k), errs);
            }
        }
    }
    for (k, prop) in &node.properties {
        if let Some(v) = map.get(k) {
            validate(v, old.and_then(|o| o.get(k)), prop, &child(path, k), errs);
        }
    }
    for k in &node.required {
        if !map.contains_key(k) {
            errs.push(FieldError::new(
                &child(path, k),
                FieldErrorKind::Required,
                Some(json!("")),
                "",
            ));
        }
    }
}

/// `x-kubernetes-list-type` invariants: set items and map keys are unique.
/// Paths as Go's `field.Path` (`Key` for map entries: `spec.labels[k]`).
pub(crate) fn validate_list_types(
    value: &Value,
    node: &Node,
    path: &str,
    errs: &mut Vec<FieldError>,
) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                if let Some(prop) = node.properties.get(k) {
                    validate_list_types(v, prop, &child(path, k), errs);
                } else if let Some(ap) = node.additional_properties.as_deref() {
                    validate_list_types(v, ap, &format!("{path}[{k}]"), errs);
                }
            }
        }
        Value::Array(items) => {
            match &node.list_type {
                Some(ListType::Set) => {
                    for (i, item) in items.iter().enumerate() {
                        if items[..i].iter().any(|earlier| json_equal(earlier, item)) {
                            errs.push(FieldError::new(
                                &format!("{path}[{i}]"),
                                FieldErrorKind::Duplicate,
                                Some(item.clone()),
                                "",
                            ));
                        }
                    }
                }
                Some(ListType::Map(keys)) => {
                    let mut seen: Vec<Map<String, Value>> = Vec::new();
                    for (i, item) in items.iter().enumerate() {
                        let Some(obj) = item.as_object() else {
                            errs.push(FieldError::new(
                                &format!("{path}[{i}]"),
                                FieldErrorKind::TypeInvalid,
                                Some(item.clone()),
                                "must be an object for an x-kubernetes-list-type of map",
                            ));
                            continue;
                        };
                        let key: Map<String, Value> = keys
                            .iter()
                            .filter_map(|k| obj.get(k).map(|v| (k.clone(), v.clone())))
                            .collect();
                        if seen.iter().any(|s| {
                            json_equal(&Value::Object(s.clone()), &Value::Object(key.clone()))
                        }) {
                            errs.push(FieldError::new(
                                &format!("{path}[{i}]"),
                                FieldErrorKind::Duplicate,
                                Some(Value::Object(key)),
                                "",
                            ));
                        } else {
                            seen.push(key);
                        }
                    }
                }
                _ => {}
            }
            if let Some(item_schema) = node.items.as_deref() {
                for (i, item) in items.iter().enumerate() {
                    validate_list_types(item, item_schema, &format!("{path}[{i}]"), errs);
                }
            }
        }
        _ => {}
    }
}

/// Embedded resources (`x-kubernetes-embedded-resource`, below the root) need
/// a non-empty `apiVersion` that parses as a group/version and a non-empty
/// `kind`. Paths as Go's `field.Path`.
pub(crate) fn validate_embedded_resources(
    value: &Value,
    node: &Node,
    path: &str,
    errs: &mut Vec<FieldError>,
) {
    match value {
        Value::Object(map) => {
            if node.embedded_resource && !path.is_empty() {
                check_type_meta(map, path, errs);
            }
            for (k, v) in map {
                if let Some(prop) = node.properties.get(k) {
                    validate_embedded_resources(v, prop, &child(path, k), errs);
                } else if let Some(ap) = node.additional_properties.as_deref() {
                    validate_embedded_resources(v, ap, &format!("{path}[{k}]"), errs);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = node.items.as_deref() {
                for (i, item) in items.iter().enumerate() {
                    validate_embedded_resources(item, item_schema, &format!("{path}[{i}]"), errs);
                }
            }
        }
        _ => {}
    }
}

fn check_type_meta(map: &Map<String, Value>, path: &str, errs: &mut Vec<FieldError>) {
    for field in ["apiVersion", "kind"] {
        let field_path = child(path, field);
        match map.get(field) {
            None => errs.push(FieldError::new(
                &field_path,
                FieldErrorKind::Required,
                Some(json!("")),
                "must not be empty",
            )),
            Some(Value::String(s)) if s.is_empty() => errs.push(FieldError::new(
                &field_path,
                FieldErrorKind::Invalid,
                Some(json!(s)),
                "must not be empty",
            )),
            Some(Value::String(s)) if field == "apiVersion" && s.matches('/').count() > 1 => errs
                .push(FieldError::new(
                    &field_path,
                    FieldErrorKind::Invalid,
                    Some(json!(s)),
                    format!("unexpected GroupVersion string: {s}"),
                )),
            Some(Value::String(_)) => {}
            Some(other) => errs.push(FieldError::new(
                &field_path,
                FieldErrorKind::Invalid,
                Some(other.clone()),
                "must be a string",
            )),
        }
    }
}
