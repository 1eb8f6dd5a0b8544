//! HTTP front end: request parsing (paths, `?&`-style query strings, Accept and
//! Content-Type negotiation), routing to discovery, OpenAPI and resource
//! handlers, and response encoding (JSON, Table, PartialObjectMetadata(List),
//! Status errors).

use std::collections::HashMap;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::Frame;
use http_body_util::{combinators::BoxBody, BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use serde_json::{json, Value};
use tokio::sync::mpsc;

use crate::auth::Authenticator;
use crate::discovery;
use crate::error::ApiError;
use crate::faults::{FaultTarget, Faults, Injection};
use crate::openapi;
use crate::patch::PatchType;
use crate::rbac::{self, Attributes, Decision};
use crate::registry::{Gvr, ResourceType};
use crate::requests::RequestCounts;
use crate::store::{DeleteOptions, Deleted, ListOptions, Propagation, Store, WriteOptions};
use crate::table::{self, IncludeObject};
use crate::watch::{self, WatchRequest};

/// Response body: a whole buffer or a stream of chunks (watches).
pub type Body = BoxBody<Bytes, Infallible>;

/// Tunables of a server.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// How often watches that allow bookmarks get one.
    pub bookmark_interval: Duration,
    /// `None` (the default): no authentication and every request allowed
    /// (`--authorization-mode=AlwaysAllow`, what tests of the API itself use).
    /// `Some`: bearer tokens authenticate (anonymous otherwise) and RBAC over
    /// the stored Roles and bindings authorizes every request
    /// (`--authorization-mode=RBAC`, `system:masters` always allowed).
    pub auth: Option<Arc<Authenticator>>,
    /// Where the server counts the requests it authorized (RBAC mode only);
    /// shared by the clones of this config, so kept across restarts.
    pub requests: Arc<RequestCounts>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            bookmark_interval: Duration::from_secs(15),
            auth: None,
            requests: Arc::default(),
        }
    }
}

impl ServerConfig {
    /// Authentication by `auth`'s tokens and RBAC authorization.
    pub fn with_rbac(auth: Arc<Authenticator>) -> Self {
        ServerConfig {
            auth: Some(auth),
            ..Default::default()
        }
    }
}

/// What request handlers share.
pub struct ServerState {
    /// The object store.
    pub store: Store,
    /// Fault switches.
    pub faults: Arc<Faults>,
    /// Tunables.
    pub config: ServerConfig,
    /// `host:port` the server listens on.
    pub address: String,
}

/// The form a response takes, from the Accept header.
#[derive(Debug, Clone)]
pub enum Output {
    /// Plain objects and lists.
    Json,
    /// `meta.k8s.io` Table.
    Table {
        /// `v1` or `v1beta1`.
        version: String,
        /// `includeObject`.
        include: IncludeObject,
    },
    /// PartialObjectMetadata / PartialObjectMetadataList.
    Metadata {
        /// `meta.k8s.io/v1` (or v1beta1).
        api_version: String,
    },
}

/// Streams chunks from a channel (watch bodies).
struct ChannelBody {
    rx: mpsc::Receiver<Bytes>,
}

impl http_body::Body for ChannelBody {
    type Data = Bytes;
    type Error = Infallible;
    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.rx.poll_recv(cx).map(|o| o.map(|b| Ok(Frame::data(b))))
    }
}

fn full(status: StatusCode, content_type: &str, body: impl Into<Bytes>) -> Response<Body> {
    let mut r = Response::new(Full::new(body.into()).boxed());
    *r.status_mut() = status;
    if let Ok(v) = content_type.parse() {
        r.headers_mut().insert(hyper::header::CONTENT_TYPE, v);
    }
    r
}

fn json_response(status: u16, v: &Value, content_type: &str) -> Response<Body> {
    full(
        StatusCode::from_u16(status).unwrap_or(StatusCode::OK),
        content_type,
        v.to_string(),
    )
}

fn error_response(e: &ApiError) -> Response<Body> {
    let mut r = json_response(e.code, &e.to_status(), "application/json");
    if e.code == 429 {
        r.headers_mut().insert(
            hyper::header::RETRY_AFTER,
            hyper::header::HeaderValue::from_static("1"),
        );
    }
    r
}

fn not_found_text() -> Response<Body> {
    full(
        StatusCode::NOT_FOUND,
        "text/plain; charset=utf-8",
        "404 page not found\n",
    )
}

/// Media types of an Accept header, each with its parameters.
fn media_types(accept: &str) -> Vec<(String, HashMap<String, String>)> {
    accept
        .split(',')
        .map(|m| {
            let mut parts = m.split(';');
            let t = parts.next().unwrap_or("").trim().to_ascii_lowercase();
            let params = parts
                .filter_map(|p| p.split_once('='))
                .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
                .collect();
            (t, params)
        })
        .filter(|(t, _)| !t.is_empty())
        .collect()
}

fn negotiate(accept: &str, params: &HashMap<String, String>) -> Result<Output, ApiError> {
    let types = media_types(accept);
    if types.is_empty() {
        return Ok(Output::Json);
    }
    for (t, p) in &types {
        if !matches!(t.as_str(), "application/json" | "*/*" | "application/*") {
            continue;
        }
        let g = p.get("g").map(String::as_str);
        let v = p.get("v").map(String::as_str).unwrap_or("v1");
        match p.get("as").map(String::as_str) {
            None => return Ok(Output::Json),
            Some("Table") if g == Some("meta.k8s.io") && (v == "v1" || v == "v1beta1") => {
                return Ok(Output::Table {
                    version: v.to_string(),
                    include: IncludeObject::parse(params.get("includeObject").map(String::as_str)),
                })
            }
            Some("PartialObjectMetadata" | "PartialObjectMetadataList")
                if g == Some("meta.k8s.io") && (v == "v1" || v == "v1beta1") =>
            {
                return Ok(Output::Metadata {
                    api_version: format!("meta.k8s.io/{v}"),
                })
            }
            _ => {}
        }
    }
    Err(ApiError::not_acceptable(format!("only the following media types are accepted: application/json, application/yaml (asked: {accept})")))
}

/// A resource request after path parsing.
struct ResourcePath {
    gvr: Gvr,
    namespace: Option<String>,
    name: Option<String>,
    subresource: Option<String>,
    watch: bool,
}

fn parse_resource_path(segs: &[&str]) -> Option<ResourcePath> {
    let (group, version, rest) = match segs {
        ["api", v, rest @ ..] => ("", *v, rest),
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        _ => return None,
    };
    let (watch, rest) = match rest {
        ["watch", rest @ ..] => (true, rest),
        _ => (false, rest),
    };
    let mk = |ns: Option<&str>, res: &str, name: Option<&str>, sub: Option<&str>| ResourcePath {
        gvr: Gvr::new(group, version, res),
        namespace: ns.map(String::from),
        name: name.map(String::from),
        subresource: sub.map(String::from),
        watch,
    };
    Some(match rest {
        ["namespaces", ns, sub @ ("status" | "finalize")] => {
            mk(None, "namespaces", Some(ns), Some(sub))
        }
        ["namespaces", ns, res] => mk(Some(ns), res, None, None),
        ["namespaces", ns, res, name] => mk(Some(ns), res, Some(name), None),
        ["namespaces", ns, res, name, sub] => mk(Some(ns), res, Some(name), Some(sub)),
        [res] => mk(None, res, None, None),
        [res, name] => mk(None, res, Some(name), None),
        [res, name, sub] => mk(None, res, Some(name), Some(sub)),
        _ => return None,
    })
}

/// Handles one request.
pub async fn handle(state: Arc<ServerState>, req: Request<Incoming>) -> Response<Body> {
    let (parts, body) = req.into_parts();
    let body = match body.collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => return error_response(&ApiError::bad_request("could not read the request body")),
    };
    let path = parts.uri.path().to_string();
    let params: HashMap<String, String> =
        form_urlencoded::parse(parts.uri.query().unwrap_or("").as_bytes())
            .into_owned()
            .collect();
    let target = fault_target(&state, &parts.method, &path, &params, &body);
    let expire_watch = match state.faults.check(&target) {
        Some(Injection::Respond(e)) => return error_response(&e),
        Some(Injection::ExpireWatch(e)) => Some(e),
        None => None,
    };
    let header = |h: hyper::header::HeaderName| {
        parts
            .headers
            .get(h)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string()
    };
    // Authentication, then authorization, before anything else is looked at
    // (kube-apiserver's filter chain: an unknown resource is a 403 first).
    let authz = match &state.config.auth {
        None => {
            // Counted without a user, as kube-apiserver's
            // `apiserver_request_total` counts every request.
            let anyone = crate::auth::UserInfo::new("", &[]);
            let mut attributes =
                rbac::request_attributes(anyone, parts.method.as_str(), &path, &params);
            attributes.user = None;
            state.config.requests.count(&attributes);
            None
        }
        Some(auth) => {
            let user = match auth.authenticate(&state.store, &header(hyper::header::AUTHORIZATION))
            {
                Ok(user) => user,
                Err(e) => return error_response(&e),
            };
            let all = |name: &str| -> Vec<String> {
                parts
                    .headers
                    .get_all(name)
                    .iter()
                    .filter_map(|v| v.to_str().ok().map(String::from))
                    .collect()
            };
            let asked = rbac::Impersonation {
                user: all("impersonate-user").into_iter().next(),
                groups: all("impersonate-group"),
                uid: all("impersonate-uid").into_iter().next(),
            };
            let user = match rbac::impersonate(&state.store, user, &asked) {
                Ok(user) => user,
                Err(e) => return error_response(&e),
            };
            let attributes = rbac::request_attributes(user, parts.method.as_str(), &path, &params);
            if let Decision::Deny(reason) = rbac::authorize(&state.store, &attributes) {
                return error_response(&rbac::forbidden(&attributes, &reason));
            }
            state.config.requests.count(&attributes);
            Some(attributes)
        }
    };
    let accept = header(hyper::header::ACCEPT);
    let content_type = header(hyper::header::CONTENT_TYPE);
    let user_agent = header(hyper::header::USER_AGENT);
    let ctx = RequestCtx {
        method: parts.method,
        params,
        accept,
        content_type,
        user_agent,
        body,
        authz,
        expire_watch,
    };
    match route(&state, &path, ctx).await {
        Ok(r) => r,
        Err(e) => error_response(&e),
    }
}

struct RequestCtx {
    method: Method,
    params: HashMap<String, String>,
    accept: String,
    content_type: String,
    user_agent: String,
    body: Bytes,
    /// The authorized request's attributes (RBAC mode only).
    authz: Option<Attributes>,
    /// An injected 410 for this watch (fault injection).
    expire_watch: Option<ApiError>,
}

/// What `method path` is to the fault injection: a watch from a
/// resourceVersion, a write to a named object (with the resourceVersion its
/// body names, if any), or anything else.
fn fault_target(
    state: &ServerState,
    method: &Method,
    path: &str,
    params: &HashMap<String, String>,
    body: &Bytes,
) -> FaultTarget {
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let Some(rp) = parse_resource_path(&segs) else {
        return FaultTarget::Other;
    };
    let param = |k: &str| params.get(k).map(String::as_str);
    let watching = rp.watch || matches!(param("watch"), Some("true" | "1"));
    if *method == Method::GET && watching {
        let from = param("resourceVersion")
            .filter(|rv| !rv.is_empty() && *rv != "0" && param("sendInitialEvents") != Some("true"))
            .and_then(|rv| rv.parse().ok());
        return FaultTarget::Watch {
            from,
            current: state.store.resource_version(),
        };
    }
    match (method, rp.name) {
        (&Method::PUT | &Method::PATCH, Some(name)) => {
            let value: Option<Value> = serde_json::from_slice(body)
                .ok()
                .or_else(|| serde_yaml::from_slice(body).ok());
            let based_on = value
                .as_ref()
                .and_then(|v| v.pointer("/metadata/resourceVersion"))
                .and_then(Value::as_str)
                .filter(|rv| !rv.is_empty())
                .map(String::from);
            FaultTarget::Write {
                group: rp.gvr.group,
                resource: rp.gvr.resource,
                name,
                based_on,
            }
        }
        _ => FaultTarget::Other,
    }
}

impl RequestCtx {
    fn param(&self, k: &str) -> Option<&str> {
        self.params.get(k).map(String::as_str)
    }

    fn body_value(&self) -> Result<Value, ApiError> {
        let ct = self
            .content_type
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        match ct.as_str() {
            "" | "application/json" | "*/*" => serde_json::from_slice(&self.body).map_err(|e| {
                ApiError::bad_request(format!("error decoding the request body as JSON: {e}"))
            }),
            "application/yaml" | "application/x-yaml" | "text/yaml" => {
                serde_yaml::from_slice(&self.body).map_err(|e| {
                    ApiError::bad_request(format!("error decoding the request body as YAML: {e}"))
                })
            }
            crate::protobuf::CONTENT_TYPE => crate::protobuf::decode(&self.body),
            other => Err(ApiError::unsupported_media_type(
                other,
                &["application/json", "application/yaml"],
            )),
        }
    }

    fn field_manager(&self) -> Option<String> {
        if let Some(m) = self.param("fieldManager").filter(|m| !m.is_empty()) {
            return Some(m.to_string());
        }
        let prefix: String = self
            .user_agent
            .split('/')
            .next()
            .unwrap_or("")
            .chars()
            .take(128)
            .collect();
        (!prefix.is_empty()).then_some(prefix)
    }

    fn dry_run(&self) -> Result<bool, ApiError> {
        match self.param("dryRun") {
            None | Some("") => Ok(false),
            Some("All") => Ok(true),
            Some(other) => Err(ApiError::bad_request(format!(
                "unsupported dryRun value: {other}, supported values: All"
            ))),
        }
    }
}

async fn route(
    state: &Arc<ServerState>,
    path: &str,
    ctx: RequestCtx,
) -> Result<Response<Body>, ApiError> {
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let registry = || state.store.registry();
    let ok = |v: Value| Ok(json_response(200, &v, "application/json"));
    let get_only = |m: &Method| {
        if *m == Method::GET || *m == Method::HEAD {
            Ok(())
        } else {
            Err(ApiError::method_not_allowed(m.as_str()))
        }
    };
    match segs.as_slice() {
        ["version"] => {
            get_only(&ctx.method)?;
            ok(discovery::version())
        }
        ["healthz" | "readyz" | "livez", ..] => {
            Ok(full(StatusCode::OK, "text/plain; charset=utf-8", "ok"))
        }
        ["api"] | ["apis"] => {
            get_only(&ctx.method)?;
            let core = segs[0] == "api";
            match aggregated_version(&ctx.accept) {
                Some(v) => Ok(json_response(
                    200,
                    &discovery::aggregated(&registry(), core, &format!("apidiscovery.k8s.io/{v}")),
                    &format!(
                        "application/json;g=apidiscovery.k8s.io;v={v};as=APIGroupDiscoveryList"
                    ),
                )),
                None if core => ok(discovery::api_versions(&state.address)),
                None => ok(discovery::api_group_list(&registry())),
            }
        }
        ["apis", group] => {
            get_only(&ctx.method)?;
            discovery::api_group_doc(&registry(), group).map_or(Ok(not_found_text()), ok)
        }
        ["api", version] => {
            get_only(&ctx.method)?;
            discovery::api_resource_list(&registry(), "", version).map_or(Ok(not_found_text()), ok)
        }
        ["apis", group, version] => {
            get_only(&ctx.method)?;
            discovery::api_resource_list(&registry(), group, version)
                .map_or(Ok(not_found_text()), ok)
        }
        ["openapi", "v3"] => ok(openapi::index(&registry())),
        ["openapi", "v3", "api", version] => {
            openapi::group_version_doc(&registry(), "", version).map_or(Ok(not_found_text()), ok)
        }
        ["openapi", "v3", "apis", group, version] => {
            openapi::group_version_doc(&registry(), group, version).map_or(Ok(not_found_text()), ok)
        }
        _ => match parse_resource_path(&segs) {
            Some(rp) => resource_request(state, rp, ctx).await,
            None => Ok(not_found_text()),
        },
    }
}

fn aggregated_version(accept: &str) -> Option<&'static str> {
    for (t, p) in media_types(accept) {
        if t != "application/json" {
            continue;
        }
        if p.get("as").map(String::as_str) == Some("APIGroupDiscoveryList")
            && p.get("g").map(String::as_str) == Some("apidiscovery.k8s.io")
        {
            match p.get("v").map(String::as_str) {
                Some("v2") => return Some("v2"),
                Some("v2beta1") => return Some("v2beta1"),
                _ => {}
            }
        } else if !p.contains_key("as") {
            return None;
        }
    }
    None
}

fn content_type_for(output: &Output, list: bool) -> String {
    match output {
        Output::Json => "application/json".into(),
        Output::Table { version, .. } => {
            format!("application/json;as=Table;v={version};g=meta.k8s.io")
        }
        Output::Metadata { api_version } => format!(
            "application/json;as=PartialObjectMetadata{};v={};g=meta.k8s.io",
            if list { "List" } else { "" },
            api_version.trim_start_matches("meta.k8s.io/")
        ),
    }
}

fn render_one(rt: &ResourceType, output: &Output, obj: &Value) -> Value {
    match output {
        Output::Json => obj.clone(),
        Output::Metadata { api_version } => table::partial_metadata(obj, api_version),
        Output::Table { version, include } => {
            let rv = obj
                .pointer("/metadata/resourceVersion")
                .cloned()
                .unwrap_or(json!(""));
            table::table(
                rt,
                std::slice::from_ref(obj),
                json!({"resourceVersion": rv}),
                version,
                *include,
            )
        }
    }
}

fn delete_options(ctx: &RequestCtx) -> Result<DeleteOptions, ApiError> {
    let body = if ctx.body.is_empty() {
        json!({})
    } else {
        ctx.body_value()?
    };
    let policy = body
        .get("propagationPolicy")
        .and_then(Value::as_str)
        .map(String::from)
        .or_else(|| ctx.param("propagationPolicy").map(String::from));
    let orphan = body.get("orphanDependents").and_then(Value::as_bool) == Some(true)
        || ctx.param("orphanDependents") == Some("true");
    let propagation = match policy.as_deref() {
        None | Some("") => {
            if orphan {
                Propagation::Orphan
            } else {
                Propagation::Background
            }
        }
        Some("Background") => Propagation::Background,
        Some("Foreground") => Propagation::Foreground,
        Some("Orphan") => Propagation::Orphan,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "invalid propagationPolicy: {other}"
            )))
        }
    };
    let dry = body
        .get("dryRun")
        .and_then(Value::as_array)
        .is_some_and(|a| a.iter().any(|v| v == "All"))
        || ctx.dry_run()?;
    Ok(DeleteOptions {
        propagation,
        grace_period_seconds: body
            .get("gracePeriodSeconds")
            .and_then(Value::as_i64)
            .or_else(|| ctx.param("gracePeriodSeconds").and_then(|g| g.parse().ok())),
        precondition_uid: body
            .pointer("/preconditions/uid")
            .and_then(Value::as_str)
            .map(String::from),
        precondition_resource_version: body
            .pointer("/preconditions/resourceVersion")
            .and_then(Value::as_str)
            .map(String::from),
        dry_run: dry,
    })
}

fn scale_request(
    state: &Arc<ServerState>,
    rp: &ResourcePath,
    ctx: &RequestCtx,
) -> Result<Response<Body>, ApiError> {
    let store = &state.store;
    let ns = rp.namespace.as_deref();
    let name = rp.name.as_deref().ok_or_else(ApiError::no_such_resource)?;
    let opts = WriteOptions {
        field_manager: ctx.field_manager(),
        dry_run: ctx.dry_run()?,
        ..Default::default()
    };
    let scale = match ctx.method {
        Method::GET => store.get_scale(&rp.gvr, ns, name)?,
        Method::PUT => {
            let body = ctx.body_value()?;
            store.update_scale(
                &rp.gvr,
                ns,
                name,
                |s| {
                    *s = body;
                    Ok(())
                },
                &opts,
            )?
        }
        Method::PATCH => {
            let kind = PatchType::from_content_type(&ctx.content_type)
                .filter(|k| *k != PatchType::Apply)
                .ok_or_else(|| {
                    ApiError::unsupported_media_type(&ctx.content_type, PatchType::CONTENT_TYPES)
                })?;
            let body: Value = serde_json::from_slice(&ctx.body)
                .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
            let rt = store.resource(&rp.gvr)?;
            store.update_scale(
                &rp.gvr,
                ns,
                name,
                |s| {
                    crate::patch::apply_patch(
                        &rt,
                        s,
                        if kind == PatchType::Strategic {
                            PatchType::Merge
                        } else {
                            kind
                        },
                        &body,
                    )
                },
                &opts,
            )?
        }
        ref m => return Err(ApiError::method_not_allowed(m.as_str())),
    };
    Ok(json_response(200, &scale, "application/json"))
}

async fn resource_request(
    state: &Arc<ServerState>,
    rp: ResourcePath,
    ctx: RequestCtx,
) -> Result<Response<Body>, ApiError> {
    let store = &state.store;
    let rt = store.resource(&rp.gvr)?;
    let status = match rp.subresource.as_deref() {
        None => false,
        Some("status") if rt.status_subresource => true,
        Some("scale") if rt.scale.is_some() => return scale_request(state, &rp, &ctx),
        Some("finalize") if rt.kind == "Namespace" && !rt.is_custom() => false,
        Some(_) => return Err(ApiError::no_such_resource()),
    };
    if rp.namespace.is_some() && !rt.namespaced {
        return Err(ApiError::no_such_resource());
    }
    let ns = rp.namespace.as_deref();
    let output = negotiate(&ctx.accept, &ctx.params)?;
    let write_opts = || -> Result<WriteOptions, ApiError> {
        Ok(WriteOptions {
            field_manager: ctx.field_manager(),
            dry_run: ctx.dry_run()?,
            status,
            force: ctx.param("force") == Some("true"),
            strict_fields: ctx.param("fieldValidation") == Some("Strict"),
        })
    };
    let respond = |code: u16, obj: Value| {
        Ok(json_response(
            code,
            &render_one(&rt, &output, &obj),
            &content_type_for(&output, false),
        ))
    };
    let watching = rp.watch || ctx.param("watch").is_some_and(|w| w == "true" || w == "1");

    match (&ctx.method, rp.name.as_deref()) {
        (&Method::GET, _) if watching => {
            if status {
                return Err(ApiError::method_not_allowed("watch"));
            }
            let rx = watch::start(
                state.clone(),
                WatchRequest {
                    rt: rt.clone(),
                    namespace: rp.namespace.clone(),
                    params: ctx.params.clone(),
                    output: output.clone(),
                    name: rp.name.clone(),
                    expired: ctx.expire_watch.clone(),
                },
            )?;
            let mut r = Response::new(ChannelBody { rx }.boxed());
            if let Ok(v) = content_type_for(&output, false).parse() {
                r.headers_mut().insert(hyper::header::CONTENT_TYPE, v);
            }
            Ok(r)
        }
        (&Method::GET, Some(name)) => respond(200, store.get(&rp.gvr, ns, name)?),
        (&Method::GET, None) => {
            let opts = ListOptions {
                label_selector: ctx.param("labelSelector").map(String::from),
                field_selector: ctx.param("fieldSelector").map(String::from),
                limit: ctx.param("limit").and_then(|l| l.parse().ok()),
                continue_token: ctx.param("continue").map(String::from),
            };
            let list = store.list(&rp.gvr, ns, &opts)?;
            let mut meta = json!({"resourceVersion": list.resource_version.to_string()});
            if let Some(c) = &list.continue_token {
                meta["continue"] = json!(c);
            }
            if let Some(n) = list.remaining_item_count {
                meta["remainingItemCount"] = json!(n);
            }
            let body = match &output {
                Output::Json => {
                    json!({"kind": format!("{}List", rt.kind), "apiVersion": rt.api_version(), "metadata": meta, "items": list.items})
                }
                Output::Metadata { api_version } => json!({
                    "kind": "PartialObjectMetadataList",
                    "apiVersion": api_version,
                    "metadata": meta,
                    "items": list.items.iter().map(|o| table::partial_metadata(o, api_version)).collect::<Vec<_>>(),
                }),
                Output::Table { version, include } => {
                    table::table(&rt, &list.items, meta, version, *include)
                }
            };
            Ok(json_response(200, &body, &content_type_for(&output, true)))
        }
        (&Method::POST, None) => {
            let obj = ctx.body_value()?;
            respond(201, store.create(&rp.gvr, ns, obj, &write_opts()?)?)
        }
        (&Method::PUT, Some(name)) => {
            let obj = ctx.body_value()?;
            respond(200, store.update(&rp.gvr, ns, name, obj, &write_opts()?)?)
        }
        (&Method::PATCH, Some(name)) => {
            let kind = PatchType::from_content_type(&ctx.content_type).ok_or_else(|| {
                ApiError::unsupported_media_type(&ctx.content_type, PatchType::CONTENT_TYPES)
            })?;
            let body: Value = if kind == PatchType::Apply {
                serde_yaml::from_slice(&ctx.body)
                    .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?
            } else {
                serde_json::from_slice(&ctx.body)
                    .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?
            };
            let opts = write_opts()?;
            if kind == PatchType::Apply {
                let existed = store.get(&rp.gvr, ns, name).is_ok();
                // A patch that creates its object is authorized as a create too
                // (the patch handler's `createValidation`).
                if let (false, Some(attributes)) = (existed, &ctx.authz) {
                    let create = Attributes {
                        verb: "create".to_string(),
                        ..attributes.clone()
                    };
                    if let Decision::Deny(reason) = rbac::authorize(store, &create) {
                        return Err(rbac::forbidden_create_on_patch(&create, &reason));
                    }
                }
                let obj = store.apply(&rp.gvr, ns, name, body, &opts)?;
                return respond(if existed { 200 } else { 201 }, obj);
            }
            respond(200, store.patch(&rp.gvr, ns, name, kind, &body, &opts)?)
        }
        (&Method::DELETE, Some(name)) if !status => {
            match store.delete(&rp.gvr, ns, name, &delete_options(&ctx)?)? {
                Deleted::Gone(v) | Deleted::Pending(v) => respond(200, v),
            }
        }
        (&Method::DELETE, None) => {
            let list = ListOptions {
                label_selector: ctx.param("labelSelector").map(String::from),
                field_selector: ctx.param("fieldSelector").map(String::from),
                ..Default::default()
            };
            let items = store.delete_collection(&rp.gvr, ns, &list, &delete_options(&ctx)?)?;
            let body = json!({"kind": format!("{}List", rt.kind), "apiVersion": rt.api_version(), "metadata": {"resourceVersion": store.resource_version().to_string()}, "items": items});
            Ok(json_response(200, &body, "application/json"))
        }
        (m, _) => Err(ApiError::method_not_allowed(m.as_str())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_negotiation_follows_kubectl_and_kube_runtime_headers() {
        let none = HashMap::new();
        let kubectl_get = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
        assert!(
            matches!(negotiate(kubectl_get, &none).unwrap(), Output::Table { ref version, .. } if version == "v1")
        );
        assert!(matches!(
            negotiate(
                "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1",
                &none
            )
            .unwrap(),
            Output::Metadata { .. }
        ));
        assert!(matches!(
            negotiate("application/json", &none).unwrap(),
            Output::Json
        ));
        assert!(matches!(negotiate("", &none).unwrap(), Output::Json));
        assert_eq!(
            negotiate("application/vnd.kubernetes.protobuf", &none)
                .unwrap_err()
                .code,
            406
        );
    }

    #[test]
    fn resource_paths() {
        let p = parse_resource_path(&[
            "apis",
            "apps",
            "v1",
            "namespaces",
            "ns",
            "statefulsets",
            "db",
            "status",
        ])
        .unwrap();
        assert_eq!(
            (
                p.gvr.resource.as_str(),
                p.namespace.as_deref(),
                p.name.as_deref(),
                p.subresource.as_deref()
            ),
            ("statefulsets", Some("ns"), Some("db"), Some("status"))
        );
        let p = parse_resource_path(&["api", "v1", "namespaces", "ns"]).unwrap();
        assert_eq!(
            (p.gvr.resource.as_str(), p.namespace, p.name.as_deref()),
            ("namespaces", None, Some("ns"))
        );
        let p = parse_resource_path(&["api", "v1", "watch", "namespaces", "ns", "pods"]).unwrap();
        assert!(p.watch);
        assert_eq!(p.namespace.as_deref(), Some("ns"));
    }
}
