//! The keyfiles this cluster knows: the one its members' template runs, then
//! those its pods run, read from the operator's keyfile Secrets they name.

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::ResourceExt;

use crate::build::{KEYFILE_SECRET_ANNOTATION, KEYFILE_SECRET_KEY};
use crate::keyfile::Keyfile;

/// The operator's keyfile Secrets named by this instance's StatefulSets (by
/// StatefulSet name: their templates' keyfile), then by its pods, each once:
/// what `dereference` reads. Read from annotation [`KEYFILE_SECRET_ANNOTATION`]
/// (the caches keep no pod spec); a StatefulSet or pod built before keyfiles
/// were the operator's names none.
pub fn keyfile_secret_names(stateful_sets: &[StatefulSet], pods: &[Pod]) -> Vec<String> {
    let mut stateful_sets: Vec<&StatefulSet> = stateful_sets.iter().collect();
    stateful_sets.sort_by_key(|s| s.name_any());
    let named = |annotations: &std::collections::BTreeMap<String, String>| {
        annotations.get(KEYFILE_SECRET_ANNOTATION).cloned()
    };
    let templates = stateful_sets
        .into_iter()
        .filter_map(|s| named(s.annotations()));
    let pods = pods.iter().filter_map(|pod| named(pod.annotations()));
    let mut names: Vec<String> = Vec::new();
    for name in templates.chain(pods) {
        if !names.contains(&name) {
            names.push(name);
        }
    }
    names
}

/// The keyfiles of `secrets` (as [`keyfile_secret_names`] ordered them); a
/// Secret that holds no usable keyfile is left out.
pub fn known_keyfiles(secrets: &[Secret]) -> Vec<Keyfile> {
    secrets
        .iter()
        .filter_map(|secret| {
            let value = secret.data.as_ref()?.get(KEYFILE_SECRET_KEY)?;
            Keyfile::parse(std::str::from_utf8(&value.0).ok()?)
        })
        .collect()
}
