//! kubeconfig files for simulated clusters: one context per cluster, plain
//! HTTP, no credentials (`user: {}`).

/// A kubeconfig with a context per `(name, server URL)`, the current one being `current`.
pub fn render(clusters: &[(String, String)], current: &str) -> String {
    let mut s = String::from("apiVersion: v1\nkind: Config\nclusters:\n");
    for (name, url) in clusters {
        s.push_str(&format!("- name: {name}\n  cluster:\n    server: {url}\n"));
    }
    s.push_str("contexts:\n");
    for (name, _) in clusters {
        s.push_str(&format!("- name: {name}\n  context:\n    cluster: {name}\n    user: {name}\n    namespace: default\n"));
    }
    s.push_str("users:\n");
    for (name, _) in clusters {
        s.push_str(&format!("- name: {name}\n  user: {{}}\n"));
    }
    s.push_str(&format!("current-context: {current}\npreferences: {{}}\n"));
    s
}
