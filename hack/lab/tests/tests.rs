//! The lab's end-to-end scenarios, one test binary: the real operator binary
//! runs once per simulated cluster and the control-plane stand-in drives it.
//! `harness` starts a fresh lab per scenario (each on its own lab number, so
//! its own 127.n addresses: scenarios may run side by side), runs the body
//! and stops everything the lab started; the other modules are the scenarios,
//! by topic.
//!
//! `cargo test` runs the scenarios of one process one lab at a time;
//! `cargo nextest run` runs each in its own process and caps how many labs
//! run at once with the `lab-scenarios` test group (`.config/nextest.toml`).

mod harness;

mod adversarial;
mod bad_input;
mod credentials;
mod demo;
mod e2e;
mod exporter;
mod faults;
mod forget_cluster;
mod hostconf_settings;
mod lab_lifecycle;
mod member_data;
mod operations;
mod override_policy;
mod recovery;
mod roll_races;
mod roll_safety;
mod rolling;
mod scale;
mod secret_scan;
mod self_address;
mod service_hold;
mod storage_growth;
mod tls;
mod tls_rotation;
mod tls_x509;
mod versions;
mod write_concern;
