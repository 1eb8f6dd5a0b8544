//! Karmada's Lua 5.1 VM for resource-interpreter scripts: set up with
//! Karmada's libraries and locked-out functions ([`new_vm`]), with values
//! crossing into Lua and back the way Karmada converts them ([`to_lua`],
//! [`encode`], [`convert_result`], [`integral_numbers`]), and the calls of
//! each interpreter operation ([`Interpreter`]) on the scripts of a
//! `ResourceInterpreterCustomization` ([`Customization`]).
//!
//! Everything here follows Karmada's source (`karmada-io/karmada`, read, not
//! copied), `pkg/resourceinterpreter/customized/declarative/luavm/` above all;
//! each item names the Go function it reproduces. README.md lists the files
//! and what is left out.
//!
//! The lab's control-plane stand-in runs the chart's scripts with it, and the
//! chart tests (`hack/deploy-check`) check them with it: both see what
//! Karmada would make of a script.

mod convert;
mod customization;
mod error;
mod interpreter;
mod vm;

pub use convert::{convert_result, encode, integral_numbers, to_lua, GoType};
pub use customization::{Customization, CustomizationError, Operation};
pub use error::Error;
pub use interpreter::Interpreter;
/// The Lua binding the VM is made with, for callers that look inside it.
pub use mlua;
pub use vm::{new_vm, LOCKED_OUT};
