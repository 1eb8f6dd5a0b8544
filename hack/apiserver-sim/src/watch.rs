//! Watch over HTTP: newline-delimited JSON `{type, object}` events, streamed
//! chunked; replay from a resourceVersion out of the resource's bounded history
//! (too old: an in-stream `ERROR` event with a 410 Expired Status, then close),
//! initial ADDED events (no resourceVersion, `0`, or `sendInitialEvents=true`
//! ending with the `k8s.io/initial-events-end` bookmark), periodic BOOKMARKs,
//! label/field selectors (an object leaving the selector is sent as DELETED),
//! `timeoutSeconds`, and fault-injected drops.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use serde_json::{json, Value};
use tokio::sync::mpsc;

use crate::conversion::to_storage;
use crate::error::ApiError;
use crate::http::{Output, ServerState};
use crate::registry::{Gvr, ResourceType, View};
use crate::selectors::{FieldSelector, LabelSelector};
use crate::store::EventType;
use crate::table;

/// What a watch request asked for.
pub struct WatchRequest {
    /// The resource.
    pub rt: Arc<ResourceType>,
    /// Namespace (None: all namespaces or cluster-scoped).
    pub namespace: Option<String>,
    /// Query parameters.
    pub params: HashMap<String, String>,
    /// Response form.
    pub output: Output,
    /// `metadata.name` when the watch is for one object (legacy `/watch/…/NAME` paths).
    pub name: Option<String>,
    /// An injected 410 (fault injection): sent as the only event, as for a
    /// resourceVersion older than the resource's history.
    pub expired: Option<ApiError>,
}

struct Filter {
    labels: LabelSelector,
    fields: FieldSelector,
    name: Option<String>,
    rt: Arc<ResourceType>,
}

impl Filter {
    fn matches(&self, served: &Value) -> bool {
        let stored;
        let obj = if self.rt.view == View::Identity {
            served
        } else {
            stored = to_storage(&self.rt, served);
            &stored
        };
        self.labels.matches(obj)
            && self.fields.matches(obj)
            && self
                .name
                .as_deref()
                .is_none_or(|n| obj.pointer("/metadata/name").and_then(Value::as_str) == Some(n))
    }
}

fn encode(rt: &ResourceType, output: &Output, obj: &Value) -> Value {
    match output {
        Output::Json => obj.clone(),
        Output::Metadata { api_version, .. } => table::partial_metadata(obj, api_version),
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

fn line(kind: &str, object: Value) -> Bytes {
    let mut s = json!({"type": kind, "object": object}).to_string();
    s.push('\n');
    Bytes::from(s)
}

fn bookmark(rt: &ResourceType, output: &Output, rv: u64, initial_end: bool) -> Bytes {
    let (kind, api_version) = match output {
        Output::Metadata { api_version, .. } => {
            ("PartialObjectMetadata".to_string(), api_version.clone())
        }
        _ => (rt.kind.clone(), rt.api_version()),
    };
    let mut meta = json!({"resourceVersion": rv.to_string()});
    if initial_end {
        meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    line(
        "BOOKMARK",
        json!({"kind": kind, "apiVersion": api_version, "metadata": meta}),
    )
}

/// Validates a watch request and starts streaming it into a channel.
pub fn start(
    state: Arc<ServerState>,
    req: WatchRequest,
) -> Result<mpsc::Receiver<Bytes>, ApiError> {
    let p = |k: &str| req.params.get(k).map(String::as_str);
    let filter = Filter {
        labels: LabelSelector::parse(p("labelSelector").unwrap_or(""))?,
        fields: FieldSelector::parse(p("fieldSelector").unwrap_or(""), &req.rt.kind)?,
        name: req.name.clone(),
        rt: req.rt.clone(),
    };
    let send_initial = p("sendInitialEvents") == Some("true");
    if send_initial && p("resourceVersionMatch") != Some("NotOlderThan") {
        return Err(ApiError::invalid("meta.k8s.io", "ListOptions", "", &[(
            "sendInitialEvents".into(),
            "Forbidden: sendInitialEvents is forbidden for watch unless resourceVersionMatch is set to NotOlderThan".into(),
        )]));
    }
    let bookmarks = p("allowWatchBookmarks") == Some("true");
    let timeout = p("timeoutSeconds")
        .and_then(|t| t.parse::<u64>().ok())
        .unwrap_or(1800);
    let rv_param = p("resourceVersion").unwrap_or("");
    let gvr = Gvr::new(&req.rt.group, &req.rt.version, &req.rt.plural);
    let ns = req.namespace.as_deref();
    let store = &state.store;

    let (tx, rx) = mpsc::channel::<Bytes>(256);
    let mut initial: Vec<Bytes> = Vec::new();
    let sub = if let Some(expired) = &req.expired {
        initial.push(line("ERROR", expired.to_status()));
        None
    } else if send_initial || rv_param.is_empty() || rv_param == "0" {
        let (items, list_rv, sub) = store.list_and_subscribe(&gvr, ns)?;
        initial.extend(
            items
                .iter()
                .filter(|o| filter.matches(o))
                .map(|o| line("ADDED", encode(&req.rt, &req.output, o))),
        );
        if send_initial {
            initial.push(bookmark(&req.rt, &req.output, list_rv, true));
        }
        Some(sub)
    } else {
        let from: u64 = rv_param
            .parse()
            .map_err(|_| ApiError::bad_request(format!("invalid resource version: {rv_param}")))?;
        match store.subscribe(&gvr, ns, Some(from)) {
            Ok(s) => Some(s),
            Err(e) if e.code == 410 => {
                initial.push(line("ERROR", e.to_status()));
                None
            }
            Err(e) => return Err(e),
        }
    };
    let rt = req.rt.clone();
    let output = req.output.clone();
    let mut drops = state.faults.watch_drops();
    let bookmark_every = state.config.bookmark_interval;
    tokio::spawn(async move {
        for b in initial {
            if tx.send(b).await.is_err() {
                return;
            }
        }
        let Some(mut sub) = sub else { return };
        let deadline = tokio::time::sleep(Duration::from_secs(timeout));
        tokio::pin!(deadline);
        let mut ticker = tokio::time::interval(bookmark_every);
        ticker.tick().await;
        loop {
            tokio::select! {
                _ = &mut deadline => return,
                _ = drops.changed() => return,
                _ = tx.closed() => return,
                _ = ticker.tick(), if bookmarks => {
                    if tx.send(bookmark(&rt, &output, sub.progress_rv(), false)).await.is_err() {
                        return;
                    }
                }
                ev = sub.next() => {
                    let out = match ev {
                        Ok(Some(ev)) => event_line(&rt, &output, &filter, &ev.kind, &ev.object, ev.old.as_ref()),
                        Ok(None) => return,
                        Err(e) => {
                            let _ = tx.send(line("ERROR", e.to_status())).await;
                            return;
                        }
                    };
                    if let Some(b) = out {
                        if tx.send(b).await.is_err() {
                            return;
                        }
                    }
                }
            }
        }
    });
    Ok(rx)
}

fn event_line(
    rt: &ResourceType,
    output: &Output,
    filter: &Filter,
    kind: &EventType,
    obj: &Value,
    old: Option<&Value>,
) -> Option<Bytes> {
    let now = filter.matches(obj);
    let before = old.is_some_and(|o| filter.matches(o));
    let t = match kind {
        EventType::Added if now => "ADDED",
        EventType::Deleted if now => "DELETED",
        EventType::Modified => match (before, now) {
            (true, true) => "MODIFIED",
            (false, true) => "ADDED",
            (true, false) => "DELETED",
            (false, false) => return None,
        },
        _ => return None,
    };
    Some(line(t, encode(rt, output, obj)))
}
