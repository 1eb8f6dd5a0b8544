//! What every pass shares ([`Context`]) and what one pass holds of its own
//! ([`PassContext`]): the object it is about, worked out once ([`Instance`]),
//! the [`Events`] published on that object, what the operator remembers of it
//! between passes, and MongoDB clients closed when the pass ends. What the
//! operator last wrote of each object ([`Written`]) is kept here too, for the
//! `apply` stage.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, Resource, ResourceExt};

use super::caches::Caches;
use super::events::{Events, Recorder};
use super::turns::{Turn, Turns};
use super::FIELD_MANAGER;
use crate::api::MongoDB;
use crate::hostconf::MemberAddress;
use crate::keyfile::KeysRun;
use crate::mongo::{MembersSeen, MongoGateway};
use crate::telemetry::Metrics;
use crate::tls::modes::ModesRun;

/// How long a primary this operator stepped down is remembered as handing over.
const STEP_DOWN_MEMORY: Duration = Duration::from_secs(60);

/// State of the controller, shared by every pass.
#[derive(Clone)]
pub struct Context {
    /// The client of this cluster's API server.
    pub client: Client,
    /// The watch caches the passes read.
    pub caches: Caches,
    /// The operator's metrics.
    pub metrics: Arc<Metrics>,
    written: Arc<Written>,
    recorder: Recorder,
    memory: Arc<Mutex<BTreeMap<String, InstanceMemory>>>,
    turns: Turns,
    mongodbs: Store<MongoDB>,
}

/// What the operator remembers of an instance between passes (lost on
/// restart, harmlessly).
#[derive(Default, Clone)]
pub struct InstanceMemory {
    /// The primary this operator asked to step down, and when.
    pub stepped_down: Option<(MemberAddress, Instant)>,
    /// Steps retried in a row for a passing reason (sets the next delay).
    pub retries: u32,
    /// A primary that refused to step down, how many times in a row, and
    /// until when it is not asked again. Other passes (watch events, waits)
    /// in between neither ask it nor reset the count.
    pub held_step_down: Option<HeldStepDown>,
    /// The users last ensured, as one fingerprint of their identities.
    pub users_fingerprint: Option<String>,
    /// The keys every member of the config ran, as the last roll read them:
    /// what the next pass plans the keyfile from.
    pub keys_run: Option<KeysRun>,
    /// The TLS mode every member of the config ran, as the last roll read
    /// them: what the next pass plans the mode from.
    pub modes_run: Option<ModesRun>,
    /// The digest of the certificate every local member was last seen
    /// serving: until the planned one differs, none is asked.
    pub served_certificate: Option<String>,
    /// What the passes saw of the members, each fact trusted while the
    /// member's `hello` proves it unchanged.
    pub members_seen: MembersSeen,
}

/// A primary's refusals to step down in a row.
#[derive(Clone)]
pub struct HeldStepDown {
    /// The primary that refused.
    pub primary: MemberAddress,
    /// How many times in a row.
    pub refusals: u32,
    /// When it may be asked again.
    pub not_before: Instant,
}

impl Context {
    /// The shared state of the passes over the objects of `mongodbs`: they
    /// talk to `client`, read `caches` and run in their `turns`.
    pub fn new(
        client: Client,
        caches: Caches,
        metrics: Arc<Metrics>,
        turns: Turns,
        mongodbs: Store<MongoDB>,
    ) -> Self {
        Context {
            recorder: Recorder::new(
                client.clone(),
                FIELD_MANAGER,
                std::env::var("POD_NAME").ok(),
            ),
            client,
            caches,
            written: Arc::default(),
            metrics,
            memory: Arc::default(),
            turns,
            mongodbs,
        }
    }

    /// Waits for a pass's turn, then gives the object as it is now (`None`:
    /// gone since the pass became due, or the operator is stopping).
    pub async fn take_turn(&self, due: &MongoDB) -> Option<(Turn, Arc<MongoDB>)> {
        let turn = self.turns.take().await?;
        let now = self.mongodbs.get(&ObjectRef::from_obj(due))?;
        Some((turn, now))
    }

    /// The context of one pass over `mongodb`: the shared state, the object's
    /// identity and Events, and MongoDB clients of the pass's own, closed when
    /// it ends (`MongoGateway::close`). Kept across passes, the clients (about
    /// 130 KiB each, their monitors polling) made the operator's memory grow
    /// with the number of sets — 1,000 sets took it past 480 MiB in `lab
    /// bench` — for connections that serve one pass every 30 s at rest. What
    /// the clients learnt that outlives them is kept instead
    /// ([`InstanceMemory::members_seen`]: a few hundred bytes a member).
    pub fn for_pass(&self, mongodb: &MongoDB) -> PassContext {
        let instance = Instance::of(mongodb);
        let members_seen = {
            let memory = self.memory.lock().unwrap_or_else(|p| p.into_inner());
            let entry = memory.get(&instance.key);
            entry.map(|m| m.members_seen.clone()).unwrap_or_default()
        };
        PassContext {
            client: self.client.clone(),
            caches: self.caches.clone(),
            written: self.written.of(&instance.key),
            gateway: MongoGateway::remembering(members_seen),
            metrics: self.metrics.clone(),
            instance,
            events: Events::new(self.recorder.clone(), mongodb.object_ref(&())),
            memory: self.memory.clone(),
        }
    }
}

/// What this operator last wrote of each object, by instance, then by kind,
/// namespace and name: the digest of the desired object and the write marker
/// the API server answered with. Lost on restart: everything is applied once
/// then. An instance let go is forgotten with its objects.
#[derive(Default)]
pub struct Written(Mutex<HashMap<String, HashMap<String, LastWrite>>>);

/// The last writes of one instance's objects.
pub struct InstanceWrites {
    all: Arc<Written>,
    instance: String,
}

/// One object as this operator last wrote it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LastWrite {
    /// The digest of the desired object.
    pub desired: u64,
    /// The write marker the API server answered with.
    pub marker: Option<String>,
}

impl Written {
    /// The last writes of the objects of `instance` (its key).
    pub fn of(self: &Arc<Self>, instance: &str) -> InstanceWrites {
        InstanceWrites {
            all: self.clone(),
            instance: instance.to_string(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, HashMap<String, LastWrite>>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl InstanceWrites {
    /// The last write of the object `key` names.
    pub fn get(&self, key: &str) -> Option<LastWrite> {
        self.all.lock().get(&self.instance)?.get(key).cloned()
    }

    /// Remembers the last write of the object `key` names.
    pub fn set(&self, key: String, write: LastWrite) {
        let mut written = self.all.lock();
        let writes = written.entry(self.instance.clone()).or_default();
        writes.insert(key, write);
    }

    /// Forgets every write of the instance.
    fn forget(&self) {
        self.all.lock().remove(&self.instance);
    }
}

/// The object a pass is about, as its stages name it.
#[derive(Clone, Debug)]
pub struct Instance {
    /// The object's namespace.
    pub namespace: String,
    /// The object's name: the instance name of everything built for it.
    pub name: String,
    /// `namespace/name`: the key of the controller's memory and metrics.
    pub key: String,
}

impl Instance {
    /// The instance `mongodb` is.
    pub fn of(mongodb: &MongoDB) -> Self {
        let namespace = mongodb.namespace().unwrap_or_default();
        let name = mongodb.name_any();
        Instance {
            key: format!("{namespace}/{name}"),
            namespace,
            name,
        }
    }
}

impl fmt::Display for Instance {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.key)
    }
}

/// The context of one pass over one object.
pub struct PassContext {
    /// The client of this cluster's API server.
    pub client: Client,
    /// The watch caches the pass reads.
    pub caches: Caches,
    /// What this operator last wrote of each of the instance's objects.
    pub written: InstanceWrites,
    /// The pass's own MongoDB clients.
    pub gateway: MongoGateway,
    /// The operator's metrics.
    pub metrics: Arc<Metrics>,
    /// The object the pass is about.
    pub instance: Instance,
    /// The Events published on it.
    pub events: Events,
    memory: Arc<Mutex<BTreeMap<String, InstanceMemory>>>,
}

impl PassContext {
    /// What the operator remembers of this instance.
    pub fn memory(&self) -> InstanceMemory {
        let memory = self.memory.lock().unwrap_or_else(|p| p.into_inner());
        memory.get(&self.instance.key).cloned().unwrap_or_default()
    }

    /// Changes what the operator remembers of this instance.
    pub fn remember(&self, update: impl FnOnce(&mut InstanceMemory)) {
        let mut memory = self.memory.lock().unwrap_or_else(|p| p.into_inner());
        update(memory.entry(self.instance.key.clone()).or_default());
    }

    /// Forgets the instance (it is let go): what the operator remembered of
    /// it, what it last wrote of its objects, its metrics and its Events'
    /// series.
    pub fn forget(&self) {
        let mut memory = self.memory.lock().unwrap_or_else(|p| p.into_inner());
        memory.remove(&self.instance.key);
        self.written.forget();
        self.metrics.forget(&self.instance.key);
        self.events.forget();
    }

    /// A primary that refused to step down and is not asked again yet.
    pub fn step_down_held(&self) -> Option<MemberAddress> {
        let refused = self.memory().held_step_down?;
        (Instant::now() < refused.not_before).then_some(refused.primary)
    }

    /// The primary this operator asked to step down within the last minute.
    pub fn stepped_down_recently(&self) -> Option<MemberAddress> {
        let (host, at) = self.memory().stepped_down?;
        (at.elapsed() < STEP_DOWN_MEMORY).then_some(host)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::build::fixtures;
    use crate::controller::caches::caches;

    #[tokio::test]
    async fn a_released_instance_is_forgotten_and_not_remembered_again_by_a_later_pass() {
        let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
        let client = Client::try_from(config).unwrap();
        let (caches, _writers, _synced) = caches();
        let metrics = Arc::new(Metrics::new("a"));
        let (mongodbs, _writer) = kube::runtime::reflector::store();
        let context = Context::new(client, caches, metrics, Turns::new(1), mongodbs);
        let mongodb = fixtures::mongodb();
        let pass = context.for_pass(&mongodb);
        pass.remember(|m| m.retries = 3);
        let write = LastWrite {
            desired: 1,
            marker: Some("generation 1".into()),
        };
        pass.written
            .set("StatefulSet ns/demo-mongodb-0".into(), write.clone());
        let mut another = fixtures::mongodb();
        another.metadata.name = Some("other".into());
        let other = context.for_pass(&another);
        other
            .written
            .set("StatefulSet ns/other-mongodb-0".into(), write.clone());
        assert_eq!(context.memory.lock().unwrap().len(), 1);

        pass.forget();
        assert!(context.memory.lock().unwrap().is_empty());
        assert_eq!(pass.written.get("StatefulSet ns/demo-mongodb-0"), None);
        assert_eq!(
            other.written.get("StatefulSet ns/other-mongodb-0"),
            Some(write),
            "another instance's writes are kept"
        );
        // A pass over the released object (it waits for its deletion)
        // remembers nothing by itself.
        let _released = context.for_pass(&mongodb);
        assert!(context.memory.lock().unwrap().is_empty());
        assert_eq!(pass.memory().retries, 0);
    }
}
