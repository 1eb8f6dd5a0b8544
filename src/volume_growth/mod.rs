//! Growing the members' data volumes to `spec.persistence.storage`.
//!
//! A StatefulSet's `volumeClaimTemplates` cannot change, and a bound claim
//! may grow (where its StorageClass allows expansion) but never shrink. So a
//! larger `storage` is carried out in two steps: every local member's claim is
//! expanded (the storage system and the kubelet grow the volume and its file
//! system online, the member keeps running), then each StatefulSet's claim
//! template is replaced by deleting the StatefulSet with orphan propagation —
//! its pod keeps running — and applying it again; the new StatefulSet adopts
//! the pod without restarting it (the pod template, hence its revision, is
//! the same). A smaller `storage` is refused: the templates and claims keep
//! their size.

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::status::storage::quantity_bytes;

/// One local member's data volume as this pass reads it.
#[derive(Clone, Debug, PartialEq)]
pub struct MemberVolume {
    /// The member's StatefulSet.
    pub stateful_set: String,
    /// Its claim template's storage request, when it exists and is readable.
    pub template: Option<Quantity>,
    /// It is being deleted (an orphaning delete in progress, or a departure).
    pub deleting: bool,
    /// The member's claim, once it exists.
    pub claim: Option<ClaimVolume>,
}

/// A member's PersistentVolumeClaim, as far as its size goes.
#[derive(Clone, Debug, PartialEq)]
pub struct ClaimVolume {
    /// Its name, `data-<statefulset>-0`.
    pub name: String,
    /// `spec.resources.requests.storage`.
    pub requested: Option<Quantity>,
    /// `status.capacity.storage`: the size the volume has.
    pub capacity: Option<Quantity>,
    /// Its condition types that are True (`Resizing`, `FileSystemResizePending`, …).
    pub conditions: Vec<String>,
}

/// What this pass does about the volumes' size.
#[derive(Clone, Debug, PartialEq, strum::IntoStaticStr)]
pub enum GrowthStep {
    /// Every claim template, request and capacity is `storage`.
    InPlace,
    /// Ask for `to` on these claims.
    Expand { claims: Vec<String>, to: Quantity },
    /// Delete this StatefulSet with orphan propagation; the next apply brings
    /// it back with the larger claim template.
    ReplaceTemplate { stateful_set: String },
    /// The claims asked for more and the volumes are not that large yet.
    Resizing { claims: Vec<ClaimProgress> },
    /// `storage` is smaller than a member's volume: nothing shrinks.
    DecreaseRefused { from: Quantity, to: Quantity },
}

/// What the pass did about the volumes' size, for status.
#[derive(Clone, Debug, PartialEq)]
pub struct Growth {
    /// The step planned.
    pub step: GrowthStep,
    /// What the API server said when it refused the step.
    pub refused: Option<String>,
}

/// The reasons of condition `VolumesMatchSpec`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, strum::IntoStaticStr, strum::VariantNames)]
pub enum VolumesReason {
    /// Every claim, claim template and volume has the spec's size.
    VolumesInPlace,
    /// Claims are being asked for the new size.
    ExpandingClaims,
    /// A StatefulSet is being replaced to take the larger claim template.
    ReplacingClaimTemplate,
    /// The volumes have not reached the new size yet.
    ResizingVolumes,
    /// The spec asks for less than a member's volume.
    StorageDecreaseRefused,
    /// The API server refused a step.
    StorageChangeRefused,
}

impl Growth {
    /// Whether condition `VolumesMatchSpec` holds, its reason and message.
    pub fn verdict(&self) -> (bool, VolumesReason, String) {
        if let Some(refused) = &self.refused {
            return (false, VolumesReason::StorageChangeRefused, refused.clone());
        }
        match &self.step {
            GrowthStep::InPlace => (
                true,
                VolumesReason::VolumesInPlace,
                "every local member's claim, claim template and volume has spec.persistence.storage".into(),
            ),
            GrowthStep::Expand { claims, to } => (
                false,
                VolumesReason::ExpandingClaims,
                format!("asking {} of claims {}", to.0, claims.join(", ")),
            ),
            GrowthStep::ReplaceTemplate { stateful_set } => (
                false,
                VolumesReason::ReplacingClaimTemplate,
                format!(
                    "StatefulSet {stateful_set} is replaced (its pod keeps running) to take the new claim template"
                ),
            ),
            GrowthStep::Resizing { claims } => {
                let each: Vec<String> = claims
                    .iter()
                    .map(|c| {
                        let capacity = c.capacity.as_ref().map_or("unknown", |q| q.0.as_str());
                        match c.conditions.is_empty() {
                            true => format!("{} has {capacity}", c.name),
                            false => format!("{} has {capacity} ({})", c.name, c.conditions.join(", ")),
                        }
                    })
                    .collect();
                (
                    false,
                    VolumesReason::ResizingVolumes,
                    format!("the volumes are growing: {}", each.join("; ")),
                )
            }
            GrowthStep::DecreaseRefused { from, to } => (
                false,
                VolumesReason::StorageDecreaseRefused,
                format!(
                    "spec.persistence.storage {} is smaller than the members' {}: a volume never shrinks; set {} or more",
                    to.0, from.0, from.0
                ),
            ),
        }
    }
}

/// A claim still growing: its size now and what it reports.
#[derive(Clone, Debug, PartialEq)]
pub struct ClaimProgress {
    /// The claim.
    pub name: String,
    /// `status.capacity.storage`, if reported.
    pub capacity: Option<Quantity>,
    /// Its True condition types, e.g. `FileSystemResizePending`.
    pub conditions: Vec<String>,
}

/// The step for `volumes` to reach `storage`.
pub fn plan_growth(storage: &Quantity, volumes: &[MemberVolume]) -> GrowthStep {
    let Some(wanted) = quantity_bytes(storage) else {
        return GrowthStep::InPlace;
    };
    let bytes = |q: &Option<Quantity>| q.as_ref().and_then(quantity_bytes);
    let largest = volumes
        .iter()
        .filter_map(|v| v.template.as_ref().map(|t| (t, quantity_bytes(t))))
        .chain(volumes.iter().filter_map(|v| {
            let requested = v.claim.as_ref()?.requested.as_ref()?;
            Some((requested, quantity_bytes(requested)))
        }))
        .filter_map(|(q, b)| Some((q, b?)))
        .max_by_key(|(_, b)| *b);
    if let Some((from, size)) = largest {
        if size > wanted {
            return GrowthStep::DecreaseRefused {
                from: from.clone(),
                to: storage.clone(),
            };
        }
    }
    let small_claims: Vec<String> = volumes
        .iter()
        .filter_map(|v| v.claim.as_ref())
        .filter(|c| bytes(&c.requested).is_some_and(|b| b < wanted))
        .map(|c| c.name.clone())
        .collect();
    if !small_claims.is_empty() {
        return GrowthStep::Expand {
            claims: small_claims,
            to: storage.clone(),
        };
    }
    let small_template = volumes
        .iter()
        .find(|v| !v.deleting && bytes(&v.template).is_some_and(|b| b < wanted));
    if let Some(volume) = small_template {
        return GrowthStep::ReplaceTemplate {
            stateful_set: volume.stateful_set.clone(),
        };
    }
    let growing: Vec<ClaimProgress> = volumes
        .iter()
        .filter_map(|v| v.claim.as_ref())
        .filter(|c| bytes(&c.capacity).is_some_and(|b| b < wanted))
        .map(|c| ClaimProgress {
            name: c.name.clone(),
            capacity: c.capacity.clone(),
            conditions: c.conditions.clone(),
        })
        .collect();
    if !growing.is_empty() {
        return GrowthStep::Resizing { claims: growing };
    }
    GrowthStep::InPlace
}

/// The storage a new member's claim template asks for: `storage`, or the
/// largest of the existing `templates` when `storage` is smaller (a decrease
/// is refused).
pub fn new_claim_storage<'a>(
    storage: &Quantity,
    templates: impl IntoIterator<Item = &'a Quantity>,
) -> Quantity {
    let wanted = quantity_bytes(storage);
    templates
        .into_iter()
        .filter_map(|t| Some((t, quantity_bytes(t)?)))
        .filter(|(_, b)| wanted.is_some_and(|w| *b > w))
        .max_by_key(|(_, b)| *b)
        .map(|(t, _)| t.clone())
        .unwrap_or_else(|| storage.clone())
}

#[cfg(test)]
mod tests;
