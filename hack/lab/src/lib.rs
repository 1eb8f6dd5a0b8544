//! The lab: several simulated member clusters on one machine, the control-plane
//! stand-in (`federation-sim`) that propagates instances to them the way
//! FedState and Karmada do, and the real operator binary running once per
//! cluster.

pub mod bench;
pub mod faults;
pub mod lab;
pub mod observe;
pub mod runtime;
pub mod scenarios;
pub mod timing;
pub mod unrelated;
