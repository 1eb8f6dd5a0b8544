//! Property tests of the TLS mode's steps: a model of several clusters'
//! operators, each planning its template on a snapshot of the reports that
//! may be stale, `spec.tls.mode` changed in any cluster at any time (a
//! control plane's propagation reaches clusters one by one), the roll
//! restarting one member at a time (the lease is released only once the
//! restarted member's report is published) and only when the restart keeps
//! every mode within one step ([`restart_keeps_modes_adjacent`]).
//!
//! Checked after every event (`modes-within-one-step`): the highest mode run
//! and the lowest are never more than one step apart, so no member refuses
//! what another dials. Checked at the end: once every cluster wants the same
//! mode and operators plan on fresh reports, every member runs it.

use proptest::prelude::*;

use super::*;

/// Members per cluster (VIP 10.0.0.<cluster + 1>).
const MEMBERS: [usize; 3] = [2, 1, 2];

#[derive(Clone, Debug)]
enum Event {
    /// Cluster `c`'s `spec.tls.mode` becomes mode `m`.
    Desired(usize, usize),
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
    desired: TlsStep,
    template: TlsStep,
    memory: Option<ModesRun>,
}

struct Member {
    address: MemberAddress,
    cluster: usize,
    running: TlsStep,
    reported: TlsStep,
}

struct Model {
    clusters: Vec<Cluster>,
    members: Vec<Member>,
}

impl Model {
    fn new(start: TlsStep) -> Model {
        let clusters = MEMBERS
            .iter()
            .map(|_| Cluster {
                desired: start,
                template: start,
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
                running: start,
                reported: start,
            })
            .collect();
        Model { clusters, members }
    }

    fn reports(&self) -> ModesRun {
        self.members
            .iter()
            .map(|m| (m.address.clone(), Some(m.reported)))
            .collect()
    }

    fn apply(&mut self, event: &Event) {
        match *event {
            Event::Desired(c, m) => self.clusters[c].desired = MODES[m],
            Event::Observe(c) => self.clusters[c].memory = Some(self.reports()),
            Event::Plan(c) => {
                let cluster = &self.clusters[c];
                let planned = plan_mode(
                    cluster.desired,
                    Some(cluster.template),
                    cluster.memory.as_ref(),
                );
                self.clusters[c].template = planned.template;
            }
            Event::Publish(m) => self.members[m].reported = self.members[m].running,
            Event::Restart(m) => {
                // The lease: the last restarted member's report is published.
                if self.members.iter().any(|m| m.reported != m.running) {
                    return;
                }
                let member = &self.members[m];
                let template = self.clusters[member.cluster].template;
                if template == member.running {
                    return;
                }
                if restart_keeps_modes_adjacent(&member.address, template, &self.reports()).is_ok()
                {
                    self.members[m].running = template;
                }
            }
        }
    }

    fn modes_within_one_step(&self) -> Result<(), String> {
        let lowest = self.members.iter().map(|m| rank(m.running)).min();
        let highest = self.members.iter().map(|m| rank(m.running)).max();
        match (lowest, highest) {
            (Some(lowest), Some(highest)) if highest - lowest > 1 => Err(self
                .members
                .iter()
                .map(|m| format!("{} runs {:?}", m.address, m.running))
                .collect::<Vec<_>>()
                .join(", ")),
            _ => Ok(()),
        }
    }
}

fn event() -> impl Strategy<Value = Event> {
    let clusters = MEMBERS.len();
    let members: usize = MEMBERS.iter().sum();
    prop_oneof![
        1 => (0..clusters, 0..MODES.len()).prop_map(|(c, m)| Event::Desired(c, m)),
        3 => (0..clusters).prop_map(Event::Observe),
        3 => (0..clusters).prop_map(Event::Plan),
        3 => (0..members).prop_map(Event::Publish),
        3 => (0..members).prop_map(Event::Restart),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn modes_stay_within_one_step_and_the_wanted_mode_is_reached(
        start in 0..MODES.len(),
        events in prop::collection::vec(event(), 0..150),
        last in 0..MODES.len(),
    ) {
        let mut model = Model::new(MODES[start]);
        for event in &events {
            model.apply(event);
            if let Err(apart) = model.modes_within_one_step() {
                return Err(TestCaseError::fail(format!("after {event:?}: {apart}")));
            }
        }
        // Every cluster wants the same mode; the operators plan on fresh reports.
        let members = model.members.len();
        for c in 0..model.clusters.len() {
            model.apply(&Event::Desired(c, last));
        }
        for _ in 0..MODES.len() + 1 {
            for c in 0..model.clusters.len() {
                model.apply(&Event::Observe(c));
                model.apply(&Event::Plan(c));
            }
            for m in 0..members {
                model.apply(&Event::Restart(m));
                model.apply(&Event::Publish(m));
                prop_assert!(model.modes_within_one_step().is_ok());
            }
        }
        for member in &model.members {
            prop_assert_eq!(member.running, MODES[last], "{} after the rounds", member.address);
        }
    }
}

/// Clusters wanting opposite directions from one mode: each plans a step its
/// own way on the same reports, and the guard lets only the first restart
/// through until the other cluster plans again.
#[test]
fn opposite_steps_planned_at_once_are_not_both_restarted_onto() {
    use Event::*;
    let mut model = Model::new(TlsStep::keyfile(TlsMode::AllowTls));
    model.apply(&Desired(0, 3));
    model.apply(&Desired(1, 0));
    for c in 0..2 {
        model.apply(&Observe(c));
        model.apply(&Plan(c));
    }
    assert_eq!(
        model.clusters[0].template,
        TlsStep::keyfile(TlsMode::PreferTls)
    );
    assert_eq!(
        model.clusters[1].template,
        TlsStep::keyfile(TlsMode::Disabled)
    );
    model.apply(&Restart(0));
    model.apply(&Publish(0));
    model.apply(&Restart(2));
    model.apply(&Publish(2));
    assert_eq!(
        model.members[0].running,
        TlsStep::keyfile(TlsMode::PreferTls)
    );
    assert_eq!(
        model.members[2].running,
        TlsStep::keyfile(TlsMode::AllowTls),
        "refused"
    );
    assert!(model.modes_within_one_step().is_ok());
}
