//! kubeconfig files for simulated clusters: one context per cluster, plain
//! HTTP, no credentials (`user: {}`) or a bearer token (`user: {token: …}`).

/// A kubeconfig with a context per `(name, server URL)`, the current one being
/// `current`, without credentials.
pub fn render(clusters: &[(String, String)], current: &str) -> String {
    let entries: Vec<(String, String, Option<String>)> = clusters
        .iter()
        .map(|(name, url)| (name.clone(), url.clone(), None))
        .collect();
    render_with_tokens(&entries, current)
}

/// A kubeconfig with a context per `(name, server URL, bearer token)`; a user
/// without a token has no credentials.
pub fn render_with_tokens(clusters: &[(String, String, Option<String>)], current: &str) -> String {
    let mut s = String::from("apiVersion: v1\nkind: Config\nclusters:\n");
    for (name, url, _) in clusters {
        s.push_str(&format!("- name: {name}\n  cluster:\n    server: {url}\n"));
    }
    s.push_str("contexts:\n");
    for (name, _, _) in clusters {
        s.push_str(&format!("- name: {name}\n  context:\n    cluster: {name}\n    user: {name}\n    namespace: default\n"));
    }
    s.push_str("users:\n");
    for (name, _, token) in clusters {
        match token {
            Some(token) => s.push_str(&format!("- name: {name}\n  user:\n    token: {token}\n")),
            None => s.push_str(&format!("- name: {name}\n  user: {{}}\n")),
        }
    }
    s.push_str(&format!("current-context: {current}\npreferences: {{}}\n"));
    s
}
