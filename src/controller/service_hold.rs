//! Stage `hold` (Kubernetes I/O): the finalizer on this instance's member
//! Services, put on every live one and taken off a deleted one once its
//! member has left the set (the pure [`crate::service_hold`] decides), with a
//! Normal Event for each Service let go. A patch that fails is logged; the
//! next pass tries again.

use k8s_openapi::api::core::v1::Service;
use kube::runtime::events::EventType;
use kube::Api;

use super::context::PassContext;
use super::events::Notice;
use super::finalizer;
use crate::service_hold::{
    plan_holds, HeldService, InstanceLife, MemberServiceObject, Membership, ServiceHolds,
    SERVICE_FINALIZER,
};

/// Claims and releases the finalizers of `services` for an instance in
/// `life`; the deleted Services still held.
pub async fn hold(
    ctx: &PassContext,
    services: &[MemberServiceObject],
    life: InstanceLife,
    membership: Membership<'_>,
) -> Vec<HeldService> {
    let ServiceHolds {
        claim,
        release,
        held,
    } = plan_holds(services, life, membership);
    let api = Api::<Service>::namespaced(ctx.client.clone(), &ctx.instance.namespace);
    for service in claim {
        let claimed = finalizer::add(&api, &service.name, &service.finalizers, SERVICE_FINALIZER);
        if let Err(error) = claimed.await {
            tracing::warn!(instance = %ctx.instance, service = service.name, %error, "could not hold a member Service");
        }
    }
    for (service, reason) in release {
        let released =
            finalizer::remove(&api, &service.name, &service.finalizers, SERVICE_FINALIZER);
        match released.await {
            Ok(()) => {
                let reason: &'static str = reason.into();
                let message = format!("Service {} let go: {reason}", service.name);
                ctx.events
                    .publish(
                        EventType::Normal,
                        Notice::MemberServiceReleased.into(),
                        message,
                    )
                    .await;
            }
            Err(error) => {
                tracing::warn!(instance = %ctx.instance, service = service.name, %error, "could not release a member Service")
            }
        }
    }
    held
}
