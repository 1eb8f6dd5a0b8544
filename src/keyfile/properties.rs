//! Property tests of keyfile rotation: a model of several clusters' operators,
//! each planning its template on a snapshot of the reports that may be stale,
//! the Secrets changed in any cluster at any time, the roll restarting one
//! member at a time (the lease is released only once the restarted member's
//! report is published) and only onto a keyfile that shares a key with every
//! other member's ([`restart_keeps_a_shared_key`]).
//!
//! Checked after every event (`every-two-members-share-a-key`): no two running
//! members hold keyfiles without a common key, so none is cut off from its
//! peers. Checked at the end: once every cluster's Secret holds the same key
//! and operators plan on fresh reports, every member runs that key alone.

use proptest::prelude::*;

use super::*;

const KEYS: [&str; 4] = [
    "a2V5IHplcm8ga2V5IHplcm8=",
    "a2V5IG9uZSBrZXkgb25lIGtleQ==",
    "a2V5IHR3byBrZXkgdHdvIGtleQ==",
    "a2V5IHRocmVlIGtleSB0aHJlZQ==",
];
/// Members per cluster (VIP 10.0.0.<cluster + 1>).
const MEMBERS: [usize; 3] = [2, 1, 1];

#[derive(Clone, Debug)]
enum Event {
    /// Cluster `c`'s credentials Secret gets key `k`.
    Secret(usize, usize),
    /// Cluster `c`'s roll stage reads the reports.
    Observe(usize),
    /// Cluster `c` plans its template.
    Plan(usize),
    /// Member `m`'s operator publishes what it runs.
    Publish(usize),
    /// The roll restarts member `m` onto its cluster's template.
    Restart(usize),
}

struct Cluster {
    secret: usize,
    template: Keyfile,
    memory: Option<KeysRun>,
}

struct Member {
    address: MemberAddress,
    cluster: usize,
    running: Keyfile,
    reported: Vec<KeyFingerprint>,
}

struct Model {
    clusters: Vec<Cluster>,
    members: Vec<Member>,
}

impl Model {
    fn new() -> Model {
        let start = Keyfile::of_key(KEYS[0]);
        let clusters = MEMBERS
            .iter()
            .map(|_| Cluster {
                secret: 0,
                template: start.clone(),
                memory: None,
            })
            .collect();
        let members = MEMBERS
            .iter()
            .enumerate()
            .flat_map(|(cluster, count)| (0..*count).map(move |i| (cluster, i)))
            .map(|(cluster, i)| Member {
                address: MemberAddress::parse(&format!("10.0.0.{}:{}", cluster + 1, 30000 + i))
                    .unwrap(),
                cluster,
                running: start.clone(),
                reported: start.fingerprints(),
            })
            .collect();
        Model { clusters, members }
    }

    fn reports(&self) -> KeysRun {
        self.members
            .iter()
            .map(|m| (m.address.clone(), Some(m.reported.clone())))
            .collect()
    }

    fn apply(&mut self, event: &Event) {
        match *event {
            Event::Secret(c, k) => self.clusters[c].secret = k,
            Event::Observe(c) => self.clusters[c].memory = Some(self.reports()),
            Event::Plan(c) => {
                let cluster = &self.clusters[c];
                let desired = Keyfile::of_key(KEYS[cluster.secret]);
                let mut known = vec![cluster.template.clone()];
                let pods = self.members.iter().filter(|m| m.cluster == c);
                known.extend(pods.map(|m| m.running.clone()));
                let planned = plan_keyfile(&desired, &known, cluster.memory.as_ref());
                self.clusters[c].template = planned;
            }
            Event::Publish(m) => self.members[m].reported = self.members[m].running.fingerprints(),
            Event::Restart(m) => {
                // The lease: the last restarted member's report is published.
                if self
                    .members
                    .iter()
                    .any(|m| m.reported != m.running.fingerprints())
                {
                    return;
                }
                let member = &self.members[m];
                let template = self.clusters[member.cluster].template.clone();
                if template == member.running {
                    return;
                }
                let reports = self.reports();
                if restart_keeps_a_shared_key(&member.address, &template.fingerprints(), &reports)
                    .is_ok()
                {
                    self.members[m].running = template;
                }
            }
        }
    }

    fn every_two_members_share_a_key(&self) -> Result<(), String> {
        for a in &self.members {
            for b in &self.members {
                if !share_a_key(&a.running.fingerprints(), &b.running.fingerprints()) {
                    return Err(format!(
                        "{} runs {:?}, {} runs {:?}",
                        a.address, a.running, b.address, b.running
                    ));
                }
            }
        }
        Ok(())
    }
}

fn event() -> impl Strategy<Value = Event> {
    let clusters = MEMBERS.len();
    let members: usize = MEMBERS.iter().sum();
    prop_oneof![
        1 => (0..clusters, 0..KEYS.len()).prop_map(|(c, k)| Event::Secret(c, k)),
        3 => (0..clusters).prop_map(Event::Observe),
        3 => (0..clusters).prop_map(Event::Plan),
        3 => (0..members).prop_map(Event::Publish),
        3 => (0..members).prop_map(Event::Restart),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn every_two_members_share_a_key_and_the_secrets_key_is_reached(
        events in prop::collection::vec(event(), 0..120),
        last in 0..KEYS.len(),
    ) {
        let mut model = Model::new();
        for event in &events {
            model.apply(event);
            if let Err(cut_off) = model.every_two_members_share_a_key() {
                return Err(TestCaseError::fail(format!("after {event:?}: {cut_off}")));
            }
        }
        // Every Secret holds the same key; the operators plan on fresh reports.
        let members = model.members.len();
        for c in 0..model.clusters.len() {
            model.apply(&Event::Secret(c, last));
        }
        for _ in 0..4 {
            for m in 0..members {
                for c in 0..model.clusters.len() {
                    model.apply(&Event::Observe(c));
                    model.apply(&Event::Plan(c));
                }
                model.apply(&Event::Restart(m));
                model.apply(&Event::Publish(m));
                prop_assert!(model.every_two_members_share_a_key().is_ok());
            }
        }
        let wanted = Keyfile::of_key(KEYS[last]);
        for member in &model.members {
            prop_assert_eq!(&member.running, &wanted, "{} after the rounds", member.address);
        }
    }
}

/// A plan on stale reports is caught by the guard: cluster a planned the new
/// key alone when everyone held it, then cluster b, given a third key, moved
/// its member onto `[K0, K2]`; restarting a's member onto `[K1]` would cut it
/// off, and the roll refuses it until a plans again on fresh reports.
#[test]
fn a_template_planned_on_stale_reports_is_not_restarted_onto() {
    use Event::*;
    let mut model = Model::new();
    for c in 0..3 {
        model.apply(&Secret(c, 1));
    }
    for c in 0..3 {
        model.apply(&Observe(c));
        model.apply(&Plan(c));
    }
    for m in 0..4 {
        model.apply(&Restart(m));
        model.apply(&Publish(m));
    }
    let both = Keyfile::parse(&format!("- {}\n- {}\n", KEYS[0], KEYS[1])).unwrap();
    assert!(model.members.iter().all(|m| m.running == both));
    model.apply(&Observe(0));
    model.apply(&Secret(1, 2));
    model.apply(&Observe(1));
    model.apply(&Plan(1));
    model.apply(&Restart(2));
    model.apply(&Publish(2));
    model.apply(&Plan(0));
    assert_eq!(
        model.clusters[0].template,
        Keyfile::of_key(KEYS[1]),
        "planned on stale reports"
    );
    model.apply(&Restart(0));
    assert_eq!(
        model.members[0].running, both,
        "the roll refuses the restart"
    );
    model.every_two_members_share_a_key().unwrap();
    model.apply(&Observe(0));
    model.apply(&Plan(0));
    assert_eq!(
        model.clusters[0].template, both,
        "planned again on fresh reports"
    );
}
