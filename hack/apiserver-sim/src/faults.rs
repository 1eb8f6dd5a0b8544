//! Fault injection for the lab: make the server answer errors (the next N
//! requests, or a share of them) and drop every open watch.
//!
//! Each error is injected only into the requests kube-apiserver can answer
//! with it: 500, 503 and 429 into any request; 409 Conflict into a write that
//! names the resourceVersion it was based on (kube-apiserver retries a write
//! without one on the current object, so it never conflicts); 410 Expired or
//! Gone into a watch from a resourceVersion (answered as kube-apiserver's watch
//! cache does: HTTP 200 and one `ERROR` event carrying the 410 Status). The
//! other requests go through untouched and are not counted.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use tokio::sync::watch;

use crate::error::ApiError;

/// An error the server can be told to answer with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InjectedError {
    /// 500 InternalError.
    Internal,
    /// 503 ServiceUnavailable.
    Unavailable,
    /// 429 TooManyRequests (with `Retry-After: 1`).
    TooManyRequests,
    /// 409 Conflict, "the object has been modified", on a write that names
    /// its resourceVersion (an update, or a patch setting
    /// `metadata.resourceVersion`): another writer came first.
    Conflict,
    /// 410 Expired on a watch from a resourceVersion, as kube-apiserver's watch
    /// cache answers one older than its history (1.19 and later): an `ERROR`
    /// event on an HTTP 200 stream, which then ends.
    Expired,
    /// 410 Gone, the same answer as [`InjectedError::Expired`] with the reason
    /// kube-apiserver's watch cache gave before 1.19.
    Gone,
}

/// What a request is, as far as the injected errors care.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FaultTarget {
    /// A watch; `from`: the resourceVersion it resumes from (not `0` or
    /// empty), with the store's current one.
    Watch {
        /// The resourceVersion asked for.
        from: Option<u64>,
        /// The store's resourceVersion now.
        current: u64,
    },
    /// A write to a named object; `based_on`: the resourceVersion the write
    /// names, if any.
    Write {
        /// API group (empty: core).
        group: String,
        /// Resource (plural).
        resource: String,
        /// Object name.
        name: String,
        /// The resourceVersion the write names.
        based_on: Option<String>,
    },
    /// Anything else (reads, creates, deletes, discovery).
    Other,
}

/// What an injected error does to the request.
#[derive(Debug, Clone, PartialEq)]
pub enum Injection {
    /// Answer the request with this Status error.
    Respond(ApiError),
    /// Start the watch, then send this Status as its only `ERROR` event and end it.
    ExpireWatch(ApiError),
}

impl InjectedError {
    /// The injection into `target`, or `None` when kube-apiserver could not
    /// answer that request with this error.
    fn inject(self, target: &FaultTarget) -> Option<Injection> {
        match self {
            InjectedError::Internal => Some(Injection::Respond(ApiError::internal(
                "injected fault: internal error",
            ))),
            InjectedError::Unavailable => Some(Injection::Respond(ApiError::unavailable(
                "injected fault: the server is currently unable to handle the request",
            ))),
            InjectedError::TooManyRequests => {
                Some(Injection::Respond(ApiError::too_many_requests()))
            }
            InjectedError::Conflict => match target {
                FaultTarget::Write {
                    group,
                    resource,
                    name,
                    based_on: Some(_),
                } => Some(Injection::Respond(ApiError::stale(group, resource, name))),
                _ => None,
            },
            InjectedError::Expired | InjectedError::Gone => match target {
                FaultTarget::Watch {
                    from: Some(from),
                    current,
                } => {
                    let message = format!("too old resource version: {from} ({current})");
                    Some(Injection::ExpireWatch(if self == InjectedError::Expired {
                        ApiError::expired(message)
                    } else {
                        ApiError::gone(message)
                    }))
                }
                _ => None,
            },
        }
    }
}

#[derive(Debug, Default)]
struct Plan {
    next: u64,
    next_error: Option<InjectedError>,
    /// Share of requests (0.0–1.0) that fail, and how.
    share: Option<(f64, InjectedError)>,
    rng: u64,
}

/// Fault switches shared by a server's request handlers.
#[derive(Debug)]
pub struct Faults {
    plan: Mutex<Plan>,
    watch_epoch: watch::Sender<u64>,
    injected: AtomicU64,
    by_kind: Mutex<BTreeMap<String, u64>>,
}

impl Default for Faults {
    fn default() -> Self {
        Faults {
            plan: Mutex::new(Plan {
                rng: 0x9E37_79B9_7F4A_7C15,
                ..Default::default()
            }),
            watch_epoch: watch::channel(0).0,
            injected: AtomicU64::new(0),
            by_kind: Mutex::new(BTreeMap::new()),
        }
    }
}

impl Faults {
    /// Fail the next `n` requests with `error`.
    pub fn fail_next(&self, n: u64, error: InjectedError) {
        let mut p = self.plan.lock().unwrap_or_else(|e| e.into_inner());
        p.next = n;
        p.next_error = Some(error);
    }

    /// Fail a share (0.0–1.0) of requests with `error` until cleared.
    pub fn fail_share(&self, share: f64, error: InjectedError) {
        self.plan.lock().unwrap_or_else(|e| e.into_inner()).share =
            Some((share.clamp(0.0, 1.0), error));
    }

    /// Stop injecting errors.
    pub fn clear(&self) {
        let mut p = self.plan.lock().unwrap_or_else(|e| e.into_inner());
        p.next = 0;
        p.share = None;
    }

    /// How many requests were answered with an injected error so far.
    pub fn injected_count(&self) -> u64 {
        self.injected.load(Ordering::Relaxed)
    }

    /// How many requests were answered with an injected `error` so far.
    pub fn injected_count_of(&self, error: InjectedError) -> u64 {
        self.by_kind
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&format!("{error:?}"))
            .copied()
            .unwrap_or(0)
    }

    /// Ends every open watch (the connection's chunked stream ends, as when an
    /// apiserver restarts).
    pub fn drop_watches(&self) {
        self.watch_epoch.send_modify(|e| *e += 1);
    }

    /// A receiver that changes when watches are dropped.
    pub fn watch_drops(&self) -> watch::Receiver<u64> {
        self.watch_epoch.subscribe()
    }

    /// The injected error for this request, if any. Only the requests the
    /// planned error can apply to count towards "the next N" or the share.
    pub fn check(&self, target: &FaultTarget) -> Option<Injection> {
        let mut p = self.plan.lock().unwrap_or_else(|e| e.into_inner());
        let (error, injection) = if p.next > 0 {
            let error = p.next_error?;
            let injection = error.inject(target)?;
            p.next -= 1;
            (error, injection)
        } else if let Some((share, error)) = p.share {
            let injection = error.inject(target)?;
            p.rng ^= p.rng << 13;
            p.rng ^= p.rng >> 7;
            p.rng ^= p.rng << 17;
            if (p.rng % 1_000_000) as f64 / 1_000_000.0 >= share {
                return None;
            }
            (error, injection)
        } else {
            return None;
        };
        drop(p);
        self.injected.fetch_add(1, Ordering::Relaxed);
        *self
            .by_kind
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(format!("{error:?}"))
            .or_default() += 1;
        Some(injection)
    }
}
