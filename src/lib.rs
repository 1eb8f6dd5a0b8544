//! mongodb-member-operator: keeps one MongoDB replica set alive across the member
//! clusters of a Karmada federation. One copy runs in every member cluster and
//! manages that cluster's members only.
//!
//! Code is kept in three kinds (see ARCHITECTURE.md):
//! - pure: [`api`] types, [`hostconf`] parsing, [`validate`], the shared
//!   member vocabulary ([`member`]), the desired-object builders ([`build`]),
//!   whom stage `observe` asks and what it saw ([`observe`]), the replica-set
//!   model and planner ([`replset`], [`planner`]), the rolling restart
//!   ([`roll`]), disaster recovery ([`recovery`]), forgetting a lost cluster
//!   ([`forget`]), the member Services held while their member is in the
//!   set ([`service_hold`]) and [`status`] computation,
//!   and the `kubectl mongodb` plugin's views and decisions ([`cli`]) — no
//!   client, no async;
//! - Kubernetes I/O: the [`controller`] pipeline, over the clients of
//!   [`kube_clients`];
//! - MongoDB I/O: [`mongo`], the one narrow interface to mongod.

pub mod allocator;
pub mod api;
pub mod build;
pub mod cli;
pub mod controller;
pub mod crd;
pub mod forget;
pub mod hostconf;
pub mod keyfile;
pub mod kube_clients;
pub mod leader;
pub mod member;
pub mod mongo;
pub mod observe;
pub mod planner;
pub mod recovery;
pub mod replset;
pub mod roll;
pub mod service_hold;
pub mod status;
pub mod telemetry;
pub mod tls;
pub mod validate;
pub mod volume_growth;
