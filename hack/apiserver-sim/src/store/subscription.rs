//! Watch subscriptions: a resource's changes after a resourceVersion, replayed
//! from that resource's bounded history and then followed live on its own
//! channel, in served form.

use std::collections::VecDeque;
use std::sync::Arc;

use serde_json::Value;
use tokio::sync::broadcast;

use super::{Change, EventType, Store};
use crate::conversion::to_view;
use crate::error::ApiError;
use crate::registry::{Gvr, ResourceType};

impl Store {
    /// Subscribes to changes of a resource (optionally one namespace) after
    /// resourceVersion `from` (`None`: from now on). 410 Expired if `from` is
    /// older than that resource's history.
    pub fn subscribe(
        &self,
        gvr: &Gvr,
        namespace: Option<&str>,
        from: Option<u64>,
    ) -> Result<Subscription, ApiError> {
        let mut inner = self.lock();
        let rt = inner.resource(gvr)?;
        let from = from.unwrap_or(inner.rv);
        let cache = inner.watch_cache(&rt.storage);
        let pending = cache.since(from)?;
        Ok(Subscription {
            rt,
            namespace: namespace.map(String::from),
            pending,
            receiver: cache.receiver(),
            last_rv: from,
            seen_rv: from,
        })
    }

    /// Lists and subscribes atomically: the current objects (served form) and a
    /// subscription to every later change.
    pub fn list_and_subscribe(
        &self,
        gvr: &Gvr,
        namespace: Option<&str>,
    ) -> Result<(Vec<Value>, u64, Subscription), ApiError> {
        let mut inner = self.lock();
        let rt = inner.resource(gvr)?;
        let ns_filter = if rt.namespaced { namespace } else { None };
        let items = inner
            .objects
            .iter()
            .filter(|((s, ns, _), _)| *s == rt.storage && ns_filter.is_none_or(|n| n == ns))
            .map(|(_, o)| to_view(&rt, o))
            .collect();
        let receiver = inner.watch_cache(&rt.storage).receiver();
        let sub = Subscription {
            rt,
            namespace: ns_filter.map(String::from),
            pending: VecDeque::new(),
            receiver,
            last_rv: inner.rv,
            seen_rv: inner.rv,
        };
        Ok((items, inner.rv, sub))
    }
}

impl Change {
    fn namespace(&self) -> &str {
        self.object
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or_default()
    }
}

/// A stream of changes to one resource, in served form.
pub struct Subscription {
    rt: Arc<ResourceType>,
    namespace: Option<String>,
    pending: VecDeque<Arc<Change>>,
    receiver: broadcast::Receiver<Arc<Change>>,
    last_rv: u64,
    seen_rv: u64,
}

/// A change as a watcher sees it.
#[derive(Debug, Clone)]
pub struct WatchEvent {
    /// ADDED / MODIFIED / DELETED.
    pub kind: EventType,
    /// The object (served form).
    pub object: Value,
    /// The object before the change (served form), if any.
    pub old: Option<Value>,
    /// resourceVersion of the change.
    pub rv: u64,
}

impl Subscription {
    /// The resource this subscription follows.
    pub fn resource(&self) -> &Arc<ResourceType> {
        &self.rt
    }

    /// The resourceVersion of the last event delivered (or the start point).
    pub fn last_resource_version(&self) -> u64 {
        self.last_rv
    }

    /// The resourceVersion up to which every change of this resource has been
    /// seen (for bookmarks).
    pub fn progress_rv(&self) -> u64 {
        self.seen_rv.max(self.last_rv)
    }

    fn accept(&mut self, c: &Arc<Change>) -> Option<WatchEvent> {
        self.seen_rv = self.seen_rv.max(c.rv);
        if c.rv <= self.last_rv || c.storage != self.rt.storage {
            return None;
        }
        if self.rt.namespaced
            && self
                .namespace
                .as_deref()
                .is_some_and(|n| n != c.namespace())
        {
            return None;
        }
        self.last_rv = c.rv;
        Some(WatchEvent {
            kind: c.kind,
            object: to_view(&self.rt, &c.object),
            old: c.old.as_ref().map(|o| to_view(&self.rt, o)),
            rv: c.rv,
        })
    }

    /// The next change. `Err(410 Expired)` if this subscriber fell too far
    /// behind its resource's changes; `Ok(None)` when the store is gone or the
    /// resource's watch cache stopped (its CRD was deleted).
    pub async fn next(&mut self) -> Result<Option<WatchEvent>, ApiError> {
        while let Some(c) = self.pending.pop_front() {
            if let Some(e) = self.accept(&c) {
                return Ok(Some(e));
            }
        }
        loop {
            match self.receiver.recv().await {
                Ok(c) => {
                    if let Some(e) = self.accept(&c) {
                        return Ok(Some(e));
                    }
                }
                Err(broadcast::error::RecvError::Lagged(_)) => {
                    return Err(ApiError::expired("the watch fell behind the event history"));
                }
                Err(broadcast::error::RecvError::Closed) => return Ok(None),
            }
        }
    }
}
