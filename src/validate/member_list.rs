//! The member list: the propagated hostconf, or, while leaving, the members
//! status last observed.

use std::collections::BTreeMap;

use kube::ResourceExt;

use super::{InvalidInput, ReferencedObjects};
use crate::api::MongoDB;
use crate::build::names;
use crate::hostconf::{HostConf, HostConfMember, MemberAddress};
use crate::replset::MemberState;

/// The hostconf ConfigMap's data, parsed.
pub fn hostconf(
    config_map: &str,
    data: Option<&BTreeMap<String, String>>,
) -> Result<HostConf, InvalidInput> {
    let empty = BTreeMap::new();
    HostConf::from_config_map_data(data.unwrap_or(&empty)).map_err(|source| {
        InvalidInput::HostconfInvalid {
            name: config_map.to_string(),
            source: Box::new(source),
        }
    })
}

/// The propagated hostconf, parsed.
pub(super) fn propagated_hostconf(
    mongodb: &MongoDB,
    referenced: &ReferencedObjects,
) -> Result<HostConf, InvalidInput> {
    let instance = mongodb.name_any();
    let name = names::hostconf(&instance, mongodb.spec.member_config_ref.as_deref());
    match &referenced.hostconf {
        Some(config_map) => hostconf(&name, config_map.data.as_ref()),
        None => Err(InvalidInput::HostconfMissing { name }),
    }
}

/// The members of the set as status last observed them, standing in for
/// hostconf while leaving (state 7 is an arbiter).
pub(super) fn last_observed_members(mongodb: &MongoDB) -> HostConf {
    let replset = mongodb.status.iter().flat_map(|s| &s.replset);
    let members = replset
        .filter_map(|member| {
            let address = MemberAddress::parse(&member.name).ok()?;
            Some(HostConfMember {
                address,
                arbiter: member.state == MemberState::Arbiter.code(),
                votes: None,
                priority: None,
                hidden: false,
                tags: BTreeMap::new(),
            })
        })
        .collect();
    HostConf { members }
}
