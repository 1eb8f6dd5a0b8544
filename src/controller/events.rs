//! The Events a pass publishes on its object ([`Events`]) through the
//! operator's [`Recorder`], the controller's own reasons for them
//! ([`Notice`]), and the text of an error as an Event or a log line says it
//! ([`error_chain`]). The other reasons are the planner's steps, the roll's,
//! the recovery's and [`crate::validate::InvalidInput`]'s.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::{Event as K8sEvent, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;

use kube::runtime::events::EventType;

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

/// How long a repeated Event counts as a series of the first: client-go's
/// `tools/events` (`event_broadcaster.go`, `finishTime`) and kube-runtime's
/// recorder both use 6 minutes.
const SERIES_WINDOW: SignedDuration = SignedDuration::from_mins(6);

/// Publishes Events (`events.k8s.io/v1`) as client-go's `tools/events`
/// broadcaster does: an Event repeated within [`SERIES_WINDOW`] (same
/// object, type, reason and action: `event_broadcaster.go` `getKey`) is
/// counted in the first one's `series` instead of written again. Of each
/// Event it keeps only its name and count, forgotten once unrepeated for the
/// window (kube-runtime's recorder keeps every Event whole until the next
/// one is published: at rest, forever) or when its object is let go.
#[derive(Clone)]
pub struct Recorder {
    client: Client,
    controller: String,
    instance: String,
    series: Arc<Mutex<HashMap<u64, Series>>>,
}

/// What is kept of a published Event to count its repeats.
struct Series {
    /// The Event's name.
    name: String,
    /// The `regarding` object's namespace and name, to forget it with them.
    regarding: (String, String),
    count: i32,
    last: Timestamp,
}

impl Recorder {
    /// A recorder writing through `client`, as `controller` (the reporting
    /// controller) running as `instance` (the reporting instance: the pod).
    pub fn new(client: Client, controller: &str, instance: Option<String>) -> Self {
        Recorder {
            client,
            controller: controller.to_string(),
            instance: instance.unwrap_or_else(|| controller.to_string()),
            series: Arc::default(),
        }
    }

    /// Publishes `event` about `regarding`: a new Event, or one more of the
    /// series it repeats.
    async fn publish(&self, event: &Event, regarding: &ObjectReference) -> Result<(), kube::Error> {
        let now = Timestamp::now();
        let key = series_key(event, regarding);
        let namespace = regarding
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into());
        let api = Api::<K8sEvent>::namespaced(self.client.clone(), &namespace);
        let repeated = {
            let mut series = self.lock();
            series.retain(|_, s| s.last + SERIES_WINDOW > now);
            series.get(&key).map(|s| (s.name.clone(), s.count + 1))
        };
        if let Some((name, count)) = repeated {
            let patch = json!({"series": EventSeries {count, last_observed_time: MicroTime(now)}});
            let patched = api
                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await;
            match patched {
                Ok(_) => {
                    self.remember(key, name, regarding, count, now);
                    return Ok(());
                }
                // Gone (the API server's Event TTL): a new one starts.
                Err(kube::Error::Api(status)) if status.code == 404 => {}
                Err(error) => return Err(error),
            }
        }
        let name = format!(
            "{}.{:x}",
            regarding.name.as_deref().unwrap_or(&self.controller),
            now.as_nanosecond()
        );
        let created = K8sEvent {
            action: Some(event.action.clone()),
            reason: Some(event.reason.clone()),
            note: event.note.clone(),
            event_time: Some(MicroTime(now)),
            regarding: Some(regarding.clone()),
            reporting_controller: Some(self.controller.clone()),
            reporting_instance: Some(self.instance.clone()),
            type_: Some(type_name(event.type_).to_string()),
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: Some(namespace),
                ..ObjectMeta::default()
            },
            ..K8sEvent::default()
        };
        api.create(&PostParams::default(), &created).await?;
        self.remember(key, name, regarding, 1, now);
        Ok(())
    }

    /// Forgets the series of the object `name` of `namespace` (let go).
    pub fn forget(&self, namespace: &str, name: &str) {
        self.lock()
            .retain(|_, s| s.regarding.0 != namespace || s.regarding.1 != name);
    }

    fn remember(
        &self,
        key: u64,
        name: String,
        regarding: &ObjectReference,
        count: i32,
        now: Timestamp,
    ) {
        let regarding = (
            regarding.namespace.clone().unwrap_or_default(),
            regarding.name.clone().unwrap_or_default(),
        );
        let series = Series {
            name,
            regarding,
            count,
            last: now,
        };
        self.lock().insert(key, series);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Series>> {
        self.series.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// What makes two Events one series (`event_broadcaster.go` `getKey`):
/// the object, type, reason and action, not the note.
fn series_key(event: &Event, regarding: &ObjectReference) -> u64 {
    let mut hasher = DefaultHasher::new();
    type_name(event.type_).hash(&mut hasher);
    event.reason.hash(&mut hasher);
    event.action.hash(&mut hasher);
    regarding.api_version.hash(&mut hasher);
    regarding.kind.hash(&mut hasher);
    regarding.namespace.hash(&mut hasher);
    regarding.name.hash(&mut hasher);
    regarding.uid.hash(&mut hasher);
    hasher.finish()
}

fn type_name(type_: EventType) -> &'static str {
    match type_ {
        EventType::Normal => "Normal",
        EventType::Warning => "Warning",
    }
}

/// One Event to publish.
struct Event {
    type_: EventType,
    reason: String,
    action: String,
    note: Option<String>,
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

    /// Forgets the series of this object's Events (it is let go).
    pub fn forget(&self) {
        let namespace = self.object.namespace.as_deref().unwrap_or_default();
        let name = self.object.name.as_deref().unwrap_or_default();
        self.recorder.forget(namespace, name);
    }

    /// Publishes an Event; one that cannot be published is logged and the
    /// pass goes on.
    pub async fn publish(&self, type_: EventType, reason: &str, message: String) {
        let event = Event {
            type_,
            reason: reason.to_string(),
            note: Some(truncate(message, NOTE_LIMIT)),
            action: reason.to_string(),
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

#[cfg(test)]
mod tests {
    use kube::api::ListParams;

    use super::*;
    use crate::build::fixtures;
    use crate::controller::test_cluster;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_repeated_event_is_counted_in_its_series_until_its_object_is_let_go() {
        let (_server, client) = test_cluster::start().await;
        let recorder = Recorder::new(client.clone(), "mongodb-member-operator", None);
        let object = ObjectReference {
            api_version: Some("middleware.fedstate.io/v1alpha1".into()),
            kind: Some("MongoDB".into()),
            namespace: Some(fixtures::NAMESPACE.into()),
            name: Some("demo".into()),
            uid: Some("u-1".into()),
            ..ObjectReference::default()
        };
        let events = Events::new(recorder.clone(), object);
        let api = Api::<K8sEvent>::namespaced(client, fixtures::NAMESPACE);
        let listed = || async {
            let mut listed: Vec<(String, Option<i32>)> = api
                .list(&ListParams::default())
                .await
                .unwrap()
                .items
                .into_iter()
                .map(|e| (e.reason.unwrap(), e.series.map(|s| s.count)))
                .collect();
            listed.sort();
            listed
        };

        events
            .publish(EventType::Normal, "UsersReady", "first".into())
            .await;
        events
            .publish(EventType::Normal, "UsersReady", "again".into())
            .await;
        events
            .publish(EventType::Normal, "UsersReady", "and again".into())
            .await;
        events
            .publish(EventType::Warning, "ApplyFailed", "other".into())
            .await;
        assert_eq!(
            listed().await,
            [("ApplyFailed".into(), None), ("UsersReady".into(), Some(3))]
        );
        assert_eq!(recorder.lock().len(), 2, "a name and a count per series");

        // Let go: its series are forgotten, a new Event starts.
        events.forget();
        assert!(recorder.lock().is_empty());
        events
            .publish(EventType::Normal, "UsersReady", "new".into())
            .await;
        assert_eq!(listed().await.len(), 3);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn series_unrepeated_for_the_window_are_forgotten_and_a_deleted_event_starts_again() {
        let (_server, client) = test_cluster::start().await;
        let recorder = Recorder::new(client.clone(), "mongodb-member-operator", None);
        let object = ObjectReference {
            namespace: Some(fixtures::NAMESPACE.into()),
            name: Some("demo".into()),
            ..ObjectReference::default()
        };
        let events = Events::new(recorder.clone(), object);
        events
            .publish(EventType::Normal, "UsersReady", "one".into())
            .await;
        // Older than the window: dropped at the next publish.
        for series in recorder.lock().values_mut() {
            series.last -= SERIES_WINDOW;
        }
        events
            .publish(EventType::Normal, "LeftReplicaSet", "two".into())
            .await;
        assert_eq!(recorder.lock().len(), 1);

        // The API server dropped the Event (its TTL): the repeat creates one.
        let api = Api::<K8sEvent>::namespaced(client, fixtures::NAMESPACE);
        api.delete_collection(&Default::default(), &ListParams::default())
            .await
            .unwrap();
        events
            .publish(EventType::Normal, "LeftReplicaSet", "three".into())
            .await;
        let items = api.list(&ListParams::default()).await.unwrap().items;
        assert_eq!(items.len(), 1);
        assert_eq!(items[0].note.as_deref(), Some("three"));
    }
}
