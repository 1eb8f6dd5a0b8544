//! Event recording (`events.k8s.io/v1`, through kube-runtime's recorder) in the
//! form the real components use: PascalCase reasons, their messages, and the
//! reporting component (`kubelet`, `default-scheduler`, `statefulset-controller`).
//! Recording never blocks the caller and a failure to record is only logged.
//! Messages name objects, never Secret values.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::Client;

/// Records Events on behalf of one component.
#[derive(Clone)]
pub struct EventSink {
    recorder: Recorder,
}

impl EventSink {
    /// A sink reporting as `component` (e.g. `kubelet`) from `instance` (e.g. the node name).
    pub fn new(client: Client, component: &str, instance: &str) -> Self {
        let reporter = Reporter {
            controller: component.to_string(),
            instance: Some(instance.to_string()),
        };
        EventSink {
            recorder: Recorder::new(client, reporter),
        }
    }

    /// Records a Normal event about `regarding`.
    pub fn normal(&self, regarding: ObjectReference, reason: &str, action: &str, note: String) {
        self.record(regarding, EventType::Normal, reason, action, note);
    }

    /// Records a Warning event about `regarding`.
    pub fn warning(&self, regarding: ObjectReference, reason: &str, action: &str, note: String) {
        self.record(regarding, EventType::Warning, reason, action, note);
    }

    fn record(
        &self,
        regarding: ObjectReference,
        type_: EventType,
        reason: &str,
        action: &str,
        note: String,
    ) {
        let recorder = self.recorder.clone();
        let event = Event {
            type_,
            reason: reason.to_string(),
            note: Some(note),
            action: action.to_string(),
            secondary: None,
        };
        tokio::spawn(async move {
            if let Err(error) = recorder.publish(&event, &regarding).await {
                tracing::debug!(reason = %event.reason, %error, "could not record event");
            }
        });
    }
}
