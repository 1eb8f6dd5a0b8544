//! Fault injection for the lab: make the server answer errors (the next N
//! requests, or a share of them) and drop every open watch.

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
}

impl InjectedError {
    fn to_api_error(self) -> ApiError {
        match self {
            InjectedError::Internal => ApiError::internal("injected fault: internal error"),
            InjectedError::Unavailable => ApiError::unavailable(
                "injected fault: the server is currently unable to handle the request",
            ),
            InjectedError::TooManyRequests => ApiError::too_many_requests(),
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

    /// Ends every open watch (the connection's chunked stream ends, as when an
    /// apiserver restarts).
    pub fn drop_watches(&self) {
        self.watch_epoch.send_modify(|e| *e += 1);
    }

    /// A receiver that changes when watches are dropped.
    pub fn watch_drops(&self) -> watch::Receiver<u64> {
        self.watch_epoch.subscribe()
    }

    /// The injected error for this request, if any.
    pub fn check(&self) -> Option<ApiError> {
        let mut p = self.plan.lock().unwrap_or_else(|e| e.into_inner());
        let err = if p.next > 0 {
            p.next -= 1;
            p.next_error
        } else if let Some((share, e)) = p.share {
            p.rng ^= p.rng << 13;
            p.rng ^= p.rng >> 7;
            p.rng ^= p.rng << 17;
            ((p.rng % 1_000_000) as f64 / 1_000_000.0 < share).then_some(e)
        } else {
            None
        };
        drop(p);
        err.map(|e| {
            self.injected.fetch_add(1, Ordering::Relaxed);
            e.to_api_error()
        })
    }
}
