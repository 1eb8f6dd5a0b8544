//! Property tests of the roll: a model of several clusters' operators rolling
//! one replica set, each planning on a snapshot that may be stale when its step
//! is carried out, sharing nothing but the lease document.
//!
//! What the model holds as true of the real systems, and nothing more:
//! - the lease store is linearizable for w:"majority" writes: insert-if-absent,
//!   compare-and-swap on the lease's taking (member, acquiredAt) to renew it,
//!   on the whole expired lease (expiresAt too) to take it over, delete if it
//!   is the same taking;
//! - a pod is deleted with its uid as precondition;
//! - the primary's view of the members (`replSetGetStatus`) may lag the truth
//!   until a heartbeat; a member answering directly tells the truth about itself;
//! - the lease's expiry is judged on each operator's clock, skewed by less than
//!   [`MAX_SKEW_MILLIS`], and a heartbeat happens in any span of half a TTL;
//! - a primary that stepped down is not re-elected while its restart is pending
//!   (mongod's `stepDownSecs`), which the act stage also checks right before it
//!   deletes a pod.
//!
//! A step-down fails (262) when no other member is up to be elected.
//!
//! Checked after every event (`one-member-restarting-at-a-time`): at most one
//! member of the set is down for a restart; no member is restarted while it is
//! the primary; and (`roll-keeps-a-voting-majority-up`) a config of three
//! voters or more keeps a voting majority up. Checked at the end: once operators plan on fresh views, every
//! pod runs its revision and the lease is free.

use crate::api::TlsMode;
use crate::tls::modes::TlsStep;
use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;
use crate::api::ReplicaSetSettings;
use crate::observe::ObservedSet;
use crate::replset::{ConfigMember, ConfigSettings, MemberStatus, ReplicaSetConfig};

const MAX_SKEW_MILLIS: i64 = LEASE_TTL_MILLIS / 10;
const CLUSTERS: usize = 3;

/// One member: where it runs and what state its process and pod are in.
#[derive(Clone, Debug)]
struct Node {
    cluster: usize,
    address: MemberAddress,
    revision: &'static str,
    uid: u32,
    /// The pod exists (it is re-created some time after a delete).
    pod: bool,
    /// mongod answers (SECONDARY or PRIMARY).
    up: bool,
    /// Stepped down and restart pending: not electable.
    stepped_down: bool,
}

#[derive(Clone, Debug)]
struct Model {
    nodes: Vec<Node>,
    primary: Option<usize>,
    /// The primary's view of each member's health (refreshed by heartbeats).
    view: Vec<bool>,
    lease: Option<Lease>,
    reports: BTreeMap<MemberAddress, MemberReport>,
    now: i64,
    skew: [i64; CLUSTERS],
    /// Late steps: planned on an earlier snapshot, carried out later.
    late: [Option<RollStep>; CLUSTERS],
    restarts: usize,
}

/// Whether `a` and `b` are the same taking of the lease (one maybe renewed
/// since): what the store's renewals and releases compare.
fn same_taking(a: &Lease, b: &Lease) -> bool {
    a.member == b.member && a.acquired_at_millis == b.acquired_at_millis
}

#[derive(Clone, Debug)]
enum Op {
    Plan(usize),
    PlanLater(usize),
    ExecuteLate(usize),
    PodRecreated(usize),
    MongodUp(usize),
    Heartbeat,
    Elect,
    /// Half a lease TTL passes (heartbeats happen meanwhile).
    HalfTtl,
    Skew(usize, i64),
}

const NEW: &str = "new";
const OLD: &str = "old";

impl Model {
    fn new(per_cluster: &[usize]) -> Self {
        let mut nodes = Vec::new();
        for (cluster, &count) in per_cluster.iter().enumerate() {
            for i in 0..count {
                nodes.push(Node {
                    cluster,
                    address: MemberAddress {
                        host: format!("10.0.0.{}", cluster + 1),
                        port: 30000 + i as u16,
                    },
                    revision: OLD,
                    uid: 0,
                    pod: true,
                    up: true,
                    stepped_down: false,
                });
            }
        }
        let view = vec![true; nodes.len()];
        Model {
            nodes,
            primary: Some(0),
            view,
            lease: None,
            reports: BTreeMap::new(),
            now: 1_000_000,
            skew: [0; CLUSTERS],
            late: Default::default(),
            restarts: 0,
        }
    }

    fn config(&self) -> ReplicaSetConfig {
        ReplicaSetConfig {
            set_name: "rs0".into(),
            version: 1,
            term: None,
            members: self
                .nodes
                .iter()
                .enumerate()
                .map(|(i, n)| ConfigMember {
                    id: i as i64,
                    host: n.address.clone(),
                    arbiter_only: false,
                    votes: 1,
                    priority: 1.0,
                    hidden: false,
                    tags: BTreeMap::new(),
                    newly_added: false,
                })
                .collect(),
            settings: ConfigSettings::from_desired(&ReplicaSetSettings::default(), None),
        }
    }

    /// What cluster `c`'s operator sees now.
    fn snapshot(&self, c: usize) -> RollInput {
        let state = |i: usize| {
            if self.primary == Some(i) {
                MemberState::Primary
            } else {
                MemberState::Secondary
            }
        };
        let members = self
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let status = MemberStatus {
                    id: i as i64,
                    healthy: self.view[i],
                    state: if self.view[i] {
                        state(i)
                    } else {
                        MemberState::Down
                    },
                    sync_source: String::new(),
                    lag_secs: Some(0),
                    config_version: Some(1),
                    authentication_refused: false,
                };
                (n.address.clone(), status)
            })
            .collect();
        let local = self
            .nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| n.cluster == c)
            .map(|(i, n)| LocalPod {
                slot: MemberSlot::Data(n.address.port as u32 - 30000),
                address: n.address.clone(),
                desired_revision: NEW.into(),
                desired_keyfile: None,
                desired_tls_mode: TlsStep::keyfile(TlsMode::Disabled),
                membership: None,
                pod: n.pod.then(|| PodFacts {
                    uid: n.uid.to_string(),
                    revision: Some(n.revision.into()),
                    keyfile: None,
                    tls_mode: TlsStep::keyfile(TlsMode::Disabled),
                    terminating: false,
                }),
                state: n.up.then(|| state(i)),
                version: None,
            })
            .collect();
        RollInput {
            local_vip: format!("10.0.0.{}", c + 1),
            local,
            set: ObservedSet {
                config: self.config(),
                primary: self.primary.map(|p| self.nodes[p].address.clone()),
                members,
                config_committed: true,
                write_concern: Default::default(),
            },
            lease: self.lease.clone().map_or(LeaseView::Free, LeaseView::Held),
            reports: self.reports.clone(),
            now_millis: self.now + self.skew[c],
            rs_init: c == 0,
            fcv: None,
            requested_fcv: None,
            step_down_held: None,
        }
    }

    fn node(&self, address: &MemberAddress) -> Option<usize> {
        self.nodes.iter().position(|n| &n.address == address)
    }

    /// Publishes `c`'s member reports (the controller does it every pass).
    fn publish(&mut self, input: &RollInput) {
        for member in &input.local {
            let report = member.report(self.reports.get(&member.address), input.now_millis);
            self.reports.insert(member.address.clone(), report);
        }
    }

    /// Renews `lease` if it is still the stored taking.
    fn renew(&mut self, lease: &Lease, c: usize) -> bool {
        match &mut self.lease {
            Some(stored) if same_taking(stored, lease) => {
                stored.expires_at_millis = self.now + self.skew[c] + LEASE_TTL_MILLIS;
                true
            }
            _ => false,
        }
    }

    /// Carries out `step` of cluster `c` as the act stage does.
    fn execute(&mut self, c: usize, step: &RollStep) -> Result<(), String> {
        match step {
            RollStep::Acquire { lease } => {
                if self.lease.is_none() {
                    self.lease = Some(lease.clone());
                }
            }
            RollStep::TakeOver { held, lease, .. } => {
                // Only the very version seen: a renewal since wins.
                if self.lease.as_ref() == Some(held) {
                    self.lease = Some(lease.clone());
                }
            }
            RollStep::StepDown { lease, primary } => {
                if self.renew(lease, c) {
                    let node = self.node(primary);
                    // mongod fails it (262) when no other member is up to be
                    // elected: the primary stays.
                    let successor = |n: usize| {
                        self.nodes
                            .iter()
                            .enumerate()
                            .any(|(i, other)| i != n && other.up && !other.stepped_down)
                    };
                    if let Some(node) = node.filter(|n| self.primary == Some(*n) && successor(*n)) {
                        self.nodes[node].stepped_down = true;
                        self.primary = None;
                        self.elect();
                    }
                }
            }
            RollStep::Restart { lease, pod_uid, .. } => {
                if self.renew(lease, c) {
                    let node = self
                        .node(&lease.member)
                        .ok_or("restarts an unknown member")?;
                    // The act stage asks the member right before the delete.
                    if self.primary == Some(node) {
                        return Ok(());
                    }
                    let n = &mut self.nodes[node];
                    if n.pod && n.uid.to_string() == *pod_uid {
                        n.pod = false;
                        n.up = false;
                        self.restarts += 1;
                    }
                }
            }
            RollStep::Renew { lease, .. } => {
                self.renew(lease, c);
            }
            RollStep::Release { lease } | RollStep::StopOnKeyfileMismatch { lease, .. } => {
                if self.lease.as_ref().is_some_and(|l| same_taking(l, lease)) {
                    self.lease = None;
                }
            }
            RollStep::UpToDate | RollStep::Wait { .. } => {}
            RollStep::RaiseFeatureCompatibility { .. } => {
                return Err("raises the FCV though none was asked".into())
            }
        }
        Ok(())
    }

    fn elect(&mut self) {
        if self.primary.is_none() {
            self.primary = self
                .nodes
                .iter()
                .position(|n| n.up && !n.stepped_down)
                .or_else(|| self.nodes.iter().position(|n| n.up));
        }
    }

    fn apply(&mut self, op: &Op) -> Result<(), String> {
        match op {
            Op::Plan(c) => {
                let input = self.snapshot(*c);
                self.publish(&input);
                let step = plan_roll(&input);
                self.execute(*c, &step)?;
            }
            Op::PlanLater(c) => {
                let input = self.snapshot(*c);
                self.publish(&input);
                self.late[*c] = Some(plan_roll(&input));
            }
            Op::ExecuteLate(c) => {
                if let Some(step) = self.late[*c].take() {
                    self.execute(*c, &step)?;
                }
            }
            Op::PodRecreated(i) => {
                let count = self.nodes.len();
                let n = &mut self.nodes[*i % count];
                if !n.pod {
                    n.pod = true;
                    n.uid += 1;
                    n.revision = NEW;
                }
            }
            Op::MongodUp(i) => {
                let count = self.nodes.len();
                let n = &mut self.nodes[*i % count];
                if n.pod && !n.up {
                    n.up = true;
                    n.stepped_down = false;
                }
            }
            Op::Heartbeat => self.heartbeat(),
            Op::Elect => self.elect(),
            Op::HalfTtl => {
                self.now += LEASE_TTL_MILLIS / 2;
                self.heartbeat();
            }
            Op::Skew(c, skew) => self.skew[*c] = *skew,
        }
        if let Some(p) = self.primary {
            if !self.nodes[p].up {
                self.primary = None;
            }
        }
        self.check()
    }

    fn heartbeat(&mut self) {
        self.view = self.nodes.iter().map(|n| n.up).collect();
    }

    /// `one-member-restarting-at-a-time`.
    fn check(&self) -> Result<(), String> {
        let down: Vec<_> = self
            .nodes
            .iter()
            .filter(|n| !n.up)
            .map(|n| n.address.to_string())
            .collect();
        if down.len() > 1 {
            return Err(format!("{} members down at once: {down:?}", down.len()));
        }
        // `roll-keeps-a-voting-majority-up` (every member votes here).
        let voters = self.nodes.len();
        if voters >= 3 && voters - down.len() < voters / 2 + 1 {
            return Err(format!("fewer than a voting majority up: {down:?} down"));
        }
        Ok(())
    }

    fn converged(&self) -> bool {
        self.lease.is_none()
            && self
                .nodes
                .iter()
                .all(|n| n.up && n.pod && n.revision == NEW)
    }
}

fn arb_op(nodes: usize) -> impl Strategy<Value = Op> {
    let cluster = 0..CLUSTERS;
    prop_oneof![
        6 => cluster.clone().prop_map(Op::Plan),
        2 => cluster.clone().prop_map(Op::PlanLater),
        2 => cluster.clone().prop_map(Op::ExecuteLate),
        2 => (0..nodes).prop_map(Op::PodRecreated),
        2 => (0..nodes).prop_map(Op::MongodUp),
        2 => Just(Op::Heartbeat),
        1 => Just(Op::Elect),
        1 => Just(Op::HalfTtl),
        1 => (cluster, -MAX_SKEW_MILLIS..MAX_SKEW_MILLIS).prop_map(|(c, s)| Op::Skew(c, s)),
    ]
}

fn arb_layout() -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(1usize..3, CLUSTERS)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// `one-member-restarting-at-a-time`, and the roll completes once the
    /// operators plan on fresh views.
    #[test]
    fn one_member_restarting_at_a_time(
        (layout, ops) in arb_layout().prop_flat_map(|layout| {
            let nodes = layout.iter().sum::<usize>();
            (Just(layout), prop::collection::vec(arb_op(nodes), 0..120))
        })
    ) {
        let mut model = Model::new(&layout);
        for op in &ops {
            model.apply(op).map_err(|e| TestCaseError::fail(format!("{e}\nafter {op:?}")))?;
        }
        // Heal: late steps are dropped (their passes failed), clocks agree,
        // views are fresh, and every operator plans in turn.
        model.late = Default::default();
        model.skew = [0; CLUSTERS];
        for _ in 0..40 {
            if model.converged() {
                break;
            }
            let mut heal = vec![Op::Heartbeat, Op::Elect];
            heal.extend((0..model.nodes.len()).flat_map(|i| [Op::PodRecreated(i), Op::MongodUp(i)]));
            heal.push(Op::Heartbeat);
            heal.extend((0..CLUSTERS).map(Op::Plan));
            for op in &heal {
                model.apply(op).map_err(|e| TestCaseError::fail(format!("{e}\nhealing, {op:?}")))?;
            }
        }
        prop_assert!(model.converged(), "the roll did not complete: {model:#?}");
        prop_assert!(model.restarts >= model.nodes.len(), "restarts {}", model.restarts);
    }
}

/// The checker rejects two members down at once.
#[test]
fn the_checker_rejects_two_members_down() {
    let mut model = Model::new(&[2, 1, 1]);
    model.nodes[1].up = false;
    assert!(model.check().is_ok());
    model.nodes[2].up = false;
    assert!(model.check().is_err());
}

/// Were the lease overwritten instead of inserted only if absent, two
/// clusters would restart together: the model finds it.
#[test]
fn a_lease_taken_without_insert_if_absent_lets_two_clusters_restart_together() {
    let mut model = Model::new(&[1, 1, 1]);
    let first = plan_roll(&model.snapshot(1));
    let second = plan_roll(&model.snapshot(2));
    assert!(matches!(first, RollStep::Acquire { .. }));
    assert!(matches!(second, RollStep::Acquire { .. }));
    // Each believes it holds the lease it planned to take.
    for (c, step) in [(1, first), (2, second)] {
        let RollStep::Acquire { lease } = step else {
            unreachable!()
        };
        model.lease = Some(lease.clone());
        let step = plan_roll(&model.snapshot(c));
        model.execute(c, &step).unwrap();
    }
    assert!(model.check().is_err());
}

/// Cluster 2 plans to take over the lease cluster 0 holds, after it expired;
/// cluster 0 renews it and restarts its member; the late takeover must then
/// fail, the renewed lease being another version of the taking than the
/// expired one it saw.
#[test]
fn a_takeover_planned_on_an_expired_lease_fails_once_the_holder_renewed_it() {
    let mut model = Model::new(&[2, 1, 2]);
    let ops = [
        Op::Plan(0),
        Op::HalfTtl,
        Op::HalfTtl,
        Op::PlanLater(2),
        Op::Plan(0),
        Op::ExecuteLate(2),
        Op::Plan(2),
    ];
    for op in &ops {
        model
            .apply(op)
            .unwrap_or_else(|e| panic!("{e}\nafter {op:?}"));
    }
}
