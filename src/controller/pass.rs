//! One pass over one object: the stages in order, each a call with what it
//! needs of the object and of the stages before it.
//!
//! `dereference` → `validate` → `keyfile` → `tls` → `vet` → `build` → `apply` → `grow` →
//! `observe` → `hold` → `plan` → `record` → `act` → `recovery` → `forget` → `roll` →
//! `rotate` → `status`
//!
//! Input the pass cannot use ends it ([`PassOutcome::InvalidInput`]), after
//! `hold` has claimed the member Services (and kept the deleted ones): the
//! caller reports it or, for an object being deleted, lets it go.

use std::time::Duration;

use kube::runtime::controller::Action;

use super::act::act;
use super::apply::apply_desired;
use super::context::PassContext;
use super::credentials::{remember_root, set_new_root_password};
use super::dereference::dereference;
use super::forget::forget;
use super::grow::grow;
use super::keyfile::prune_keyfile_secrets;
use super::observe::{dropped_members, observe};
use super::record::record;
use super::recovery::recover;
use super::roll::roll;
use super::rotate::rotate;
use super::service_hold::hold;
use super::status::{self, Report};
use super::vet::vet;
use super::ReconcileError;
use crate::api::MongoDB;
use crate::build::{self, BuildContext, DesiredObjects};
use crate::forget::forgotten_cluster;
use crate::keyfile::{plan_keyfile, Keyfile, KeyfileProgress};
use crate::member::Wanted;
use crate::mongo::ClientTls;
use crate::planner::{has_left, plan, PlanInput, Step};
use crate::roll::DesiredPods;
use crate::service_hold::{HeldService, InstanceLife, MemberServiceObject, Membership};
use crate::status::TlsSeen;
use crate::tls::rotation::{FilesStanding, MountedFiles};
use crate::tls::{plan_tls, MemberTls, TlsPlanned};
use crate::validate::{validate, InvalidInput, Validated};

/// How soon a paused object is looked at again (status stays fresh).
const WHILE_PAUSED: Duration = Duration::from_secs(30);
/// How soon an object whose status just changed is looked at again: things
/// are moving (an election, a member catching up), and the status should
/// follow them, not wait for the 30 s look at a set in sync. Once the status
/// stays the same, the step's own requeue applies (at rest: 30 s). A status
/// write itself wakes no pass.
const AFTER_STATUS_CHANGE: Duration = Duration::from_secs(1);

/// How a pass ended.
pub enum PassOutcome {
    /// It went through every stage; look again as the action says.
    Ran(Action),
    /// Leaving, it found this cluster's members out of the set.
    Left,
    /// Its input cannot be used; nothing was done from that stage on but
    /// `hold`, which kept these deleted member Services.
    InvalidInput(InvalidInput, Vec<HeldService>),
}

/// One pass over one object. `leaving`: the object is being deleted and this
/// cluster's members must leave the set.
pub async fn pass(
    mongodb: &MongoDB,
    ctx: &PassContext,
    leaving: bool,
) -> Result<PassOutcome, ReconcileError> {
    let paused = mongodb.spec.pause && !leaving;
    let wanted = Wanted::of(mongodb, leaving);
    // dereference: read what the object refers to, as it is (Kubernetes I/O).
    let referenced = dereference(&ctx.client, &ctx.caches, mongodb).await?;
    let member_services =
        MemberServiceObject::of_instance(&ctx.instance.name, &referenced.services);
    let life = if leaving {
        InstanceLife::Leaving
    } else {
        InstanceLife::Live
    };
    // validate: check it, or stop at what the user must fix (pure).
    let validated = match validate(mongodb, &referenced, leaving) {
        Ok(validated) => validated,
        Err(invalid) => {
            let held = hold(ctx, &member_services, life, Membership::Unknown).await;
            return Ok(PassOutcome::InvalidInput(invalid, held));
        }
    };
    // keyfile: the keyfile this cluster's members are to run, from what every
    // member ran at the last roll (pure).
    let keyfile = validated.desired_keyfile.as_ref().map(|desired| {
        plan_keyfile(
            desired,
            &validated.known_keyfiles,
            ctx.memory().keys_run.as_ref(),
        )
    });
    // tls: the mode one step nearer the spec's, from what every member ran
    // at the last roll, and the checked certificate (pure).
    let now = k8s_openapi::jiff::Timestamp::now().as_second();
    let modes_run = ctx.memory().modes_run;
    let planned = plan_tls(
        mongodb,
        referenced.certificate_secret.as_ref(),
        &validated.vip,
        validated.running_tls_mode(),
        modes_run.as_ref(),
        now,
    );
    let planned = match planned {
        Ok(planned) => planned,
        Err(invalid) => {
            let held = hold(ctx, &member_services, life, Membership::Unknown).await;
            return Ok(PassOutcome::InvalidInput(invalid, held));
        }
    };
    // vet: new certificate files given only once every member that runs TLS
    // takes them, else the mounted ones kept (TLS I/O); the pass's MongoDB
    // clients set up for them (files for the driver).
    let mounted = referenced
        .mounted_tls_secret
        .as_ref()
        .and_then(MountedFiles::of);
    let (tls, files_held) = vet(
        planned,
        mounted.as_ref(),
        &validated,
        modes_run.as_ref(),
        now,
    )
    .await;
    let client_files = match connect_with(ctx, &tls) {
        Ok(files) => files,
        Err(invalid) => {
            let held = hold(ctx, &member_services, life, Membership::Unknown).await;
            return Ok(PassOutcome::InvalidInput(invalid, held));
        }
    };
    // build: the desired objects, unless paused or leaving (pure).
    let built = build_desired(
        mongodb,
        &validated,
        keyfile.as_ref(),
        tls.members.as_ref(),
        wanted,
        paused || leaving,
    );
    let desired = match built {
        Ok(desired) => desired,
        Err(invalid) => {
            let held = hold(ctx, &member_services, life, Membership::Unknown).await;
            return Ok(PassOutcome::InvalidInput(invalid, held));
        }
    };
    // apply: server-side apply them, StatefulSets last; a refusal is reported;
    // keyfile Secrets no member mounts any more deleted (Kubernetes I/O).
    let apply_failures = apply_desired(ctx, desired.as_ref()).await;
    if let (Some(keyfile), Some(_)) = (&keyfile, &desired) {
        let planned = build::keyfile_secret_name(&ctx.instance.name, keyfile);
        prune_keyfile_secrets(ctx, &referenced, &planned).await;
    }
    // grow: the data volumes brought to the spec's storage, unless paused or leaving (Kubernetes I/O).
    let growth = match &desired {
        Some(_) => Some(grow(ctx, mongodb, &validated, wanted).await),
        None => None,
    };
    // observe: ask the members, read the replica set (MongoDB I/O).
    let mut answers = observe(&ctx.gateway, mongodb, &validated, wanted).await;
    if let (None, Some(files)) = (&answers.reading, &client_files) {
        // Members mid-step may take only the other transport (a restarted
        // operator does not know yet which): the pass goes on with the one
        // that reads the set.
        let use_tls = tls.clients_use_tls;
        ctx.gateway.use_tls((!use_tls).then(|| files.clone()));
        let other = observe(&ctx.gateway, mongodb, &validated, wanted).await;
        match other.reading {
            Some(_) => answers = other,
            None => ctx.gateway.use_tls(use_tls.then(|| files.clone())),
        }
    }
    // hold: the member Services claimed, a deleted one kept until its member
    // is out of the committed config (Kubernetes I/O).
    let observed = answers.reading.as_ref().map(|reading| &reading.set);
    let membership = Membership::of(observed, Some(&validated.vip));
    let held = hold(ctx, &member_services, life, membership).await;
    if let Some(refused) = answers.credentials_refused.as_ref().filter(|_| !leaving) {
        // credentials: a new root password the set does not hold yet, set
        // through the one it holds by the rsInit cluster's operator (MongoDB I/O).
        if set_new_root_password(ctx, mongodb, &validated).await {
            return Ok(PassOutcome::Ran(Action::requeue(AFTER_STATUS_CHANGE)));
        }
        return Ok(PassOutcome::InvalidInput(refused.clone(), held));
    }
    if !leaving
        && answers
            .reading
            .as_ref()
            .is_some_and(|r| r.set.primary.is_some())
    {
        // the set's primary took the root user: remember it (Kubernetes I/O).
        remember_root(ctx, mongodb, &validated.root).await;
    }
    // plan: the planner's input from what was seen, and its one next step (pure).
    let observed_set = answers.reading.as_ref().map(|reading| reading.set.clone());
    let mut input = PlanInput::from_observation(
        mongodb,
        &validated,
        wanted,
        &answers.probes,
        observed_set,
        ctx.stepped_down_recently(),
        ctx.step_down_held(),
    );
    input.forgotten_cluster = forgotten_cluster(mongodb);
    if input.needs_dropped_members() {
        let reading = answers.reading.as_ref();
        input.dropped_members = dropped_members(&ctx.gateway, reading, &validated.root).await;
    }
    let step = plan(&input);
    tracing::info!(instance = %ctx.instance, step = %step, "planned");
    // record: the config entry each local member is, on its StatefulSet, when it changed (Kubernetes I/O).
    record(ctx, &input).await;
    // act: carry the step out unless paused (MongoDB and Kubernetes I/O).
    let acted = if paused {
        None
    } else {
        Some(
            act(
                ctx, mongodb, &validated, &answers, &mut input, &step, leaving,
            )
            .await,
        )
    };
    // recovery: a disaster recovery, only as an SRE asked for it on this object (MongoDB I/O).
    let recovered = if paused || leaving {
        None
    } else {
        Some(recover(ctx, mongodb, &validated, &answers, &step).await)
    };
    // forget: a lost cluster's members recorded as forgotten, only as an SRE asked for it on this object (MongoDB I/O).
    let forgotten = if paused || leaving {
        None
    } else {
        Some(forget(ctx, mongodb, &validated, &answers, &step).await)
    };
    // roll: once in sync, replace one outdated pod of the whole set at a time (MongoDB and Kubernetes I/O).
    let revision = desired.and_then(|d| d.revision);
    let keys = keyfile.as_ref().map(Keyfile::fingerprints);
    let certificate_membership =
        (tls.members.as_ref()).map(|members| crate::tls::membership(&members.certificate.subject));
    let rolled = match (&revision, &acted) {
        (Some(revision), Some(Ok(_))) if step == Step::InSync => {
            let desired = DesiredPods {
                revision,
                keyfile: keys.as_deref(),
                tls_mode: tls.plan.template,
                membership: certificate_membership.as_deref(),
            };
            roll(ctx, mongodb, &validated, &answers, desired).await
        }
        _ => None,
    };
    // rotate: from 5.0, a local member serving another certificate than its
    // files hold asked to load them, one a pass (TLS and MongoDB I/O).
    let rotated = match (&acted, leaving) {
        (Some(Ok(_)), false) => Some(rotate(ctx, mongodb, &validated, &answers, &tls).await),
        _ => None,
    };
    let files = match (&files_held, &rotated) {
        (Some(refusal), _) => Some(FilesStanding::Held {
            why: refusal.to_string(),
        }),
        (None, Some(rotated)) => rotated.standing.clone(),
        (None, None) => None,
    };
    // status: what the pass saw and did, written when it changed (pure, then Kubernetes I/O).
    let replanned = acted
        .as_ref()
        .and_then(|acted| acted.as_ref().ok()?.replanned.as_ref());
    let keyfile_standing = keyfile_progress(ctx, &validated, keyfile.as_ref(), paused || leaving);
    let report = Report {
        paused,
        problem: None,
        validated: Some(&validated),
        observation: answers.reading.as_ref().map(|reading| &reading.set),
        step: Some(replanned.unwrap_or(&step)),
        roll: rolled.as_ref().map(|rolled| &rolled.step),
        feature_compatibility_version: rolled.as_ref().and_then(|rolled| rolled.fcv.clone()),
        revision,
        apply_failures: &apply_failures,
        recovery: recovered.as_ref().and_then(|r| r.status.clone()),
        forget_cluster: forgotten.as_ref().and_then(|f| f.status.clone()),
        held_services: &held,
        growth: growth.as_ref(),
        keyfile: keyfile_standing.as_ref(),
        tls: tls.desired.map(|mode| TlsSeen {
            mode,
            plan: &tls.plan,
            certificate: tls.members.as_ref().map(|members| &members.certificate),
            modes: &answers.tls_modes,
            files: files.as_ref(),
        }),
    };
    let status_changed = status::write(ctx, mongodb, &report).await?;

    let requeue = match acted {
        Some(acted) => acted?.requeue,
        None => WHILE_PAUSED,
    };
    let sooner = [
        rolled.and_then(|rolled| rolled.requeue),
        recovered.and_then(|recovered| recovered.requeue),
        forgotten.and_then(|forgotten| forgotten.requeue),
        rotated.and_then(|rotated| rotated.requeue),
        status_changed.then_some(AFTER_STATUS_CHANGE),
    ];
    let requeue = sooner.into_iter().flatten().fold(requeue, Duration::min);
    if leaving && has_left(&input, &step) {
        return Ok(PassOutcome::Left);
    }
    Ok(PassOutcome::Ran(Action::requeue(requeue)))
}

/// The desired objects for the members this cluster runs, or `None` when
/// nothing is to be applied (`hold`: paused, or leaving).
fn build_desired(
    mongodb: &MongoDB,
    validated: &Validated,
    keyfile: Option<&Keyfile>,
    tls: Option<&MemberTls>,
    wanted: Wanted,
    hold: bool,
) -> Result<Option<DesiredObjects>, InvalidInput> {
    if hold {
        return Ok(None);
    }
    let mut ctx =
        BuildContext::from_mongodb(mongodb)?.with_content_digest(validated.content_digest.clone());
    if let Some(keyfile) = keyfile {
        ctx = ctx.with_keyfile(keyfile.clone());
    }
    ctx = ctx.with_tls(tls.cloned());
    let targets = validated.member_targets(wanted, &mongodb.spec.persistence.storage);
    let root_password = &validated.root.password;
    Ok(Some(build::desired_objects(&ctx, root_password, &targets)?))
}

/// Points this pass's MongoDB clients at TLS or plain connections as
/// planned, writing the files the driver reads; the files, for a pass that
/// must try the other transport.
fn connect_with(ctx: &PassContext, tls: &TlsPlanned) -> Result<Option<ClientTls>, InvalidInput> {
    let files = tls
        .members
        .as_ref()
        .map(ClientTls::write)
        .transpose()
        .map_err(|error| InvalidInput::TlsClientFilesUnwritable {
            why: error.to_string(),
        })?;
    ctx.gateway
        .use_tls(files.clone().filter(|_| tls.clients_use_tls));
    Ok(files)
}

/// Where the keyfile stands, once the keys every member runs were read
/// (`None`: not read since the operator started, or nothing planned).
fn keyfile_progress(
    ctx: &PassContext,
    validated: &Validated,
    planned: Option<&Keyfile>,
    hold: bool,
) -> Option<KeyfileProgress> {
    let desired = validated.desired_keyfile.as_ref()?;
    let run = ctx.memory().keys_run?;
    let planned = planned.filter(|_| !hold)?;
    Some(crate::keyfile::keyfile_progress(
        desired,
        planned,
        &run,
        &validated.vip,
    ))
}
