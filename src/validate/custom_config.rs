//! The custom mongod configuration (`spec.customConfigRef`, key
//! `mongod.yaml`), checked for what makes mongod exit at start next to the
//! operator's own options: every member given it would crash-loop.

use k8s_openapi::api::core::v1::ConfigMap;
use serde_yaml::Value;

use super::InvalidInput;
use crate::build::mongod_options::server_parameter_accepted;
use crate::build::CUSTOM_CONFIG_KEY;

/// Where mongod can write in the member pod: its data volume and `/tmp`
/// (the root filesystem is read-only).
const WRITABLE_DIRS: [&str; 2] = ["/data/db/", "/tmp/"];

/// Refuses a custom configuration no member could start with: no
/// `mongod.yaml` key (the kubelet cannot mount a key the ConfigMap lacks, and
/// the pod never starts), not a YAML mapping, `processManagement.fork`
/// (mongod detaches and the container ends), a `systemLog` file mongod
/// cannot open, or a `setParameter` the operator would refuse in
/// `spec.config`.
pub fn custom_config_accepted(name: &str, config_map: &ConfigMap) -> Result<(), InvalidInput> {
    let refuse = |why: String| InvalidInput::CustomConfigRefused {
        name: name.to_string(),
        why,
    };
    let Some(text) = config_map
        .data
        .as_ref()
        .and_then(|data| data.get(CUSTOM_CONFIG_KEY))
    else {
        return Err(refuse(format!(
            "it has no {CUSTOM_CONFIG_KEY} key, the one the member pods mount: the kubelet \
             cannot mount a missing key, so no member pod would start"
        )));
    };
    let root: Value = serde_yaml::from_str(text)
        .map_err(|e| refuse(format!("{CUSTOM_CONFIG_KEY} is not YAML: {e}")))?;
    if !matches!(root, Value::Mapping(_) | Value::Null) {
        return Err(refuse(format!("{CUSTOM_CONFIG_KEY} is not a YAML mapping")));
    }
    let at = |path: &[&str]| {
        path.iter()
            .try_fold(&root, |node, key| node.get(*key))
            .and_then(scalar)
    };
    if matches!(at(&["processManagement", "fork"]).as_deref(), Some("true")) {
        return Err(refuse(
            "processManagement.fork: mongod would detach from the container, which then ends"
                .to_string(),
        ));
    }
    if at(&["systemLog", "destination"]).as_deref() == Some("file") {
        let path = at(&["systemLog", "path"]).unwrap_or_default();
        if !WRITABLE_DIRS.iter().any(|dir| path.starts_with(dir)) {
            return Err(refuse(format!(
                "systemLog.path {path:?}: mongod cannot open a log file outside {} (the root \
                 filesystem is read-only) and exits",
                WRITABLE_DIRS.join(" and ")
            )));
        }
    }
    if let Some(Value::Mapping(parameters)) = root.get("setParameter") {
        for (parameter, value) in parameters {
            let parameter = scalar(parameter).unwrap_or_default();
            server_parameter_accepted(&parameter, &scalar(value).unwrap_or_default())
                .map_err(|why| refuse(format!("setParameter.{parameter}: {why}")))?;
        }
    }
    Ok(())
}

fn scalar(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accepted(content: &str) -> Result<(), InvalidInput> {
        let config_map = ConfigMap {
            data: Some([(CUSTOM_CONFIG_KEY.to_string(), content.to_string())].into()),
            ..ConfigMap::default()
        };
        custom_config_accepted("custom", &config_map)
    }

    #[test]
    fn a_configuration_mongod_would_not_start_with_is_refused() {
        assert!(accepted("operationProfiling:\n  slowOpThresholdMs: 250\n").is_ok());
        assert!(
            accepted("net:\n  bindIp: 10.0.0.1\n").is_ok(),
            "--bind_ip_all wins"
        );
        assert!(accepted("systemLog:\n  destination: file\n  path: /data/db/mongod.log\n").is_ok());
        for content in [
            "processManagement:\n  fork: true\n",
            "systemLog:\n  destination: file\n  path: /var/log/mongodb/mongod.log\n",
            "systemLog:\n  destination: file\n",
            "setParameter:\n  LOG_LEVEL: info\n",
            "- not a mapping\n",
        ] {
            let refused = accepted(content).unwrap_err();
            assert_eq!(refused.reason(), "CustomConfigRefused", "{content}");
            assert!(refused.to_string().contains("custom"), "{refused}");
        }
    }

    #[test]
    fn a_config_map_without_the_mongod_key_is_refused_naming_the_key() {
        let config_map = ConfigMap {
            data: Some([("custom.conf".to_string(), "net: {}\n".to_string())].into()),
            ..ConfigMap::default()
        };
        let refused = custom_config_accepted("custom", &config_map).unwrap_err();
        assert_eq!(refused.reason(), "CustomConfigRefused");
        assert!(refused.to_string().contains(CUSTOM_CONFIG_KEY), "{refused}");
        let empty = ConfigMap::default();
        let refused = custom_config_accepted("custom", &empty).unwrap_err();
        assert!(refused.to_string().contains(CUSTOM_CONFIG_KEY), "{refused}");
    }
}
