//! mongod-sim: a wire-protocol MongoDB replica-set simulator, test equipment for
//! mongodb-member-operator. Many members live in one process on a shared
//! [`Network`]; each listens on its own TCP address and speaks enough of the
//! MongoDB protocol for the Rust driver, pymongo and mongosh. See README.md.

mod commands;
pub mod config;
pub mod disk;
pub mod error;
pub mod fcv;
pub mod keyfile;
pub mod member;
pub mod network;
pub mod pki;
mod query;
mod repl_commands;
mod retryable;
mod rwc_defaults;
mod scram;
mod server;
pub mod startup_options;
pub mod state;
mod stats;
mod step_down;
pub mod tls;
mod update;
mod values;
pub mod version;
pub mod wire;
mod writes;

pub use config::{MemberConfig, ReplSetConfig, Settings};
pub use disk::Disk;
pub use fcv::{Fcv, StartupError};
pub use member::{Member, MemberSpec, MemberState, RootUser};
pub use network::{CommandKey, Network, NetworkError};
pub use state::{DurableState, OpTime, Volume};
pub use version::{Release, ServerVersion};
