//! `x-kubernetes-validations`: compiling CEL rules with the `cel` crate and
//! evaluating them over a custom resource the way apiextensions-apiserver's
//! CEL validator does (`self`, `oldSelf`, transition rules, `fieldPath`,
//! `reason`, `messageExpression`, ratcheting of unchanged values on update).
//!
//! Values reach CEL typed by the schema, never through `cel::to_value`: JSON
//! integers become CEL `int` (Kubernetes has no `uint`), `type: number` values
//! become `double`, object properties are exposed under their CEL-escaped
//! names and map entries under their keys.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use cel::objects::{Key, Map as CelMap, OptionalValue};
use cel::{Context, Env, ExecutionError, Program, Value as CelValue};
use serde_json::{json, Value};

use crate::errors::{FieldError, FieldErrorKind};
use crate::schema::{err, ListType, Node, SchemaError};

/// One compiled `x-kubernetes-validations` entry.
#[derive(Debug)]
pub(crate) struct Rule {
    source: String,
    program: Program,
    message: Option<String>,
    message_expression: Option<Program>,
    /// `fieldPath` rendered as a Go `field.Path` (`spec.replicas`, `[key]`).
    field_path: Option<String>,
    reason: Option<FieldErrorKind>,
    optional_old_self: bool,
    uses_old_self: bool,
}

/// The CEL environment: the standard library plus the extension libraries
/// the `cel` crate ships that Kubernetes also enables (strings, lists, math,
/// base64), and Kubernetes' quantity library.
fn env() -> &'static Arc<Env> {
    static ENV: OnceLock<Arc<Env>> = OnceLock::new();
    ENV.get_or_init(|| {
        let mut env = Env::stdlib();
        // Each extension is optional: a failure to register one leaves the
        // rules that use it to fail at evaluation, never a panic.
        let _ = env.add_extension(cel::extensions::strings);
        let _ = env.add_extension(cel::extensions::lists);
        let _ = env.add_extension(cel::extensions::math);
        let _ = env.add_extension(cel::extensions::encoders);
        let _ = env.add_extension(crate::cel_quantity::library);
        Arc::new(env)
    })
}

fn compile(source: &str, path: &str) -> Result<Program, SchemaError> {
    env()
        .compile(source)
        .map_err(|e| err(path, &format!("compilation failed: {e}")))
}

/// Compiles one entry of `node`'s `x-kubernetes-validations`.
pub(crate) fn compile_rule(rule: &Value, node: &Node, path: &str) -> Result<Rule, SchemaError> {
    let obj = rule
        .as_object()
        .ok_or_else(|| err(path, "must be an object"))?;
    let text = |key: &str| -> Result<Option<String>, SchemaError> {
        match obj.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(err(&format!("{path}.{key}"), "must be a string")),
        }
    };
    let source = text("rule")?
        .filter(|r| !r.trim().is_empty())
        .ok_or_else(|| err(&format!("{path}.rule"), "Required value"))?;
    let program = compile(&source, &format!("{path}.rule"))?;
    let message_expression = text("messageExpression")?
        .map(|m| compile(&m, &format!("{path}.messageExpression")))
        .transpose()?;
    let field_path = text("fieldPath")?
        .map(|p| normalize_field_path(&p, node).map_err(|m| err(&format!("{path}.fieldPath"), &m)))
        .transpose()?;
    let reason = match text("reason")?.as_deref() {
        None => None,
        Some("FieldValueInvalid") => Some(FieldErrorKind::Invalid),
        Some("FieldValueForbidden") => Some(FieldErrorKind::Forbidden),
        Some("FieldValueRequired") => Some(FieldErrorKind::Required),
        Some("FieldValueDuplicate") => Some(FieldErrorKind::Duplicate),
        Some(other) => {
            return Err(err(
                &format!("{path}.reason"),
                &format!("Unsupported value: {other:?}: supported values: \"FieldValueDuplicate\", \"FieldValueForbidden\", \"FieldValueInvalid\", \"FieldValueRequired\""),
            ))
        }
    };
    let optional_old_self = match obj.get("optionalOldSelf") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(err(&format!("{path}.optionalOldSelf"), "must be a boolean")),
    };
    let uses_old_self = program.references().has_variable("oldSelf");
    if optional_old_self && !uses_old_self {
        return Err(err(
            &format!("{path}.optionalOldSelf"),
            "may not be set if rule does not use oldSelf",
        ));
    }
    Ok(Rule {
        message: text("message")?.filter(|m| !m.trim().is_empty()),
        source,
        program,
        message_expression,
        field_path,
        reason,
        optional_old_self,
        uses_old_self,
    })
}

/// Checks a rule's `fieldPath` (`.a.b`, `['a.b']`) against the schema of the
/// node carrying the rule, and renders it as Go's `field.Path` would.
fn normalize_field_path(path: &str, node: &Node) -> Result<String, String> {
    let mut rendered = String::new();
    let mut schema = node;
    let mut rest = path;
    while !rest.is_empty() {
        let name: String;
        if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            name = r[..end].to_string();
            if name.is_empty() {
                return Err("unexpected end of JSON path".into());
            }
            rest = &r[end..];
        } else if let Some(r) = rest.strip_prefix("['") {
            let mut end = None;
            let bytes = r.as_bytes();
            for i in 0..bytes.len() {
                if bytes[i] == b'\'' && (i == 0 || bytes[i - 1] != b'\\') {
                    end = Some(i);
                    break;
                }
            }
            let end = end.ok_or("unexpected end of JSON path")?;
            name = r[..end].replace("\\'", "'").replace("\\\\", "\\");
            rest = r[end + 1..].strip_prefix(']').ok_or("expected ]")?;
        } else {
            return Err(format!("expected [ or . but got: {rest}"));
        }
        if !schema.properties.is_empty() {
            let next = schema
                .properties
                .get(&name)
                .ok_or("does not refer to a valid field")?;
            if !rendered.is_empty() {
                rendered.push('.');
            }
            rendered.push_str(&name);
            schema = next;
        } else if let Some(ap) = schema.additional_properties.as_deref() {
            rendered.push_str(&format!("[{name}]"));
            schema = ap;
        } else {
            return Err("does not refer to a valid field".into());
        }
    }
    Ok(rendered)
}

const CEL_RESERVED: [&str; 21] = [
    "true",
    "false",
    "null",
    "in",
    "as",
    "break",
    "const",
    "continue",
    "else",
    "for",
    "function",
    "if",
    "import",
    "let",
    "loop",
    "package",
    "namespace",
    "return",
    "var",
    "void",
    "while",
];

/// The name under which CEL sees a property (Kubernetes' escaping rules), or
/// `None` if it cannot be accessed from CEL.
pub(crate) fn cel_escape(name: &str) -> Option<String> {
    if CEL_RESERVED.contains(&name) {
        return Some(format!("__{name}__"));
    }
    let mut chars = name.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || matches!(c, '_' | '.' | '-' | '/'));
    if !first_ok
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-' | '/'))
    {
        return None;
    }
    let mut out = String::with_capacity(name.len());
    let mut rest = name;
    while let Some(c) = rest.chars().next() {
        if rest.starts_with("__") {
            out.push_str("__underscores__");
            rest = &rest[2..];
            continue;
        }
        match c {
            '.' => out.push_str("__dot__"),
            '-' => out.push_str("__dash__"),
            '/' => out.push_str("__slash__"),
            c => out.push(c),
        }
        rest = &rest[c.len_utf8()..];
    }
    Some(out)
}

/// A JSON value as CEL sees it under schema `node` (`None`: no schema, e.g.
/// under `x-kubernetes-preserve-unknown-fields`).
pub(crate) fn to_cel(value: &Value, node: Option<&Node>, is_resource: bool) -> CelValue {
    match value {
        Value::Null => CelValue::Null,
        Value::Bool(b) => CelValue::Bool(*b),
        Value::Number(n) => {
            let is_number_type = node.is_some_and(|s| s.type_.as_deref() == Some("number"));
            match n.as_i64() {
                Some(i) if !is_number_type => CelValue::Int(i),
                _ => {
                    let f = n.as_f64().unwrap_or(f64::NAN);
                    let integer_type = node.is_some_and(|s| s.type_.as_deref() == Some("integer"));
                    if integer_type && f.fract() == 0.0 && f.abs() < 9.2e18 {
                        CelValue::Int(f as i64)
                    } else {
                        CelValue::Float(f)
                    }
                }
            }
        }
        Value::String(s) => CelValue::String(Arc::new(s.clone())),
        Value::Array(items) => {
            let item_schema = node.and_then(|s| s.items.as_deref());
            let embedded = item_schema.is_some_and(|i| i.embedded_resource);
            CelValue::List(Arc::new(
                items
                    .iter()
                    .map(|v| to_cel(v, item_schema, embedded))
                    .collect(),
            ))
        }
        Value::Object(map) => {
            let mut out: HashMap<Key, CelValue> = HashMap::new();
            match node {
                Some(s) if !s.properties.is_empty() => {
                    // Null-valued fields are absent to CEL.
                    for (k, prop) in &s.properties {
                        if let (Some(v), Some(name)) =
                            (map.get(k).filter(|v| !v.is_null()), cel_escape(k))
                        {
                            out.insert(key(&name), to_cel(v, Some(prop), prop.embedded_resource));
                        }
                    }
                }
                Some(s) if s.additional_properties.is_some() => {
                    let ap = s.additional_properties.as_deref();
                    for (k, v) in map {
                        out.insert(
                            key(k),
                            to_cel(v, ap, ap.is_some_and(|a| a.embedded_resource)),
                        );
                    }
                }
                Some(s) if !s.preserve_unknown_fields && !is_resource => {}
                _ => {
                    for (k, v) in map {
                        out.insert(key(k), to_cel(v, None, false));
                    }
                }
            }
            if is_resource {
                add_type_and_object_meta(map, &mut out);
            }
            CelValue::Map(CelMap { map: Arc::new(out) })
        }
    }
}

fn key(name: &str) -> Key {
    Key::String(Arc::new(name.to_string()))
}

/// At a resource root CEL sees `apiVersion`, `kind`, `metadata.name` and
/// `metadata.generateName` whatever the schema says.
fn add_type_and_object_meta(
    map: &serde_json::Map<String, Value>,
    out: &mut HashMap<Key, CelValue>,
) {
    for field in ["apiVersion", "kind"] {
        if let Some(Value::String(s)) = map.get(field) {
            out.insert(key(field), CelValue::String(Arc::new(s.clone())));
        }
    }
    if let Some(Value::Object(meta)) = map.get("metadata") {
        let mut m: HashMap<Key, CelValue> = HashMap::new();
        for field in ["name", "generateName"] {
            if let Some(Value::String(s)) = meta.get(field) {
                m.insert(key(field), CelValue::String(Arc::new(s.clone())));
            }
        }
        out.insert(key("metadata"), CelValue::Map(CelMap { map: Arc::new(m) }));
    }
}

/// Where and against what a node is being checked.
pub(crate) struct Site<'a> {
    /// Go `field.Path` rendering; `""` is the root (printed `<nil>`).
    pub path: String,
    /// The correlated old value seen as `oldSelf` (`None`: no old value).
    pub old_self: Option<&'a Value>,
    /// The correlated old value for ratcheting (maps correlate even when atomic).
    pub ratchet_old: Option<&'a Value>,
    /// An ancestor is unchanged, so non-transition errors are ratcheted.
    pub ratcheted: bool,
    pub is_resource: bool,
}

/// Evaluates every rule at and below `node` over `value`.
pub(crate) fn validate(value: &Value, node: &Node, site: Site<'_>, errs: &mut Vec<FieldError>) {
    if value.is_null() {
        return;
    }
    let ratcheted = site.ratcheted || site.ratchet_old == Some(value);
    if !node.rules.is_empty() {
        validate_rules(value, node, &site, ratcheted, errs);
    }
    match value {
        Value::Array(items) => {
            let Some(item_schema) = node.items.as_deref() else {
                return;
            };
            for (i, item) in items.iter().enumerate() {
                validate(
                    item,
                    item_schema,
                    Site {
                        path: format!("{}[{i}]", site.path),
                        old_self: correlate_map_item(item, site.old_self, node),
                        ratchet_old: correlate_map_item(item, site.ratchet_old, node),
                        ratcheted,
                        is_resource: item_schema.embedded_resource,
                    },
                    errs,
                );
            }
        }
        Value::Object(map) => {
            let old_self_map = site
                .old_self
                .and_then(Value::as_object)
                .filter(|_| !node.map_atomic);
            let ratchet_map = site.ratchet_old.and_then(Value::as_object);
            for (k, v) in map {
                let (sub, path) = if let Some(prop) = node.properties.get(k) {
                    let path = if site.path.is_empty() {
                        k.clone()
                    } else {
                        format!("{}.{k}", site.path)
                    };
                    (prop, path)
                } else if let Some(ap) = node.additional_properties.as_deref() {
                    (ap, format!("{}[{k}]", site.path))
                } else {
                    continue;
                };
                validate(
                    v,
                    sub,
                    Site {
                        path,
                        old_self: old_self_map.and_then(|m| m.get(k)),
                        ratchet_old: ratchet_map.and_then(|m| m.get(k)),
                        ratcheted,
                        is_resource: sub.embedded_resource,
                    },
                    errs,
                );
            }
        }
        _ => {}
    }
}

/// In a map-type list, the old item with the same key values.
fn correlate_map_item<'a>(item: &Value, old: Option<&'a Value>, node: &Node) -> Option<&'a Value> {
    let Some(ListType::Map(keys)) = &node.list_type else {
        return None;
    };
    let key_of = |v: &Value| -> Option<Vec<Value>> {
        let obj = v.as_object()?;
        Some(
            keys.iter()
                .map(|k| obj.get(k).cloned().unwrap_or(Value::Null))
                .collect(),
        )
    };
    let wanted = key_of(item)?;
    old?.as_array()?
        .iter()
        .find(|o| key_of(o).as_ref() == Some(&wanted))
}

fn validate_rules(
    value: &Value,
    node: &Node,
    site: &Site<'_>,
    ratcheted: bool,
    errs: &mut Vec<FieldError>,
) {
    let self_val = to_cel(value, Some(node), site.is_resource);
    let old_val = site
        .old_self
        .map(|o| to_cel(o, Some(node), site.is_resource));
    let bad_value = Some(json!(node.type_name()));
    for rule in &node.rules {
        if rule.uses_old_self && old_val.is_none() && !rule.optional_old_self {
            continue; // transition rules need an old value
        }
        let old_binding = if rule.optional_old_self {
            let opt = match &old_val {
                Some(v) => OptionalValue::of(v.clone()),
                None => OptionalValue::none(),
            };
            Some(CelValue::Opaque(Arc::new(opt)))
        } else {
            old_val.clone()
        };
        let outcome = evaluate(&rule.program, &self_val, old_binding.as_ref());
        let failure = match outcome {
            Ok(CelValue::Bool(true)) => continue,
            Ok(CelValue::Bool(false)) => None,
            Ok(other) => Some(format!(
                "rule did not evaluate to a bool (got {}) evaluating rule: {}",
                other.type_of(),
                rule.error_string()
            )),
            Err(e) => Some(runtime_error(&e, rule)),
        };
        if let Some(detail) = failure {
            errs.push(FieldError::new(
                &site.path,
                FieldErrorKind::Invalid,
                bad_value.clone(),
                detail,
            ));
            continue;
        }
        if ratcheted && !rule.uses_old_self {
            continue; // unchanged since the old object: ratcheted
        }
        let path = match &rule.field_path {
            None => site.path.clone(),
            Some(fp) if site.path.is_empty() => fp.clone(),
            Some(fp) => format!("{}.{fp}", site.path),
        };
        let detail = rule
            .message_expression
            .as_ref()
            .and_then(|m| evaluate_message(m, &self_val, old_binding.as_ref()))
            .unwrap_or_else(|| rule.message_or_default());
        errs.push(match rule.reason {
            Some(FieldErrorKind::Forbidden) => {
                FieldError::new(&path, FieldErrorKind::Forbidden, Some(json!("")), detail)
            }
            Some(FieldErrorKind::Required) => {
                FieldError::new(&path, FieldErrorKind::Required, Some(json!("")), detail)
            }
            Some(FieldErrorKind::Duplicate) => {
                FieldError::new(&path, FieldErrorKind::Duplicate, bad_value.clone(), "")
            }
            _ => FieldError::new(&path, FieldErrorKind::Invalid, bad_value.clone(), detail),
        });
    }
}

fn evaluate(
    program: &Program,
    self_val: &CelValue,
    old_self: Option<&CelValue>,
) -> Result<CelValue, ExecutionError> {
    let mut ctx = Context::with_env(Arc::clone(env()));
    ctx.add_variable_as_val("self", self_val.clone().try_into()?);
    if let Some(old) = old_self {
        ctx.add_variable_as_val("oldSelf", old.clone().try_into()?);
    }
    program.execute(&ctx)
}

/// A `messageExpression`'s message, or `None` (fall back to the rule's
/// message) if it fails or yields no usable single-line string.
fn evaluate_message(
    program: &Program,
    self_val: &CelValue,
    old_self: Option<&CelValue>,
) -> Option<String> {
    match evaluate(program, self_val, old_self) {
        Ok(CelValue::String(s)) => {
            let trimmed = s.trim();
            (!trimmed.is_empty() && !trimmed.contains('\n') && trimmed.len() <= 5 * 1024)
                .then(|| trimmed.to_string())
        }
        _ => None,
    }
}

/// A runtime evaluation error worded as kube-apiserver words cel-go's.
fn runtime_error(e: &ExecutionError, rule: &Rule) -> String {
    match e {
        ExecutionError::NoSuchOverload(_)
        | ExecutionError::UnsupportedBinaryOperator(..)
        | ExecutionError::ValuesNotComparable(..)
        | ExecutionError::UnexpectedType { .. } => format!(
            "'no such overload': call arguments did not match a supported operator, function or macro signature for rule: {}",
            rule.error_string()
        ),
        ExecutionError::NoSuchKey(k) => format!("no such key: {k} evaluating rule: {}", rule.error_string()),
        ExecutionError::DivisionByZero(_) => format!("division by zero evaluating rule: {}", rule.error_string()),
        ExecutionError::RemainderByZero(_) => format!("modulus by zero evaluating rule: {}", rule.error_string()),
        ExecutionError::Overflow(..) => format!("integer overflow evaluating rule: {}", rule.error_string()),
        // A Go error a Kubernetes library wraps (`types.WrapErr`) is reported by its text.
        ExecutionError::FunctionError { function, message }
            if crate::cel_quantity::WRAPPING_FUNCTIONS.contains(&function.as_str()) =>
        {
            format!("{message} evaluating rule: {}", rule.error_string())
        }
        other => format!("{other} evaluating rule: {}", rule.error_string()),
    }
}

impl Rule {
    /// `ruleErrorString`: the message if any, else the rule.
    fn error_string(&self) -> &str {
        self.message
            .as_deref()
            .map(str::trim)
            .unwrap_or(self.source.trim())
    }

    /// `ruleMessageOrDefault`.
    fn message_or_default(&self) -> String {
        match &self.message {
            Some(m) => m.trim().to_string(),
            None => format!("failed rule: {}", self.source.trim()),
        }
    }
}
