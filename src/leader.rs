//! Leader election on a `coordination.k8s.io/v1` Lease, as client-go's
//! `leaderelection` package does it, so that two replicas of the operator can
//! run in one cluster and only one of them acts.
//!
//! A candidate reads the Lease; it creates it when there is none, renews it
//! when it holds it, takes it over when the holder has not renewed it for the
//! lease's duration, and otherwise stands by. Expiry is judged, as in
//! client-go, by how long the candidate itself has seen the record unchanged
//! (its own clock), never by comparing the holder's `renewTime` with the local
//! clock. Every write names the resourceVersion it read, so two candidates
//! cannot both win. A leader that cannot renew within the renew deadline stops
//! (the process exits and Kubernetes restarts it as a candidate): it never acts
//! on a lease it may have lost.
//!
//! [`decide`] is the pure decision; [`LeaderElection`] does the I/O.

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::PostParams;
use kube::{Api, Client};

/// How long a lease is valid after its last renewal, as the holder writes it.
pub const LEASE_DURATION: Duration = Duration::from_secs(15);
/// How long a leader keeps trying to renew before it gives up leadership.
pub const RENEW_DEADLINE: Duration = Duration::from_secs(10);
/// How often a candidate tries to acquire, and a leader renews.
pub const RETRY_PERIOD: Duration = Duration::from_secs(2);
/// The Lease's name in the operator's namespace.
pub const LEASE_NAME: &str = "mongodb-member-operator";

/// The Lease's record as a candidate sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseRecord {
    /// `holderIdentity` (empty: released).
    pub holder: String,
    /// `leaseDurationSeconds` as its holder wrote it.
    pub duration: Duration,
}

/// What a candidate does with what it read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// No Lease: create it, holding it.
    Create,
    /// It holds the Lease: renew it.
    Renew,
    /// The holder let it expire (or released it): take it over.
    TakeOver,
    /// Somebody else holds it: stand by.
    Follow { holder: String },
}

/// The decision of candidate `me`, given the record read and how long it has
/// seen that very record (same resourceVersion) unchanged.
pub fn decide(record: Option<&LeaseRecord>, me: &str, unchanged_for: Duration) -> Decision {
    match record {
        None => Decision::Create,
        Some(record) if record.holder == me => Decision::Renew,
        Some(record) if record.holder.is_empty() || unchanged_for > record.duration => {
            Decision::TakeOver
        }
        Some(record) => Decision::Follow {
            holder: record.holder.clone(),
        },
    }
}

/// Why the leader stopped leading.
#[derive(Debug, thiserror::Error)]
pub enum LeadershipLost {
    /// Another candidate holds the Lease now.
    #[error("the Lease is held by {0} now")]
    TakenBy(String),
    /// The Lease could not be renewed within the renew deadline.
    #[error("the Lease could not be renewed within {RENEW_DEADLINE:?}: {0}")]
    NotRenewed(String),
}

/// A candidate for the Lease `LEASE_NAME` in one namespace.
pub struct LeaderElection {
    api: Api<Lease>,
    identity: String,
    /// The resourceVersion last read, and since when it is unchanged.
    seen: Option<(String, Instant)>,
}

impl LeaderElection {
    /// A candidate named `identity` (the pod's name) in `namespace`.
    pub fn new(client: Client, namespace: &str, identity: String) -> Self {
        LeaderElection {
            api: Api::namespaced(client, namespace),
            identity,
            seen: None,
        }
    }

    /// Waits until this candidate holds the Lease.
    pub async fn acquire(&mut self) {
        let mut announced = None;
        loop {
            match self.try_once().await {
                Ok(None) => {
                    tracing::info!(identity = %self.identity, lease = LEASE_NAME, "leading");
                    return;
                }
                Ok(Some(holder)) => {
                    if announced.as_ref() != Some(&holder) {
                        tracing::info!(%holder, lease = LEASE_NAME, "standing by: another replica leads");
                        announced = Some(holder);
                    }
                }
                Err(error) => tracing::warn!(%error, lease = LEASE_NAME, "leader election"),
            }
            tokio::time::sleep(RETRY_PERIOD).await;
        }
    }

    /// Renews the Lease every retry period; returns when leadership is lost.
    /// Each attempt is cut off at the renew deadline, as client-go does: an
    /// API server that never answers must not keep a leader acting after its
    /// Lease passed to another replica.
    pub async fn hold(mut self) -> LeadershipLost {
        let mut renewed = Instant::now();
        loop {
            tokio::time::sleep(RETRY_PERIOD).await;
            let left = RENEW_DEADLINE.saturating_sub(renewed.elapsed());
            let error = match tokio::time::timeout(left, self.try_once()).await {
                Ok(Ok(None)) => {
                    renewed = Instant::now();
                    continue;
                }
                Ok(Ok(Some(holder))) => return LeadershipLost::TakenBy(holder),
                Ok(Err(error)) => error.to_string(),
                Err(_) => "the API server did not answer".to_string(),
            };
            if renewed.elapsed() >= RENEW_DEADLINE {
                return LeadershipLost::NotRenewed(error);
            }
            tracing::warn!(%error, "renewing the leader Lease");
        }
    }

    /// One round: `None` when this candidate holds the Lease afterwards,
    /// else the holder.
    async fn try_once(&mut self) -> Result<Option<String>, kube::Error> {
        let current = self.api.get_opt(LEASE_NAME).await?;
        let record = current.as_ref().map(record_of);
        let version = current
            .as_ref()
            .and_then(|l| l.metadata.resource_version.clone())
            .unwrap_or_default();
        let unchanged_for = match &self.seen {
            Some((seen, since)) if *seen == version => since.elapsed(),
            _ => {
                self.seen = Some((version, Instant::now()));
                Duration::ZERO
            }
        };
        let now = MicroTime(k8s_openapi::jiff::Timestamp::now());
        let duration_secs = LEASE_DURATION.as_secs() as i32;
        match decide(record.as_ref(), &self.identity, unchanged_for) {
            Decision::Follow { holder } => Ok(Some(holder)),
            Decision::Create => {
                let lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(LEASE_NAME.to_string()),
                        ..ObjectMeta::default()
                    },
                    spec: Some(LeaseSpec {
                        holder_identity: Some(self.identity.clone()),
                        lease_duration_seconds: Some(duration_secs),
                        acquire_time: Some(now.clone()),
                        renew_time: Some(now),
                        lease_transitions: Some(0),
                        ..LeaseSpec::default()
                    }),
                };
                self.api.create(&PostParams::default(), &lease).await?;
                Ok(None)
            }
            decision @ (Decision::Renew | Decision::TakeOver) => {
                let mut lease = current.unwrap_or_default();
                let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
                if decision == Decision::TakeOver {
                    spec.holder_identity = Some(self.identity.clone());
                    spec.acquire_time = Some(now.clone());
                    spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
                }
                spec.lease_duration_seconds = Some(duration_secs);
                spec.renew_time = Some(now);
                // The write names the resourceVersion read: a concurrent
                // write wins and this one fails with 409.
                self.api
                    .replace(LEASE_NAME, &PostParams::default(), &lease)
                    .await?;
                Ok(None)
            }
        }
    }
}

fn record_of(lease: &Lease) -> LeaseRecord {
    let spec = lease.spec.clone().unwrap_or_default();
    LeaseRecord {
        holder: spec.holder_identity.unwrap_or_default(),
        duration: Duration::from_secs(
            spec.lease_duration_seconds
                .and_then(|s| u64::try_from(s).ok())
                .unwrap_or(LEASE_DURATION.as_secs()),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held_by(holder: &str) -> LeaseRecord {
        LeaseRecord {
            holder: holder.to_string(),
            duration: LEASE_DURATION,
        }
    }

    #[test]
    fn a_candidate_creates_renews_takes_over_an_expired_lease_and_otherwise_follows() {
        let fresh = Duration::from_secs(1);
        let stale = LEASE_DURATION + Duration::from_secs(1);
        assert_eq!(decide(None, "b", fresh), Decision::Create);
        assert_eq!(decide(Some(&held_by("b")), "b", stale), Decision::Renew);
        assert_eq!(
            decide(Some(&held_by("a")), "b", fresh),
            Decision::Follow {
                holder: "a".to_string()
            }
        );
        assert_eq!(decide(Some(&held_by("a")), "b", stale), Decision::TakeOver);
        assert_eq!(decide(Some(&held_by("")), "b", fresh), Decision::TakeOver);
    }

    #[test]
    fn expiry_follows_the_duration_the_holder_wrote() {
        let long = LeaseRecord {
            holder: "a".to_string(),
            duration: Duration::from_secs(60),
        };
        let after = LEASE_DURATION + Duration::from_secs(1);
        assert!(matches!(
            decide(Some(&long), "b", after),
            Decision::Follow { .. }
        ));
    }

    #[tokio::test]
    async fn a_leader_whose_api_server_stops_answering_gives_up_within_the_renew_deadline() {
        // The renewal is sent and never answered (a dropped connection, a
        // client without a read timeout): the Lease expires for the others
        // after LEASE_DURATION, so this leader must stop acting before then.
        let host = format!("127.95.{}.2", std::process::id() % 250);
        let listener = tokio::net::TcpListener::bind((host.as_str(), 0))
            .await
            .unwrap();
        let address = listener.local_addr().unwrap();
        let black_hole = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((connection, _)) = listener.accept().await {
                held.push(connection);
            }
        });
        let config = kube::Config::new(format!("http://{address}").parse().unwrap());
        let election = LeaderElection::new(Client::try_from(config).unwrap(), "ops", "me".into());
        let started = Instant::now();
        let lost = tokio::time::timeout(Duration::from_secs(60), election.hold()).await;
        assert!(
            matches!(lost, Ok(LeadershipLost::NotRenewed(_))),
            "after {:?}: {lost:?}",
            started.elapsed()
        );
        assert!(
            started.elapsed() < LEASE_DURATION,
            "gave up after {:?}, when the Lease was the others' from {LEASE_DURATION:?}",
            started.elapsed()
        );
        black_hole.abort();
    }
}
