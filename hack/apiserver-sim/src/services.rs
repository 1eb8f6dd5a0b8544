//! The Service registry's allocations, done at write time as kube-apiserver
//! does: a cluster IP from 10.96.0.0/12 (immutable once set, `None` for
//! headless Services) and node ports from 30000–32767 for NodePort and
//! LoadBalancer Services (a requested port is honoured; one already allocated
//! or out of range is a 422), kept across updates that omit them.

use std::collections::BTreeSet;

use serde_json::{json, Value};

use crate::error::ApiError;

const NODE_PORT_MIN: i64 = 30000;
const NODE_PORT_MAX: i64 = 32767;

fn ip_string(n: u32) -> String {
    std::net::Ipv4Addr::from(n).to_string()
}

fn invalid(name: &str, field: String, message: String) -> ApiError {
    ApiError::invalid("", "Service", name, &[(field, message)])
}

fn node_ports(svc: &Value) -> impl Iterator<Item = i64> + '_ {
    svc.pointer("/spec/ports")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|p| p.get("nodePort").and_then(Value::as_i64))
}

/// Fills and checks a Service's cluster IP and node ports. `others` are the
/// other Services of the cluster (every namespace); `seed` varies node-port picks.
pub fn allocate(
    svc: &mut Value,
    old: Option<&Value>,
    others: &[&Value],
    seed: u64,
) -> Result<(), ApiError> {
    let name = svc
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let Some(spec) = svc.get_mut("spec").and_then(Value::as_object_mut) else {
        return Ok(());
    };
    let svc_type = spec
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("ClusterIP")
        .to_string();

    // Cluster IP.
    let old_ip = old
        .and_then(|o| o.pointer("/spec/clusterIP"))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let requested = spec
        .get("clusterIP")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    if !old_ip.is_empty() && !requested.is_empty() && requested != old_ip {
        return Err(invalid(
            &name,
            "spec.clusterIPs[0]".into(),
            format!("Invalid value: []string{{\"{requested}\"}}: may not change once set"),
        ));
    }
    if svc_type != "ExternalName" {
        let ip = if !old_ip.is_empty() {
            old_ip
        } else if !requested.is_empty() {
            if requested != "None"
                && others.iter().any(|o| {
                    o.pointer("/spec/clusterIP").and_then(Value::as_str) == Some(requested.as_str())
                })
            {
                return Err(invalid(&name, "spec.clusterIPs".into(), format!("Invalid value: []string{{\"{requested}\"}}: failed to allocate IP {requested}: provided IP is already allocated")));
            }
            requested
        } else {
            let used: BTreeSet<&str> = others
                .iter()
                .filter_map(|o| o.pointer("/spec/clusterIP").and_then(Value::as_str))
                .collect();
            let base = u32::from(std::net::Ipv4Addr::new(10, 96, 0, 10));
            (0..(1u32 << 20) - 20)
                .map(|i| ip_string(base + i))
                .find(|ip| !used.contains(ip.as_str()))
                .unwrap_or_default()
        };
        spec.insert("clusterIP".into(), json!(ip));
        spec.insert("clusterIPs".into(), json!([ip]));
        if ip != "None" {
            spec.entry("ipFamilies").or_insert(json!(["IPv4"]));
            spec.entry("ipFamilyPolicy").or_insert(json!("SingleStack"));
        }
        spec.entry("internalTrafficPolicy")
            .or_insert(json!("Cluster"));
    }

    // Node ports.
    let wants_node_ports = svc_type == "NodePort" || svc_type == "LoadBalancer";
    let old_ports: Vec<Value> = old
        .and_then(|o| o.pointer("/spec/ports"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut taken: BTreeSet<i64> = others
        .iter()
        .flat_map(|o| node_ports(o).collect::<Vec<_>>())
        .collect();
    if wants_node_ports {
        spec.entry("externalTrafficPolicy")
            .or_insert(json!("Cluster"));
    }
    let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) else {
        return Ok(());
    };
    let mut next = NODE_PORT_MIN + (seed % (NODE_PORT_MAX - NODE_PORT_MIN + 1) as u64) as i64;
    for (i, p) in ports.iter_mut().enumerate() {
        let Some(port) = p.as_object_mut() else {
            continue;
        };
        if !wants_node_ports {
            port.remove("nodePort");
            continue;
        }
        let key = (port.get("port").cloned(), port.get("protocol").cloned());
        let kept = old_ports
            .iter()
            .find(|op| (op.get("port").cloned(), op.get("protocol").cloned()) == key)
            .and_then(|op| op.get("nodePort").and_then(Value::as_i64));
        match port
            .get("nodePort")
            .and_then(Value::as_i64)
            .filter(|n| *n != 0)
        {
            Some(n) => {
                if !(NODE_PORT_MIN..=NODE_PORT_MAX).contains(&n) {
                    return Err(invalid(&name, format!("spec.ports[{i}].nodePort"), format!(
                        "Invalid value: {n}: provided port is not in the valid range. The range of valid ports is {NODE_PORT_MIN}-{NODE_PORT_MAX}"
                    )));
                }
                if Some(n) != kept && !taken.insert(n) {
                    return Err(invalid(
                        &name,
                        format!("spec.ports[{i}].nodePort"),
                        format!("Invalid value: {n}: provided port is already allocated"),
                    ));
                }
            }
            None => {
                let n = match kept {
                    Some(k) => k,
                    None => {
                        let mut tries = 0;
                        while taken.contains(&next) && tries <= NODE_PORT_MAX - NODE_PORT_MIN {
                            next = if next >= NODE_PORT_MAX {
                                NODE_PORT_MIN
                            } else {
                                next + 1
                            };
                            tries += 1;
                        }
                        if taken.contains(&next) {
                            return Err(invalid(
                                &name,
                                format!("spec.ports[{i}].nodePort"),
                                "Invalid value: 0: range is full".into(),
                            ));
                        }
                        next
                    }
                };
                taken.insert(n);
                port.insert("nodePort".into(), json!(n));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn svc(name: &str, node_port: Option<i64>) -> Value {
        let mut port = json!({"port": 27017, "protocol": "TCP"});
        if let Some(n) = node_port {
            port["nodePort"] = json!(n);
        }
        json!({"metadata": {"name": name}, "spec": {"type": "NodePort", "ports": [port]}})
    }

    #[test]
    fn services_get_a_cluster_ip_and_node_ports_and_duplicates_are_refused() {
        let mut a = svc("a", Some(30001));
        allocate(&mut a, None, &[], 7).unwrap();
        assert_eq!(a["spec"]["clusterIP"], "10.96.0.10");
        assert_eq!(a["spec"]["ports"][0]["nodePort"], 30001);
        let mut b = svc("b", None);
        allocate(&mut b, None, &[&a], 1).unwrap();
        assert_eq!(b["spec"]["clusterIP"], "10.96.0.11");
        let np = b["spec"]["ports"][0]["nodePort"].as_i64().unwrap();
        assert!((30000..=32767).contains(&np) && np != 30001);
        let mut dup = svc("c", Some(30001));
        let e = allocate(&mut dup, None, &[&a, &b], 1).unwrap_err();
        assert_eq!(e.code, 422);
        assert!(
            e.message.contains(
                "spec.ports[0].nodePort: Invalid value: 30001: provided port is already allocated"
            ),
            "{}",
            e.message
        );
        let mut out_of_range = svc("d", Some(80));
        assert_eq!(
            allocate(&mut out_of_range, None, &[], 1).unwrap_err().code,
            422
        );
        // An update that omits the allocations keeps them.
        let mut update = svc("a", None);
        allocate(&mut update, Some(&a), &[&b], 3).unwrap();
        assert_eq!(update["spec"]["ports"][0]["nodePort"], 30001);
        assert_eq!(update["spec"]["clusterIP"], "10.96.0.10");
    }
}
