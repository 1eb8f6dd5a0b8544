//! The VM as Karmada's `setLib` opens it (`luavm/lua.go`).

use mlua::{Lua, LuaOptions, StdLib};

use crate::Error;

/// The functions `setLib` redefines to raise "call function X is not
/// supported in karmada customized resourceinterpreter.".
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

/// What `setLib` leaves of the libraries it opens, in PUC Lua 5.1 terms:
/// - `pkg/util/lifted/lua/oslib_safe.go`: only `os.time` and `os.date`;
/// - `loadlib_safe.go`: `preload` is the only loader, `loadlib` raises;
/// - `string_safe.go`: `string.dump` raises;
/// - gopher-lua's base and table libraries (`baselib.go`, `tablelib.go`) have
///   no `gcinfo`, no `coroutine`, no `table.foreach`/`foreachi`/`setn`.
const SAFE_LIBRARIES: &str = r#"
    os = { time = os.time, date = os.date }
    package.loaded.os = os
    package.loaders = { package.loaders[1] }
    package.loadlib = function() error("loadlib is not supported") end
    package.path = nil
    package.cpath = nil
    package.seeall = nil
    string.dump = function() error("The Lua function string.dump is not supported by Karmada. If you believe this function is essential for your use case, please submit an issue to let us know why you need it.") end
    gcinfo = nil
    coroutine = nil
    package.loaded.coroutine = nil
    table.foreach = nil
    table.foreachi = nil
    table.setn = nil
"#;

/// A fresh VM with Karmada's libraries: `setLib` opens package, base, table,
/// string, math and the safe os library, then locks out [`LOCKED_OUT`].
pub fn new_vm() -> Result<Lua, Error> {
    let lua = Lua::new_with(
        StdLib::TABLE | StdLib::STRING | StdLib::MATH | StdLib::OS | StdLib::PACKAGE,
        LuaOptions::default(),
    )
    .map_err(Error::vm)?;
    let mut setup = String::from(SAFE_LIBRARIES);
    for name in LOCKED_OUT {
        setup.push_str(&format!(
            "function {name}() error('call function {name} is not supported in karmada customized resourceinterpreter.') end\n"
        ));
    }
    lua.load(&setup)
        .set_name("karmada setLib")
        .exec()
        .map_err(Error::vm)?;
    Ok(lua)
}
