//! What can go wrong when Karmada runs a script, with Karmada's own wording
//! where Karmada reports it.

/// A script that does not load, does not run, or returns what Karmada refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The VM could not be made or could not hold a value (Lua's memory).
    #[error("Lua VM: {0}")]
    Vm(String),
    /// The script is not valid Lua, or raised an error while it loaded.
    #[error("{name} does not load: {message}")]
    Load {
        /// The script's name (its operation).
        name: String,
        /// Lua's error.
        message: String,
    },
    /// `RunScript`: the script defines no global of that name.
    #[error("not found function {0}")]
    NoFunction(String),
    /// `RunScript`: the global is not a function.
    #[error("{function} is not a function: {found}")]
    NotAFunction {
        /// The global asked for.
        function: String,
        /// The Lua type it holds.
        found: &'static str,
    },
    /// The function raised an error.
    #[error("{0}")]
    Raised(String),
    /// A result that must be a table is not (`expect the returned … type is table`).
    #[error("expect the returned {what} type is table but got {found}")]
    NotATable {
        /// What Karmada calls the result in its message.
        what: &'static str,
        /// The Lua type returned.
        found: &'static str,
    },
    /// `ConvertLuaResultToInt`: the result is not a number.
    #[error("result type {0} is not number")]
    NotANumber(&'static str),
    /// `ConvertLuaResultToBool`: the result is not a boolean.
    #[error("result type {0} is not bool")]
    NotABool(&'static str),
    /// gopher-json's `Encode` refuses the result (a function, a table reached
    /// twice, mixed keys, a sparse list, a number JSON cannot hold).
    #[error("{0}")]
    Encode(String),
    /// `json.Unmarshal` into the Go type refuses the encoded result.
    #[error("{0}")]
    Unmarshal(String),
}

impl Error {
    pub(crate) fn vm(error: mlua::Error) -> Error {
        Error::Vm(error.to_string())
    }
}
