//! One operation's script in a VM, called as Karmada's `luavm.VM` calls it
//! (`luavm/lua.go`: `RunScript` and one method per operation).

use mlua::{Lua, MultiValue, Value};
use serde_json::{json, Value as Json};

use crate::convert::type_name;
use crate::{convert_result, encode, new_vm, to_lua, Error, GoType};

/// A script loaded into a fresh VM set up as Karmada's is.
pub struct Interpreter {
    lua: Lua,
}

impl Interpreter {
    /// A fresh VM ([`new_vm`]) with `script` run in it; `name` names the
    /// script in Lua's errors.
    pub fn new(script: &str, name: &str) -> Result<Interpreter, Error> {
        let lua = new_vm()?;
        lua.load(script)
            .set_name(name)
            .exec()
            .map_err(|error| Error::Load {
                name: name.to_string(),
                message: error.to_string(),
            })?;
        Ok(Interpreter { lua })
    }

    /// The VM itself.
    pub fn lua(&self) -> &Lua {
        &self.lua
    }

    /// `RunScript`: calls the global `function` with the arguments as
    /// `decodeValue` hands them over and returns exactly `returns` values
    /// (missing ones are nil).
    pub fn run(&self, function: &str, args: &[Json], returns: usize) -> Result<Vec<Value>, Error> {
        let entry = match self
            .lua
            .globals()
            .get::<Value>(function)
            .map_err(Error::vm)?
        {
            Value::Function(f) => f,
            Value::Nil => return Err(Error::NoFunction(function.to_string())),
            other => {
                return Err(Error::NotAFunction {
                    function: function.to_string(),
                    found: type_name(&other),
                })
            }
        };
        let args = args
            .iter()
            .map(|arg| to_lua(&self.lua, arg))
            .collect::<Result<MultiValue, Error>>()?;
        let results: MultiValue = entry
            .call(args)
            .map_err(|error| Error::Raised(error.to_string()))?;
        let mut results: Vec<Value> = results.into_iter().take(returns).collect();
        results.resize(returns, Value::Nil);
        Ok(results)
    }

    /// A result that must be a table, encoded by gopher-json.
    fn table(value: &Value, what: &'static str) -> Result<Json, Error> {
        match value {
            Value::Table(_) => encode(value),
            other => Err(Error::NotATable {
                what,
                found: type_name(other),
            }),
        }
    }

    /// `GetReplicas`: the replica count (`ConvertLuaResultToInt`: an `int32`,
    /// truncated) and the requirement (a struct, or `null` for nil).
    pub fn get_replicas(&self, object: &Json) -> Result<(i64, Json), Error> {
        let results = self.run("GetReplicas", std::slice::from_ref(object), 2)?;
        let replicas = match &results[0] {
            Value::Integer(i) => *i as i32,
            Value::Number(f) => *f as i32,
            other => return Err(Error::NotANumber(type_name(other))),
        };
        let requires = match &results[1] {
            Value::Nil => Json::Null,
            value => convert_result(Self::table(value, "requires")?, GoType::Struct, &[])?,
        };
        Ok((i64::from(replicas), requires))
    }

    /// `ReviseReplica`: an `Unstructured`, read against the input object.
    pub fn revise_replica(&self, object: &Json, replicas: i64) -> Result<Json, Error> {
        let results = self.run("ReviseReplica", &[object.clone(), json!(replicas)], 1)?;
        convert_result(
            Self::table(&results[0], "requires")?,
            GoType::Unstructured,
            &[object],
        )
    }

    /// `ReflectStatus`: a `RawExtension` (a struct).
    pub fn reflect_status(&self, object: &Json) -> Result<Json, Error> {
        let results = self.run("ReflectStatus", std::slice::from_ref(object), 1)?;
        convert_result(Self::table(&results[0], "replica")?, GoType::Struct, &[])
    }

    /// `AggregateStatus`: an `Unstructured`, with no reference. `items` is
    /// `null` when the binding has no aggregated status (Go marshals a nil
    /// slice as `null`).
    pub fn aggregate_status(&self, object: &Json, items: &Json) -> Result<Json, Error> {
        let results = self.run("AggregateStatus", &[object.clone(), items.clone()], 1)?;
        convert_result(
            Self::table(&results[0], "requires")?,
            GoType::Unstructured,
            &[],
        )
    }

    /// `InterpretHealth`: a boolean (`ConvertLuaResultToBool`), nothing else.
    pub fn interpret_health(&self, object: &Json) -> Result<bool, Error> {
        match self
            .run("InterpretHealth", std::slice::from_ref(object), 1)?
            .remove(0)
        {
            Value::Boolean(b) => Ok(b),
            other => Err(Error::NotABool(type_name(&other))),
        }
    }

    /// `GetDependencies`: a slice of references.
    pub fn get_dependencies(&self, object: &Json) -> Result<Json, Error> {
        let results = self.run("GetDependencies", std::slice::from_ref(object), 1)?;
        convert_result(Self::table(&results[0], "requires")?, GoType::Slice, &[])
    }
}
