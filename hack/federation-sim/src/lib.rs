//! A stand-in for the control plane the operator runs under: FedState's
//! control plane ([`fedstate`]) and Karmada ([`karmada`], running the Karmada
//! chart's own interpreter Lua, [`interpreter`]) over a set of member clusters
//! ([`control_plane`]). Each part is reproduced from the upstream source it
//! names, so that the lab meets what a real federation would do to the
//! operator's objects; README.md says what is reproduced, from which files,
//! and what differs.

pub mod control_plane;
pub mod fedstate;
pub mod interpreter;
pub mod karmada;
