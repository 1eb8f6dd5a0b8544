//! The lab: several simulated member clusters on one machine, a control-plane
//! stand-in that propagates instances to them the way FedState and Karmada do, and
//! the real operator binary running once per cluster.

pub mod bench;
pub mod controlplane;
pub mod faults;
pub mod fedstate;
pub mod interpreter;
pub mod karmada;
pub mod lab;
pub mod observe;
pub mod runtime;
pub mod scenarios;
pub mod timing;
