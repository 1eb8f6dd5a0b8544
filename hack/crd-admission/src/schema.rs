//! The compiled form of a CRD version's `openAPIV3Schema`: one [`Node`] per
//! schema node, with patterns and CEL rules compiled once.

use std::collections::BTreeMap;
use std::fmt;

use regex::Regex;
use serde_json::{Map, Value};

use crate::cel_rules::{self, Rule};

/// Why a schema could not be compiled (kube-apiserver would refuse the CRD).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaError {
    /// Where in the schema, e.g. `openAPIV3Schema.properties[spec].pattern`.
    pub path: String,
    pub message: String,
}

impl fmt::Display for SchemaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

impl std::error::Error for SchemaError {}

/// `x-kubernetes-list-type`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ListType {
    Atomic,
    Set,
    Map(Vec<String>),
}

/// One schema node.
#[derive(Debug, Default)]
pub(crate) struct Node {
    pub type_: Option<String>,
    pub format: Option<String>,
    pub nullable: bool,
    pub properties: BTreeMap<String, Node>,
    pub additional_properties: Option<Box<Node>>,
    pub items: Option<Box<Node>>,
    pub required: Vec<String>,
    pub enum_values: Option<Vec<Value>>,
    pub minimum: Option<f64>,
    pub exclusive_minimum: bool,
    pub maximum: Option<f64>,
    pub exclusive_maximum: bool,
    pub multiple_of: Option<f64>,
    pub min_length: Option<i64>,
    pub max_length: Option<i64>,
    pub min_items: Option<i64>,
    pub max_items: Option<i64>,
    pub min_properties: Option<i64>,
    pub max_properties: Option<i64>,
    /// The pattern as written (for messages) and compiled.
    pub pattern: Option<(String, Regex)>,
    pub default: Option<Value>,
    pub preserve_unknown_fields: bool,
    pub int_or_string: bool,
    pub embedded_resource: bool,
    pub list_type: Option<ListType>,
    /// `x-kubernetes-map-type: atomic` (oldSelf is not correlated by key).
    pub map_atomic: bool,
    pub all_of: Vec<Node>,
    pub any_of: Vec<Node>,
    pub one_of: Vec<Node>,
    pub not: Option<Box<Node>>,
    pub rules: Vec<Rule>,
}

impl Node {
    /// Compiles a schema node (and everything below it).
    pub(crate) fn compile(schema: &Value, path: &str) -> Result<Node, SchemaError> {
        let obj = schema
            .as_object()
            .ok_or_else(|| err(path, "must be an object"))?;
        let mut node = Node {
            type_: opt_string(obj, "type", path)?,
            format: opt_string(obj, "format", path)?,
            nullable: opt_bool(obj, "nullable", path)?,
            required: string_list(obj, "required", path)?,
            enum_values: match obj.get("enum") {
                None | Some(Value::Null) => None,
                Some(Value::Array(a)) => Some(a.clone()),
                Some(_) => return Err(err(&format!("{path}.enum"), "must be an array")),
            },
            minimum: opt_f64(obj, "minimum", path)?,
            exclusive_minimum: opt_bool(obj, "exclusiveMinimum", path)?,
            maximum: opt_f64(obj, "maximum", path)?,
            exclusive_maximum: opt_bool(obj, "exclusiveMaximum", path)?,
            multiple_of: opt_f64(obj, "multipleOf", path)?,
            min_length: opt_i64(obj, "minLength", path)?,
            max_length: opt_i64(obj, "maxLength", path)?,
            min_items: opt_i64(obj, "minItems", path)?,
            max_items: opt_i64(obj, "maxItems", path)?,
            min_properties: opt_i64(obj, "minProperties", path)?,
            max_properties: opt_i64(obj, "maxProperties", path)?,
            default: obj.get("default").filter(|d| !d.is_null()).cloned(),
            preserve_unknown_fields: opt_bool(obj, "x-kubernetes-preserve-unknown-fields", path)?,
            int_or_string: opt_bool(obj, "x-kubernetes-int-or-string", path)?,
            embedded_resource: opt_bool(obj, "x-kubernetes-embedded-resource", path)?,
            ..Node::default()
        };
        if let Some(p) = opt_string(obj, "pattern", path)? {
            let re = Regex::new(&p)
                .map_err(|e| err(&format!("{path}.pattern"), &format!("invalid pattern: {e}")))?;
            node.pattern = Some((p, re));
        }
        if let Some(Value::Object(props)) = obj.get("properties") {
            for (name, sub) in props {
                let sub_path = format!("{path}.properties[{name}]");
                node.properties
                    .insert(name.clone(), Node::compile(sub, &sub_path)?);
            }
        } else if obj.get("properties").is_some_and(|p| !p.is_null()) {
            return Err(err(&format!("{path}.properties"), "must be an object"));
        }
        match obj.get("additionalProperties") {
            None | Some(Value::Null) | Some(Value::Bool(false)) => {}
            // `true` allows anything: the same as a schema that keeps all fields.
            Some(Value::Bool(true)) => {
                node.additional_properties = Some(Box::new(Node {
                    preserve_unknown_fields: true,
                    ..Node::default()
                }))
            }
            Some(sub) => {
                node.additional_properties = Some(Box::new(Node::compile(
                    sub,
                    &format!("{path}.additionalProperties"),
                )?))
            }
        }
        match obj.get("items") {
            None | Some(Value::Null) => {}
            Some(Value::Array(_)) => {
                return Err(err(
                    &format!("{path}.items"),
                    "items must be a schema object and not an array",
                ))
            }
            Some(sub) => node.items = Some(Box::new(Node::compile(sub, &format!("{path}.items"))?)),
        }
        node.all_of = sub_schemas(obj, "allOf", path)?;
        node.any_of = sub_schemas(obj, "anyOf", path)?;
        node.one_of = sub_schemas(obj, "oneOf", path)?;
        if let Some(n) = obj.get("not").filter(|n| !n.is_null()) {
            node.not = Some(Box::new(Node::compile(n, &format!("{path}.not"))?));
        }
        node.list_type = match opt_string(obj, "x-kubernetes-list-type", path)?.as_deref() {
            None => None,
            Some("atomic") => Some(ListType::Atomic),
            Some("set") => Some(ListType::Set),
            Some("map") => {
                let keys = string_list(obj, "x-kubernetes-list-map-keys", path)?;
                if keys.is_empty() {
                    return Err(err(
                        &format!("{path}.x-kubernetes-list-map-keys"),
                        "must not be empty if x-kubernetes-list-type is map",
                    ));
                }
                Some(ListType::Map(keys))
            }
            Some(other) => {
                return Err(err(
                    &format!("{path}.x-kubernetes-list-type"),
                    &format!(
                    "unsupported value {other:?}: supported values: \"atomic\", \"map\", \"set\""
                ),
                ))
            }
        };
        node.map_atomic =
            opt_string(obj, "x-kubernetes-map-type", path)?.as_deref() == Some("atomic");
        if let Some(rules) = obj.get("x-kubernetes-validations").filter(|r| !r.is_null()) {
            let rules = rules.as_array().ok_or_else(|| {
                err(
                    &format!("{path}.x-kubernetes-validations"),
                    "must be an array",
                )
            })?;
            for (i, rule) in rules.iter().enumerate() {
                let rule_path = format!("{path}.x-kubernetes-validations[{i}]");
                node.rules
                    .push(cel_rules::compile_rule(rule, &node, &rule_path)?);
            }
        }
        Ok(node)
    }

    /// The schema type shown as the bad value of CEL errors (`"object"`, …).
    pub(crate) fn type_name(&self) -> &str {
        self.type_.as_deref().unwrap_or("")
    }
}

pub(crate) fn err(path: &str, message: &str) -> SchemaError {
    SchemaError {
        path: path.to_string(),
        message: message.to_string(),
    }
}

fn sub_schemas(obj: &Map<String, Value>, key: &str, path: &str) -> Result<Vec<Node>, SchemaError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(a)) => a
            .iter()
            .enumerate()
            .map(|(i, s)| Node::compile(s, &format!("{path}.{key}[{i}]")))
            .collect(),
        Some(_) => Err(err(&format!("{path}.{key}"), "must be an array")),
    }
}

fn opt_string(
    obj: &Map<String, Value>,
    key: &str,
    path: &str,
) -> Result<Option<String>, SchemaError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(err(&format!("{path}.{key}"), "must be a string")),
    }
}

fn opt_bool(obj: &Map<String, Value>, key: &str, path: &str) -> Result<bool, SchemaError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(err(&format!("{path}.{key}"), "must be a boolean")),
    }
}

fn opt_f64(obj: &Map<String, Value>, key: &str, path: &str) -> Result<Option<f64>, SchemaError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => Ok(n.as_f64()),
        Some(_) => Err(err(&format!("{path}.{key}"), "must be a number")),
    }
}

fn opt_i64(obj: &Map<String, Value>, key: &str, path: &str) -> Result<Option<i64>, SchemaError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) if n.as_i64().is_some() => Ok(n.as_i64()),
        Some(_) => Err(err(&format!("{path}.{key}"), "must be an integer")),
    }
}

fn string_list(
    obj: &Map<String, Value>,
    key: &str,
    path: &str,
) -> Result<Vec<String>, SchemaError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(a)) => a
            .iter()
            .map(|v| {
                v.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| err(&format!("{path}.{key}"), "must be an array of strings"))
            })
            .collect(),
        Some(_) => Err(err(&format!("{path}.{key}"), "must be an array of strings")),
    }
}
