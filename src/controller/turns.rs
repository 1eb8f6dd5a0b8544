//! Whose turn it is to run a pass: at most `--concurrency` passes run at
//! once, and the others wait in the order they became due.
//!
//! kube-runtime bounds concurrency itself, but keeps the due passes it has
//! no worker for in a `HashSet` and takes them in that set's iteration
//! order (`kube-runtime-5.0.0/src/scheduler.rs`,
//! `Scheduler::poll_pop_queue_message`). While more passes are due than the
//! workers run — 1,000 instances each passed every 30 s at rest on a slow
//! node — the same instances are taken every time and the others never: no
//! status, no reaction to a change of their spec (a change of a pending
//! object cannot even bring it forward). So the controller hands every due
//! pass over at once ([`controller_config`]) and each waits here for a turn,
//! on a semaphore whose waiters are served first come, first served.

use std::sync::Arc;

use kube::runtime::controller::Config;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The turns of the passes: as many at once as the workers allowed.
#[derive(Clone)]
pub struct Turns(Arc<Semaphore>);

/// A pass's turn, given back when dropped.
pub struct Turn {
    _permit: OwnedSemaphorePermit,
}

impl Turns {
    /// `workers` passes at once (0: as many as are due).
    pub fn new(workers: u16) -> Self {
        let permits = match workers {
            0 => Semaphore::MAX_PERMITS,
            n => usize::from(n),
        };
        Turns(Arc::new(Semaphore::new(permits)))
    }

    /// Waits until it is this pass's turn: after every pass that asked
    /// before it. `None` once the operator is shutting down.
    pub async fn take(&self) -> Option<Turn> {
        let permit = self.0.clone().acquire_owned().await.ok()?;
        Some(Turn { _permit: permit })
    }

    /// Ends every wait for a turn, those under way and those to come, when
    /// the operator is asked to stop (SIGTERM, or Ctrl+C): kube-runtime's
    /// graceful shutdown waits for every pass it has started, and the passes
    /// still waiting for a turn have done nothing yet. Passes that run end
    /// as usual.
    pub async fn close_on_signal(self) {
        let terminate = async {
            #[cfg(unix)]
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(mut terminate) => {
                    terminate.recv().await;
                }
                Err(_) => std::future::pending::<()>().await,
            }
            #[cfg(not(unix))]
            std::future::pending::<()>().await
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = terminate => {}
        }
        self.close();
    }

    /// Ends every wait for a turn.
    fn close(&self) {
        self.0.close();
    }
}

/// The controller's config: every due pass is started, and waits for its
/// turn ([`Turns::take`]) before it does anything.
pub fn controller_config() -> Config {
    Config::default().concurrency(0)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Mutex;
    use std::time::Duration;

    use futures::StreamExt;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::runtime::controller::Action;
    use kube::runtime::reflector::{self, ObjectRef};
    use kube::runtime::watcher::Event;
    use kube::runtime::Controller;

    use super::*;

    /// Passes per object's name.
    type Passes = Arc<Mutex<BTreeMap<String, u32>>>;

    /// More passes due than workers run: 40 objects, each passed again 50 ms
    /// after its pass ends, a pass taking 20 ms, 2 workers (100 passes a
    /// second). In turn, each object gets about 7 passes in 3 s.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn when_more_passes_are_due_than_workers_run_each_object_gets_its_turn() {
        let objects: Vec<Arc<ConfigMap>> = (0..40)
            .map(|i| {
                let mut object = ConfigMap::default();
                object.metadata.name = Some(format!("object-{i}"));
                object.metadata.namespace = Some("default".into());
                Arc::new(object)
            })
            .collect();
        let (store, mut writer) = reflector::store::<ConfigMap>();
        writer.apply_watcher_event(&Event::Init);
        for object in &objects {
            writer.apply_watcher_event(&Event::InitApply((**object).clone()));
        }
        writer.apply_watcher_event(&Event::InitDone);
        let triggers = futures::stream::iter(objects.clone().into_iter().map(|o| Ok((*o).clone())))
            .chain(futures::stream::pending());
        let passes: Passes = Arc::default();
        let turns = Turns::new(2);
        let context = Arc::new((turns, passes.clone()));
        let reconcile = |object: Arc<ConfigMap>, context: Arc<(Turns, Passes)>| async move {
            let _turn = context.0.take().await.unwrap();
            tokio::time::sleep(Duration::from_millis(20)).await;
            let name = object.metadata.name.clone().unwrap_or_default();
            *context.1.lock().unwrap().entry(name).or_default() += 1;
            Ok::<_, std::convert::Infallible>(Action::requeue(Duration::from_millis(50)))
        };
        let error_policy =
            |_: Arc<ConfigMap>, _: &std::convert::Infallible, _| Action::await_change();
        let controller = Controller::for_stream(triggers, store)
            .with_config(controller_config())
            .run(reconcile, error_policy, context)
            .for_each(|_: Result<(ObjectRef<ConfigMap>, Action), _>| async {});
        let _ = tokio::time::timeout(Duration::from_secs(3), controller).await;

        let passes = passes.lock().unwrap();
        let fewest = objects
            .iter()
            .map(|o| {
                passes
                    .get(o.metadata.name.as_deref().unwrap())
                    .copied()
                    .unwrap_or(0)
            })
            .min();
        assert!(fewest >= Some(2), "passes per object: {passes:?}");
    }

    #[tokio::test]
    async fn once_closed_the_waits_end_and_the_running_pass_keeps_its_turn() {
        let turns = Turns::new(1);
        let running = turns.take().await.unwrap();
        let waiting = tokio::spawn({
            let turns = turns.clone();
            async move { turns.take().await.is_some() }
        });
        tokio::task::yield_now().await;

        turns.close();

        assert!(!waiting.await.unwrap());
        assert!(turns.take().await.is_none());
        drop(running);
    }
}
