//! apiserver-sim: a member-cluster Kubernetes API server simulator (test
//! equipment). It serves the kube-apiserver REST API over plain HTTP on
//! loopback — discovery, OpenAPI v3, CRUD, patch, server-side apply, watch,
//! Tables and metadata-only responses — faithfully enough for real kubectl and
//! kube-rs clients, with bearer-token authentication and RBAC authorization
//! when asked ([`ServerConfig::with_rbac`]). In-process controllers use the same [`Store`] the HTTP
//! handlers use. See the crate README for what differs from kube-apiserver.

// `ApiError` carries a whole Kubernetes `Status` (what the client must see); it
// travels only on a test server's request path, where its size does not matter.
#![allow(clippy::result_large_err)]

pub mod admission;
pub mod apply;
pub mod auth;
pub mod clock;
pub mod conversion;
pub mod defaults;
pub mod discovery;
pub mod error;
pub mod faults;
pub mod fieldset;
pub mod http;
pub mod kubeconfig;
pub mod openapi;
pub mod patch;
pub mod protobuf;
pub mod rbac;
pub mod registry;
pub mod requests;
pub mod scale;
pub mod selectors;
pub mod server;
pub mod services;
pub mod store;
pub mod table;
pub mod validation;
pub mod watch;

pub use auth::{Authenticator, UserInfo};
pub use error::ApiError;
pub use faults::{FaultTarget, Faults, InjectedError, Injection};
pub use http::ServerConfig;
pub use patch::PatchType;
pub use registry::Gvr;
pub use requests::{RequestCounts, RequestKey};
pub use server::{ApiServer, ApiServerHandle};
pub use store::{
    DeleteOptions, Deleted, EventType, ListOptions, ObjectList, Propagation, Store, Subscription,
    WatchEvent, WriteOptions,
};
