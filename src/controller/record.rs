//! Stage `record` (Kubernetes I/O): writes on a local member's StatefulSet the
//! config entry it was seen as ([`MEMBER_ENTRY_ANNOTATION`], `<_id>@<host>`),
//! when that changed. It is how the planner still recognises the member once
//! its address changes (`docs/replica-set-rules.md`, `one-entry-per-member`).
//!
//! The annotation is written by a merge patch under a field manager of its own:
//! the apply stage, which never sets it, then leaves it alone (server-side
//! apply removes only the fields its own manager stopped applying).

use k8s_openapi::api::apps::v1::StatefulSet;
use kube::api::{Patch, PatchParams};
use kube::runtime::events::EventType;
use kube::{Api, Client};

use super::context::PassContext;
use super::events::{error_chain, Notice};
use crate::build::{names, MEMBER_ENTRY_ANNOTATION};
use crate::member::{MemberSlot, RecordedEntry};
use crate::planner::{entries_to_record, PlanInput};

/// The field manager of the recorded entries.
pub const RECORD_FIELD_MANAGER: &str = "mongodb-member-operator-record";

/// Why an entry could not be recorded.
#[derive(Debug, thiserror::Error)]
#[error("recording config entry {entry} on StatefulSet {stateful_set}: {source}")]
pub struct RecordError {
    stateful_set: String,
    entry: RecordedEntry,
    #[source]
    source: kube::Error,
}

/// Records the local members' config entries that changed since `input` was
/// read; each refusal is a Warning Event and a failure in the metrics.
pub async fn record(ctx: &PassContext, input: &PlanInput) {
    let entries = entries_to_record(input);
    if entries.is_empty() {
        return;
    }
    let instance = &ctx.instance;
    for failure in write_entries(&ctx.client, &instance.namespace, &instance.name, &entries).await {
        let reason = Notice::RecordFailed.into();
        ctx.metrics.failed(reason);
        ctx.events
            .publish(EventType::Warning, reason, error_chain(&failure))
            .await;
    }
}

/// Records each entry on its member's StatefulSet; a StatefulSet that is gone
/// is skipped. Returns what the API server refused.
async fn write_entries(
    client: &Client,
    namespace: &str,
    instance: &str,
    entries: &[(MemberSlot, RecordedEntry)],
) -> Vec<RecordError> {
    let api = Api::<StatefulSet>::namespaced(client.clone(), namespace);
    let params = PatchParams {
        field_manager: Some(RECORD_FIELD_MANAGER.to_string()),
        ..PatchParams::default()
    };
    let mut failures = Vec::new();
    for (slot, entry) in entries {
        let stateful_set = names::slot(instance, *slot);
        let patch = serde_json::json!({
            "metadata": {"annotations": {MEMBER_ENTRY_ANNOTATION: entry.to_string()}}
        });
        match api
            .patch(&stateful_set, &params, &Patch::Merge(&patch))
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(source) => failures.push(RecordError {
                stateful_set,
                entry: entry.clone(),
                source,
            }),
        }
    }
    failures
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::build::{self, fixtures, BuildContext};
    use crate::controller::apply::apply;
    use crate::controller::caches::caches;
    use crate::controller::context::Written;
    use crate::controller::test_cluster;
    use crate::hostconf::MemberAddress;
    use kube::ResourceExt;
    use std::sync::Arc;

    /// Applies every desired object, as a pass with nothing written yet does.
    async fn apply_all(
        client: &Client,
        desired: &build::DesiredObjects,
    ) -> Vec<crate::controller::apply::ApplyError> {
        let (caches, _writers, _synced) = caches();
        let written = Arc::new(Written::default()).of("ns/demo");
        apply(client, &caches, &written, fixtures::NAMESPACE, desired).await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_recorded_entry_survives_the_next_apply_and_a_missing_statefulset_is_skipped() {
        let (_server, client) = test_cluster::start().await;
        let mongodb = fixtures::mongodb();
        let ctx = BuildContext::from_mongodb(&mongodb).unwrap();
        let desired =
            build::desired_objects(&ctx, fixtures::ROOT_PASSWORD, &[fixtures::member(0)]).unwrap();
        assert!(apply_all(&client, &desired).await.is_empty());
        let entry = RecordedEntry {
            id: 4,
            host: MemberAddress::parse("10.29.5.107:38018").unwrap(),
        };
        let entries = [
            (MemberSlot::Data(0), entry.clone()),
            (MemberSlot::Data(7), entry.clone()),
        ];
        let failures = write_entries(&client, fixtures::NAMESPACE, fixtures::NAME, &entries).await;
        assert!(failures.is_empty(), "{failures:?}");

        // The next pass applies the desired StatefulSet again, without the annotation.
        assert!(apply_all(&client, &desired).await.is_empty());
        let api = Api::<StatefulSet>::namespaced(client.clone(), fixtures::NAMESPACE);
        let stored = api.get("demo-mongodb-0").await.unwrap();
        let recorded = stored.annotations().get(MEMBER_ENTRY_ANNOTATION);
        assert_eq!(recorded.map(String::as_str), Some("4@10.29.5.107:38018"));
        let read_back: RecordedEntry = recorded.unwrap().parse().unwrap();
        assert_eq!(read_back, entry);
        assert!(api.get_opt("demo-mongodb-7").await.unwrap().is_none());
    }
}
