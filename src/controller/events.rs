//! The Events a pass publishes on its object ([`Events`]), the controller's
//! own reasons for them ([`Notice`]), and the text of an error as an Event or
//! a log line says it ([`error_chain`]). The other reasons are the planner's
//! steps, the roll's, the recovery's and [`crate::validate::InvalidInput`]'s.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType, Recorder};

/// The longest note an Event carries; a longer message is cut there.
const NOTE_LIMIT: usize = 1000;

/// Event reasons the controller gives of its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, strum::IntoStaticStr)]
pub enum Notice {
    /// A primary could not step down: no electable secondary caught up in time.
    StepDownFailed,
    /// The operator's users are in place.
    UsersReady,
    /// A user could not be created or updated.
    UserNotReady,
    /// The credentials Secret's new root password was set on the replica set
    /// (updateUser, through the password it held).
    RootPasswordSet,
    /// The new root password could not be set on the replica set.
    RootPasswordNotSet,
    /// This cluster's members left the set; the finalizer is released.
    LeftReplicaSet,
    /// The object was deleted while its input was invalid: released without leaving.
    LeftWithoutCleanup,
    /// The API server refused a desired object; the pass went on.
    ApplyFailed,
    /// A deleted member Service was let go: its member has left the set, or
    /// the instance has gone.
    MemberServiceReleased,
    /// A deleted member Service is held: its member is still in the set.
    MemberServiceHeld,
    /// A member's data claim was asked for `spec.persistence.storage`.
    ClaimExpanded,
    /// A member's StatefulSet was deleted with its pod left running, to be
    /// applied again with a larger claim template.
    ClaimTemplateReplaced,
    /// The API server refused to expand a claim or replace a StatefulSet.
    StorageChangeRefused,
    /// A member's config entry could not be recorded on its StatefulSet; the
    /// pass went on and the next one tries again.
    RecordFailed,
    /// A member loaded its new certificate files (`rotateCertificates`) and
    /// serves the new certificate.
    CertificateRotated,
}

/// Publishes Events on the one object a pass is about.
#[derive(Clone)]
pub struct Events {
    recorder: Recorder,
    object: ObjectReference,
}

impl Events {
    /// Events on `object`, through the controller's `recorder`.
    pub fn new(recorder: Recorder, object: ObjectReference) -> Self {
        Events { recorder, object }
    }

    /// Publishes an Event; one that cannot be published is logged and the
    /// pass goes on.
    pub async fn publish(&self, type_: EventType, reason: &str, message: String) {
        let event = Event {
            type_,
            reason: reason.to_string(),
            note: Some(truncate(message, NOTE_LIMIT)),
            action: reason.to_string(),
            secondary: None,
        };
        if let Err(error) = self.recorder.publish(&event, &self.object).await {
            tracing::warn!(%error, reason, "could not publish an Event");
        }
    }
}

/// An error and its sources, joined with ": ".
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// `text` cut to at most `limit` bytes, on a character boundary.
fn truncate(mut text: String, limit: usize) -> String {
    if text.len() > limit {
        let mut cut = limit;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
    }
    text
}
