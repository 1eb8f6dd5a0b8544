//! One pass of the stand-in over an instance: FedState's handler chain,
//! Karmada's propagation, the ResourceBinding read back and FedState's status
//! handler, then when the next pass is due (15 s after an uneventful pass, at
//! once after one that changed the status, with controller-runtime's backoff
//! after a failed one).

use std::time::{Duration, Instant};

use k8s_openapi::jiff::Timestamp;

use super::{ControlPlane, State, REQUEUE_AFTER};
use crate::fedstate::{self, Handled, Pass};
use crate::interpreter::Interpreter;
use crate::karmada::{self, NodePorts};

impl ControlPlane {
    /// One pass of FedState's handler chain over `key`, with Karmada's
    /// propagation and the ResourceBinding read back. Returns what it did.
    pub(super) async fn pass(
        &self,
        state: &mut State,
        key: &(String, String),
        interpreter: &Interpreter,
    ) -> Vec<String> {
        let mut ports = NodePorts {
            used: state
                .instances
                .values()
                .flat_map(|i| i.objects.services.values().map(|s| s.node_port))
                .collect(),
        };
        let State { instances, rng } = state;
        let Some(instance) = instances.get_mut(key) else {
            return Vec::new();
        };
        let (namespace, name) = key;
        let mut lines = Vec::new();
        let mut failed = None;
        if instance.deleting {
            // FedState's finalizer, then the garbage collector; Karmada after each.
            let mut deleted =
                fedstate::delete_external_resources(&instance.object, &mut instance.objects);
            for collect in [false, true] {
                if collect {
                    deleted.extend(fedstate::garbage_collect(&mut instance.objects));
                }
                match karmada::sync(
                    &self.clusters,
                    namespace,
                    &instance.objects,
                    &mut instance.bindings,
                    interpreter,
                )
                .await
                {
                    Ok(done) => deleted.extend(done),
                    Err(error) => {
                        failed = Some(format!("{error:#}"));
                        break;
                    }
                }
            }
            lines.extend(deleted.into_iter().map(|d| format!("{name}: {d}")));
            if failed.is_none() {
                // What stays propagated now (the user's configRef ConfigMap,
                // whose policy FedState deleted) stays in the member clusters.
                instances.remove(key);
                lines.push(format!("{name}: MultiCloudMongoDB deleted"));
                return lines;
            }
        } else {
            let now = Timestamp::now().to_string();
            let before = instance.object.status.clone();
            let vips = self.vips();
            let mut pass = Pass::new(
                &mut instance.object,
                &mut instance.objects,
                &mut ports,
                rng,
                &instance.deviations,
                now.clone(),
            );
            let handled = pass.handle(&vips);
            let suspended = pass.suspend();
            let synced = karmada::sync(
                &self.clusters,
                namespace,
                &instance.objects,
                &mut instance.bindings,
                interpreter,
            )
            .await;
            let binding = if matches!(handled, Ok(Handled::ReadStatus)) && synced.is_ok() {
                Some(
                    karmada::read_binding(
                        &self.clusters,
                        namespace,
                        name,
                        &mut instance.bindings,
                        interpreter,
                    )
                    .await
                    .map_err(|e| format!("reading the ResourceBinding: {e:#}")),
                )
            } else {
                None
            };
            let mut pass = Pass::resume(
                &mut instance.object,
                &mut instance.objects,
                &mut ports,
                rng,
                &instance.deviations,
                now,
                suspended,
            );
            let mut outcome = handled.map(drop);
            if let Some(binding) = &binding {
                outcome = match binding {
                    Ok(binding) => pass.status(Some(binding)),
                    Err(error) => Err(error.clone()),
                };
            }
            pass.finish();
            let log = pass.suspend().log;
            lines.extend(log.into_iter().map(|l| format!("{name}: {l}")));
            match synced {
                Ok(done) => lines.extend(done.into_iter().map(|d| format!("{name}: {d}"))),
                Err(error) => failed = Some(format!("Karmada: {error:#}")),
            }
            if let Err(error) = outcome {
                failed.get_or_insert(format!("FedState: {error}"));
            }
            if let Some(Ok(binding)) = binding {
                if let Some(template) = instance.objects.mongodbs.get_mut(name) {
                    match karmada::aggregate(namespace, name, template, &binding, interpreter) {
                        Ok(status) => template.status = status,
                        Err(error) => {
                            failed.get_or_insert(format!("AggregateStatus: {error:#}"));
                        }
                    }
                }
            }
            if instance.object.status != before && failed.is_none() {
                instance.failures = 0;
                instance.due = Instant::now();
                for line in &lines {
                    instance.note(line.clone());
                }
                Self::trace(&lines, &instance.object.status);
                return lines;
            }
        }
        match &failed {
            Some(error) => {
                let backoff = Duration::from_millis(5)
                    .saturating_mul(1 << instance.failures.min(18))
                    .min(Duration::from_secs(1000));
                instance.failures += 1;
                instance.due = Instant::now() + backoff;
                lines.push(format!(
                    "{name}: pass failed ({error}); next in {backoff:?}"
                ));
                tracing::warn!(instance = %name, %error, "control-plane pass failed");
            }
            None => {
                instance.failures = 0;
                instance.due = Instant::now() + REQUEUE_AFTER;
            }
        }
        for line in &lines {
            instance.note(line.clone());
        }
        Self::trace(&lines, &instance.object.status);
        lines
    }

    /// Appends a pass's lines to the file `LAB_CONTROL_PLANE_LOG` names, if set
    /// (the e2e tests discard what `run` reports).
    fn trace(lines: &[String], status: &fedstate::MultiCloudMongoDBStatus) {
        let Ok(path) = std::env::var("LAB_CONTROL_PLANE_LOG") else {
            return;
        };
        use std::io::Write;
        if let Ok(mut file) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        {
            let now = Timestamp::now();
            for line in lines {
                let _ = writeln!(file, "{now} {line}");
            }
            let _ = writeln!(
                file,
                "{now} status {}",
                serde_json::to_string(status).unwrap_or_default()
            );
        }
    }
}
