//! A Lua 5.1 VM that behaves like the one Karmada runs resource-interpreter
//! scripts in, and Karmada's conversions of values into and out of it.
//!
//! Followed (karmada-io/karmada, read, not copied):
//! - `pkg/resourceinterpreter/customized/declarative/luavm/lua.go`: `setLib`
//!   opens the package (loader `preload` only, `loadlib` raises), base, table,
//!   string (`string.dump` raises), math and a safe os library (`time` and
//!   `date` only), then redefines `collectgarbage`, `dofile`, `getfenv`,
//!   `getmetatable`, `load`, `loadfile`, `loadstring`, `rawequal`, `rawget`,
//!   `rawset`, `setfenv`, `setmetatable`, `module` and `newproxy` as functions
//!   that raise "call function X is not supported in karmada customized
//!   resourceinterpreter."; `decodeValue` hands arguments over (JSON arrays as
//!   plain tables, appended so that a `null` element is skipped; `null` object
//!   members absent; numbers as floats);
//! - `pkg/util/lifted/lua/{loadlib_safe,string_safe,oslib_safe}.go`: the
//!   package, string and os libraries above;
//! - gopher-lua (vendored, v1.1.1) `baselib.go`, `tablelib.go`, `mathlib.go`:
//!   what the base, table and math libraries hold (no `gcinfo`, no
//!   `coroutine`, no `table.foreach`/`foreachi`/`setn`, unlike PUC Lua 5.1);
//! - `luavm/lua_convert.go` `ConvertLuaResultInto` and the vendored
//!   `layeh.com/gopher-json` `Encode`: a result table becomes JSON with every
//!   empty table as `[]` (a table that is reached twice, mixed or non-string
//!   keys, a sparse array, a function: errors), then
//!   `convertEmptySliceToEmptyStructPartly`: an empty result is `{}` when the
//!   target is a struct and `[]` when it is a slice; below the root, an empty
//!   table becomes `{}` where a reference object (the input object, for
//!   `ReviseReplica`) has an empty object at the same path, stays `[]` where it
//!   has an empty list, and is **dropped** otherwise; then `json.Unmarshal`
//!   into the target (an `Unstructured` needs `kind`; whole numbers become
//!   integers).
//!
//! Not reproduced: the `kube` helper module (`require("kube")`; no script here
//! uses it) and the one-second timeout of each call.

use std::collections::{BTreeSet, HashSet};

use mlua::{Lua, LuaOptions, MultiValue, StdLib, Value};
use serde_json::{json, Map, Value as Json};

/// The functions `setLib` redefines to raise an error.
pub const LOCKED_OUT: [&str; 14] = [
    "collectgarbage",
    "dofile",
    "getfenv",
    "getmetatable",
    "load",
    "loadfile",
    "loadstring",
    "rawequal",
    "rawget",
    "rawset",
    "setfenv",
    "setmetatable",
    "module",
    "newproxy",
];

/// A fresh VM with Karmada's libraries.
pub fn new_vm() -> Lua {
    let lua = Lua::new_with(
        StdLib::TABLE | StdLib::STRING | StdLib::MATH | StdLib::OS | StdLib::PACKAGE,
        LuaOptions::default(),
    )
    .expect("Lua VM");
    let mut setup = String::from(
        r#"
        -- oslib_safe.go: only time and date.
        os = { time = os.time, date = os.date }
        package.loaded.os = os
        -- loadlib_safe.go: preload is the only loader; loadlib raises.
        package.loaders = { package.loaders[1] }
        package.loadlib = function() error("loadlib is not supported") end
        package.path = nil
        package.cpath = nil
        package.seeall = nil
        -- string_safe.go: dump raises.
        string.dump = function() error("The Lua function string.dump is not supported by Karmada. If you believe this function is essential for your use case, please submit an issue to let us know why you need it.") end
        -- gopher-lua's base and table libraries do not have these.
        gcinfo = nil
        coroutine = nil
        package.loaded.coroutine = nil
        table.foreach = nil
        table.foreachi = nil
        table.setn = nil
        "#,
    );
    for name in LOCKED_OUT {
        setup.push_str(&format!(
            "function {name}() error('call function {name} is not supported in karmada customized resourceinterpreter.') end\n"
        ));
    }
    lua.load(&setup)
        .set_name("karmada setLib")
        .exec()
        .expect("set up the VM like Karmada's");
    lua
}

/// `decodeValue`: a JSON value as Karmada hands it to Lua.
pub fn to_lua(lua: &Lua, value: &Json) -> Value {
    match value {
        Json::Null => Value::Nil,
        Json::Bool(b) => Value::Boolean(*b),
        Json::Number(n) => Value::Number(n.as_f64().expect("a JSON number")),
        Json::String(s) => Value::String(lua.create_string(s).expect("Lua string")),
        Json::Array(items) => {
            let table = lua.create_table().expect("Lua table");
            // LTable.Append ignores nil: a null element is skipped.
            for item in items.iter().filter(|item| !item.is_null()) {
                table.raw_push(to_lua(lua, item)).expect("append");
            }
            Value::Table(table)
        }
        Json::Object(members) => {
            let table = lua.create_table().expect("Lua table");
            for (key, item) in members {
                table.raw_set(key.as_str(), to_lua(lua, item)).expect("set");
            }
            Value::Table(table)
        }
    }
}

/// gopher-json `Encode`.
pub fn encode(value: &Value) -> Result<Json, String> {
    encode_visiting(value, &mut HashSet::new())
}

fn encode_visiting(value: &Value, visited: &mut HashSet<usize>) -> Result<Json, String> {
    match value {
        Value::Nil => Ok(Json::Null),
        Value::Boolean(b) => Ok(Json::Bool(*b)),
        Value::Integer(i) => number(*i as f64),
        Value::Number(f) => number(*f),
        Value::String(s) => Ok(Json::String(s.to_string_lossy())),
        Value::Table(table) => {
            // The visited set is never emptied: a table reached twice, nested or
            // not, is refused.
            if !visited.insert(table.to_pointer() as usize) {
                return Err("cannot encode recursively nested tables to JSON".into());
            }
            let pairs: Vec<(Value, Value)> = table
                .pairs::<Value, Value>()
                .collect::<mlua::Result<_>>()
                .map_err(|e| e.to_string())?;
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
                            _ => return Err("cannot encode mixed or invalid key types".into()),
                        };
                        if key != expected as f64 {
                            return Err("cannot encode sparse array".into());
                        }
                        items.push(encode_visiting(item, visited)?);
                    }
                    Ok(Json::Array(items))
                }
                Value::String(_) => {
                    let mut members = Map::new();
                    for (key, item) in &pairs {
                        let Value::String(key) = key else {
                            return Err("cannot encode mixed or invalid key types".into());
                        };
                        members.insert(key.to_string_lossy(), encode_visiting(item, visited)?);
                    }
                    Ok(Json::Object(members))
                }
                _ => Err("cannot encode mixed or invalid key types".into()),
            }
        }
        other => Err(format!("cannot encode {} to JSON", other.type_name())),
    }
}

fn number(f: f64) -> Result<Json, String> {
    serde_json::Number::from_f64(f)
        .map(Json::Number)
        .ok_or_else(|| format!("json: unsupported value: {f}"))
}

/// What `ConvertLuaResultInto` decodes a result into.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Target {
    /// `*unstructured.Unstructured` (a struct; `kind` required).
    Unstructured,
    /// Another struct (`ReplicaRequirements`, `runtime.RawExtension`).
    Struct,
    /// A slice (`[]DependentObjectReference`).
    Slice,
}

/// `ConvertLuaResultInto(result, target, references...)`, from the encoded JSON.
pub fn convert_result(encoded: Json, target: Target, references: &[&Json]) -> Result<Json, String> {
    let converted = if encoded == json!([]) {
        if target == Target::Slice {
            json!([])
        } else {
            json!({})
        }
    } else {
        let (mut empty_slices, mut empty_structs) = (BTreeSet::new(), BTreeSet::new());
        for reference in references {
            find_empty(reference, &[], &mut empty_slices, &mut empty_structs);
        }
        let mut result = encoded;
        fix_empty(&mut result, &[], &empty_slices, &empty_structs);
        result
    };
    match target {
        Target::Slice if !converted.is_array() => {
            Err(format!("cannot unmarshal {converted} into a slice"))
        }
        Target::Struct | Target::Unstructured if !converted.is_object() => {
            Err(format!("cannot unmarshal {converted} into a struct"))
        }
        Target::Unstructured
            if converted
                .get("kind")
                .and_then(Json::as_str)
                .unwrap_or("")
                .is_empty() =>
        {
            Err("Object 'Kind' is missing".into())
        }
        _ => Ok(integral_numbers(converted)),
    }
}

/// `escapeJSONPathDotAndColon`.
fn escape(key: &str) -> String {
    key.replace('.', "\\.").replace(':', "\\:")
}

/// `traverseToFindEmptyField`: paths of empty lists and empty objects, list
/// elements adding no path segment.
fn find_empty(
    value: &Json,
    path: &[String],
    slices: &mut BTreeSet<String>,
    structs: &mut BTreeSet<String>,
) {
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
                slices.insert(child_path.join("."));
            }
            Json::Object(members) if members.is_empty() => {
                structs.insert(child_path.join("."));
            }
            Json::Array(_) | Json::Object(_) => find_empty(child, &child_path, slices, structs),
            _ => {}
        }
    }
}

/// `traverseToFindEmptyFieldNeededModify` and the sjson edits that follow: an
/// empty list below the root becomes `{}` where a reference had an empty
/// object, stays where a reference had an empty list, and is deleted otherwise.
fn fix_empty(
    value: &mut Json,
    path: &[String],
    slices: &BTreeSet<String>,
    structs: &BTreeSet<String>,
) {
    let decide = |child_path: &[String]| -> Option<bool> {
        let key = child_path.join(".");
        if structs.contains(&key) {
            Some(true)
        } else if slices.contains(&key) {
            None
        } else {
            Some(false)
        }
    };
    match value {
        Json::Object(members) => {
            let keys: Vec<String> = members.keys().cloned().collect();
            for key in keys {
                let mut child_path = path.to_vec();
                child_path.push(escape(&key));
                let child = members.get_mut(&key).expect("member");
                if child.as_array().is_some_and(Vec::is_empty) {
                    match decide(&child_path) {
                        Some(true) => *child = json!({}),
                        Some(false) => {
                            members.remove(&key);
                        }
                        None => {}
                    }
                } else {
                    fix_empty(child, &child_path, slices, structs);
                }
            }
        }
        Json::Array(items) => {
            // Deleted from the last index down, so that earlier indices hold.
            for index in (0..items.len()).rev() {
                if items[index].as_array().is_some_and(Vec::is_empty) {
                    match decide(path) {
                        Some(true) => items[index] = json!({}),
                        Some(false) => {
                            items.remove(index);
                        }
                        None => {}
                    }
                } else {
                    fix_empty(&mut items[index], path, slices, structs);
                }
            }
        }
        _ => {}
    }
}

/// Whole numbers as Kubernetes' JSON decoding reads them: integers (Go prints a
/// whole float64 below 1e21 without a fraction, and `int64` takes it when it fits).
pub fn integral_numbers(value: Json) -> Json {
    match value {
        Json::Number(n) => match n.as_f64() {
            Some(f) if n.is_f64() && f.fract() == 0.0 && f.abs() < 9.2e18 => json!(f as i64),
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

/// One interpreter operation's script loaded into a fresh Karmada-like VM.
pub struct Interpreter {
    pub lua: Lua,
}

impl Interpreter {
    pub fn new(script: &str, name: &str) -> Interpreter {
        let lua = new_vm();
        lua.load(script)
            .set_name(name)
            .exec()
            .unwrap_or_else(|err| panic!("{name} does not load: {err}"));
        Interpreter { lua }
    }

    /// `RunScript`: calls `function` with the arguments as `decodeValue` hands
    /// them over and returns exactly `returns` values (missing ones are nil).
    pub fn run(&self, function: &str, args: &[Json], returns: usize) -> Result<Vec<Value>, String> {
        let entry = match self
            .lua
            .globals()
            .get::<Value>(function)
            .map_err(|e| e.to_string())?
        {
            Value::Function(f) => f,
            Value::Nil => return Err(format!("not found function {function}")),
            other => {
                return Err(format!(
                    "{function} is not a function: {}",
                    other.type_name()
                ))
            }
        };
        let args: MultiValue = args.iter().map(|arg| to_lua(&self.lua, arg)).collect();
        let results: MultiValue = entry.call(args).map_err(|e| e.to_string())?;
        let mut results: Vec<Value> = results.into_iter().take(returns).collect();
        results.resize(returns, Value::Nil);
        Ok(results)
    }

    fn table(value: &Value, what: &str) -> Result<Json, String> {
        match value {
            Value::Table(_) => encode(value),
            other => Err(format!(
                "expect the returned {what} type is table but got {}",
                other.type_name()
            )),
        }
    }

    /// `GetReplicas`: the replica count (`int32`) and the requirement (a struct, or nil).
    pub fn get_replicas(&self, object: &Json) -> Result<(i64, Json), String> {
        let results = self.run("GetReplicas", std::slice::from_ref(object), 2)?;
        let replicas = match &results[0] {
            Value::Integer(i) => *i as i32 as i64,
            Value::Number(f) => *f as i32 as i64,
            other => return Err(format!("result type {} is not number", other.type_name())),
        };
        let requires = match &results[1] {
            Value::Nil => Json::Null,
            value => convert_result(Self::table(value, "requires")?, Target::Struct, &[])?,
        };
        Ok((replicas, requires))
    }

    /// `ReviseReplica`: an object, the input object as the reference.
    pub fn revise_replica(&self, object: &Json, replicas: i64) -> Result<Json, String> {
        let results = self.run("ReviseReplica", &[object.clone(), json!(replicas)], 1)?;
        convert_result(
            Self::table(&results[0], "requires")?,
            Target::Unstructured,
            &[object],
        )
    }

    /// `ReflectStatus`: a `RawExtension`.
    pub fn reflect_status(&self, object: &Json) -> Result<Json, String> {
        let results = self.run("ReflectStatus", std::slice::from_ref(object), 1)?;
        convert_result(Self::table(&results[0], "replica")?, Target::Struct, &[])
    }

    /// `AggregateStatus`: an object, no reference. `items` is `null` when the
    /// binding has no aggregated status (a nil Go slice marshals as `null`).
    pub fn aggregate_status(&self, object: &Json, items: &Json) -> Result<Json, String> {
        let results = self.run("AggregateStatus", &[object.clone(), items.clone()], 1)?;
        convert_result(
            Self::table(&results[0], "requires")?,
            Target::Unstructured,
            &[],
        )
    }

    /// `InterpretHealth`: a boolean, nothing else.
    pub fn interpret_health(&self, object: &Json) -> Result<bool, String> {
        match self
            .run("InterpretHealth", std::slice::from_ref(object), 1)?
            .remove(0)
        {
            Value::Boolean(b) => Ok(b),
            other => Err(format!("result type {} is not bool", other.type_name())),
        }
    }

    /// `GetDependencies`: a slice of references.
    pub fn get_dependencies(&self, object: &Json) -> Result<Json, String> {
        let results = self.run("GetDependencies", std::slice::from_ref(object), 1)?;
        convert_result(Self::table(&results[0], "requires")?, Target::Slice, &[])
    }
}
