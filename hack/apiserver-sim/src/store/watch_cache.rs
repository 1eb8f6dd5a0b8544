//! One watch cache per resource, as kube-apiserver keeps one `Cacher` (with
//! its own `watchCache` ring of events) per group/resource: a burst of one
//! resource's writes evicts only that resource's history and fills only its
//! watchers' channel, while resourceVersions stay one global counter.

use std::collections::VecDeque;
use std::sync::Arc;

use tokio::sync::broadcast;

use super::Change;
use crate::error::ApiError;

/// How many changes each resource's watch cache keeps for watch replay.
pub const HISTORY_LEN: usize = 1000;

/// How many changes of one resource a live watcher may fall behind before it
/// gets a 410 (its broadcast channel's capacity).
pub const WATCH_CHANNEL_LEN: usize = 4096;

/// One resource's event history and the channel its watchers follow.
pub(super) struct WatchCache {
    events: VecDeque<Arc<Change>>,
    capacity: usize,
    /// resourceVersion the cache started at (its initial list).
    listed_at: u64,
    /// Whether an event has been dropped from the ring since it started.
    evicted: bool,
    sender: broadcast::Sender<Arc<Change>>,
}

impl WatchCache {
    /// An empty cache holding every change after `listed_at`.
    pub(super) fn new(listed_at: u64) -> Self {
        WatchCache {
            events: VecDeque::new(),
            capacity: HISTORY_LEN,
            listed_at,
            evicted: false,
            sender: broadcast::channel(WATCH_CHANNEL_LEN).0,
        }
    }

    /// Records a change, dropping the oldest past capacity, and sends it to
    /// the live watchers (`watch_cache.go` `updateCache`, `cacher.go` `dispatchEvent`).
    pub(super) fn push(&mut self, change: Arc<Change>) {
        self.events.push_back(change.clone());
        while self.events.len() > self.capacity {
            self.events.pop_front();
            self.evicted = true;
        }
        let _ = self.sender.send(change);
    }

    /// The kept changes after `from`, or 410 Expired when `from` is older than
    /// the oldest the cache can deliver (`watch_cache.go` `getAllEventsSinceLocked`).
    pub(super) fn since(&self, from: u64) -> Result<VecDeque<Arc<Change>>, ApiError> {
        let oldest = match self.events.front() {
            Some(first) if self.evicted => first.rv,
            _ => self.listed_at + 1,
        };
        if from < oldest - 1 {
            return Err(ApiError::expired(format!(
                "too old resource version: {from} ({})",
                oldest - 1
            )));
        }
        Ok(self
            .events
            .iter()
            .filter(|c| c.rv > from)
            .cloned()
            .collect())
    }

    /// A receiver of every later change of this resource.
    pub(super) fn receiver(&self) -> broadcast::Receiver<Arc<Change>> {
        self.sender.subscribe()
    }
}
