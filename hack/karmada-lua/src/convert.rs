//! Values into Lua and back, as Karmada converts them.
//!
//! Into Lua, `decodeValue` (`luavm/lua.go`) hands an object over through
//! `json.Marshal` and gopher-json's `Decode`: JSON arrays become plain tables
//! (appended, so a `null` element is skipped), `null` object members are
//! absent, every number is a float.
//!
//! Out of Lua, `ConvertLuaResultInto` (`luavm/lua_convert.go`) encodes the
//! result table with gopher-json's `Encode` (every empty table is `[]`), puts
//! empty tables right with `convertEmptySliceToEmptyStructPartly`, then
//! `json.Unmarshal`s the bytes into the Go type the operation returns.

use std::collections::{BTreeSet, HashSet};

use mlua::{Lua, Value};
use serde_json::{json, Map, Value as Json};

use crate::Error;

/// `decodeValue`: a JSON value as Karmada hands it to a script.
pub fn to_lua(lua: &Lua, value: &Json) -> Result<Value, Error> {
    Ok(match value {
        Json::Null => Value::Nil,
        Json::Bool(b) => Value::Boolean(*b),
        Json::Number(n) => Value::Number(n.as_f64().unwrap_or(f64::NAN)),
        Json::String(s) => Value::String(lua.create_string(s).map_err(Error::vm)?),
        Json::Array(items) => {
            let table = lua.create_table().map_err(Error::vm)?;
            // gopher-lua's LTable.Append ignores nil: a null element is skipped.
            for item in items.iter().filter(|item| !item.is_null()) {
                table.raw_push(to_lua(lua, item)?).map_err(Error::vm)?;
            }
            Value::Table(table)
        }
        Json::Object(members) => {
            let table = lua.create_table().map_err(Error::vm)?;
            for (key, item) in members {
                table
                    .raw_set(key.as_str(), to_lua(lua, item)?)
                    .map_err(Error::vm)?;
            }
            Value::Table(table)
        }
    })
}

/// gopher-json's `Encode` (the version Karmada vendors): an empty table is
/// `[]`; a table whose first key is a number must be the list `1..n`, one
/// whose first key is a string an object of string keys; a table reached
/// twice, anywhere, is refused.
pub fn encode(value: &Value) -> Result<Json, Error> {
    encode_visiting(value, &mut HashSet::new())
}

fn encode_visiting(value: &Value, visited: &mut HashSet<usize>) -> Result<Json, Error> {
    let invalid_keys = || Error::Encode("cannot encode mixed or invalid key types".into());
    match value {
        Value::Nil => Ok(Json::Null),
        Value::Boolean(b) => Ok(Json::Bool(*b)),
        Value::Integer(i) => number(*i as f64),
        Value::Number(f) => number(*f),
        Value::String(s) => Ok(Json::String(s.to_string_lossy())),
        Value::Table(table) => {
            if !visited.insert(table.to_pointer() as usize) {
                return Err(Error::Encode(
                    "cannot encode recursively nested tables to JSON".into(),
                ));
            }
            let pairs: Vec<(Value, Value)> = table
                .pairs::<Value, Value>()
                .collect::<mlua::Result<_>>()
                .map_err(Error::vm)?;
            let Some((first, _)) = pairs.first() else {
                return Ok(Json::Array(vec![]));
            };
            match first {
                Value::Integer(_) | Value::Number(_) => {
                    let mut items = Vec::new();
                    for (expected, (key, item)) in (1..).zip(&pairs) {
                        let key = match key {
                            Value::Integer(i) => *i as f64,
                            Value::Number(f) => *f,
                            _ => return Err(invalid_keys()),
                        };
                        if key != f64::from(expected) {
                            return Err(Error::Encode("cannot encode sparse array".into()));
                        }
                        items.push(encode_visiting(item, visited)?);
                    }
                    Ok(Json::Array(items))
                }
                Value::String(_) => {
                    let mut members = Map::new();
                    for (key, item) in &pairs {
                        let Value::String(key) = key else {
                            return Err(invalid_keys());
                        };
                        members.insert(key.to_string_lossy(), encode_visiting(item, visited)?);
                    }
                    Ok(Json::Object(members))
                }
                _ => Err(invalid_keys()),
            }
        }
        other => Err(Error::Encode(format!(
            "cannot encode {} to JSON",
            type_name(other)
        ))),
    }
}

/// A value's type as Lua 5.1 names it: whole numbers are numbers too (the
/// binding keeps them apart, Lua 5.1 and gopher-lua do not).
pub(crate) fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Integer(_) => "number",
        other => other.type_name(),
    }
}

/// `json.Marshal(float64)`: NaN and the infinities have no JSON.
fn number(f: f64) -> Result<Json, Error> {
    serde_json::Number::from_f64(f)
        .map(Json::Number)
        .ok_or_else(|| Error::Encode(format!("json: unsupported value: {f}")))
}

/// The Go type `ConvertLuaResultInto` decodes a result into.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum GoType {
    /// `*unstructured.Unstructured` (a struct that needs `kind`).
    Unstructured,
    /// Another struct (`ReplicaRequirements`, `runtime.RawExtension`).
    Struct,
    /// A slice (`[]DependentObjectReference`).
    Slice,
}

/// `ConvertLuaResultInto(result, into, references...)`, from the encoded
/// result: `convertEmptySliceToEmptyStructPartly` (an empty result is `{}` for
/// a struct and `[]` for a slice; below the root, an empty table becomes `{}`
/// where a reference has an empty object at the same path, stays `[]` where it
/// has an empty list, and is dropped otherwise), then `json.Unmarshal` into
/// `into` ([`integral_numbers`]).
pub fn convert_result(encoded: Json, into: GoType, references: &[&Json]) -> Result<Json, Error> {
    let converted = if encoded == json!([]) {
        if into == GoType::Slice {
            json!([])
        } else {
            json!({})
        }
    } else {
        let mut empty = EmptyFields::default();
        for reference in references {
            empty.find(reference, &[]);
        }
        let mut result = encoded;
        empty.fix(&mut result, &[]);
        result
    };
    match into {
        GoType::Slice if !converted.is_array() => Err(Error::Unmarshal(format!(
            "cannot unmarshal {converted} into a slice"
        ))),
        GoType::Struct | GoType::Unstructured if !converted.is_object() => Err(Error::Unmarshal(
            format!("cannot unmarshal {converted} into a struct"),
        )),
        GoType::Unstructured
            if converted
                .get("kind")
                .and_then(Json::as_str)
                .unwrap_or("")
                .is_empty() =>
        {
            Err(Error::Unmarshal("Object 'Kind' is missing".into()))
        }
        _ => Ok(integral_numbers(converted)),
    }
}

/// The paths of the empty lists and empty objects of the references
/// (`traverseToFindEmptyField`): keys joined with `.` (escaped as
/// `escapeJSONPathDotAndColon` does), list elements adding no segment.
#[derive(Default)]
struct EmptyFields {
    slices: BTreeSet<String>,
    structs: BTreeSet<String>,
}

/// How an empty table found in a result is put right.
enum Fix {
    /// A reference had an empty object there: `{}`.
    Object,
    /// A reference had an empty list there: stays `[]`.
    Keep,
    /// No reference had either: the field is deleted.
    Delete,
}

impl EmptyFields {
    fn find(&mut self, value: &Json, path: &[String]) {
        let children: Vec<(Option<&String>, &Json)> = match value {
            Json::Object(members) => members.iter().map(|(k, v)| (Some(k), v)).collect(),
            Json::Array(items) => items.iter().map(|v| (None, v)).collect(),
            _ => return,
        };
        for (key, child) in children {
            let mut child_path = path.to_vec();
            if let Some(key) = key {
                child_path.push(escape(key));
            }
            match child {
                Json::Array(items) if items.is_empty() => {
                    self.slices.insert(child_path.join("."));
                }
                Json::Object(members) if members.is_empty() => {
                    self.structs.insert(child_path.join("."));
                }
                Json::Array(_) | Json::Object(_) => self.find(child, &child_path),
                _ => {}
            }
        }
    }

    fn decide(&self, path: &[String]) -> Fix {
        let key = path.join(".");
        if self.structs.contains(&key) {
            Fix::Object
        } else if self.slices.contains(&key) {
            Fix::Keep
        } else {
            Fix::Delete
        }
    }

    /// `traverseToFindEmptyFieldNeededModify` and the sjson edits that follow.
    fn fix(&self, value: &mut Json, path: &[String]) {
        match value {
            Json::Object(members) => {
                let keys: Vec<String> = members.keys().cloned().collect();
                for key in keys {
                    let mut child_path = path.to_vec();
                    child_path.push(escape(&key));
                    let Some(child) = members.get_mut(&key) else {
                        continue;
                    };
                    if child.as_array().is_some_and(Vec::is_empty) {
                        match self.decide(&child_path) {
                            Fix::Object => *child = json!({}),
                            Fix::Delete => {
                                members.remove(&key);
                            }
                            Fix::Keep => {}
                        }
                    } else {
                        self.fix(child, &child_path);
                    }
                }
            }
            Json::Array(items) => {
                // Deleted from the last index down, so that earlier indices hold.
                for index in (0..items.len()).rev() {
                    if items[index].as_array().is_some_and(Vec::is_empty) {
                        match self.decide(path) {
                            Fix::Object => items[index] = json!({}),
                            Fix::Delete => {
                                items.remove(index);
                            }
                            Fix::Keep => {}
                        }
                    } else {
                        self.fix(&mut items[index], path);
                    }
                }
            }
            _ => {}
        }
    }
}

/// `escapeJSONPathDotAndColon`.
fn escape(key: &str) -> String {
    key.replace('.', "\\.").replace(':', "\\:")
}

/// 2⁶³: the first whole float64 past `int64`.
const INT64_END: f64 = 9_223_372_036_854_775_808.0;

/// Numbers as `json.Unmarshal` into an `Unstructured` leaves them. Lua's
/// numbers are float64s; gopher-json writes them with Go's `encoding/json`,
/// which prints a whole float64 below 1e21 as an integer literal, and
/// apimachinery's decoder (`sigs.k8s.io/json`, `UnmarshalCaseSensitivePreserveInts`)
/// makes an `int64` of every integer literal that fits one, a `float64` of the
/// rest. So a whole number in [-2⁶³, 2⁶³) comes back an integer; anything
/// else stays a float.
pub fn integral_numbers(value: Json) -> Json {
    match value {
        Json::Number(n) => match n.as_f64() {
            Some(f) if n.is_f64() && f.fract() == 0.0 && (-INT64_END..INT64_END).contains(&f) => {
                json!(f as i64)
            }
            _ => Json::Number(n),
        },
        Json::Array(items) => Json::Array(items.into_iter().map(integral_numbers).collect()),
        Json::Object(map) => Json::Object(
            map.into_iter()
                .map(|(k, v)| (k, integral_numbers(v)))
                .collect(),
        ),
        other => other,
    }
}
