//! Requests as the authorizer sees them, the way
//! `k8s.io/apiserver/pkg/endpoints/request/requestinfo.go` derives them.

use std::collections::HashMap;

use super::Attributes;
use crate::auth::UserInfo;

/// The authorizer attributes of a request, as `RequestInfoFactory.NewRequestInfo`
/// computes them (API prefixes `api` (groupless) and `apis`).
pub fn request_attributes(
    user: UserInfo,
    method: &str,
    path: &str,
    query: &HashMap<String, String>,
) -> Attributes {
    let mut info = Attributes {
        user: Some(user),
        verb: method.to_ascii_lowercase(),
        resource_request: false,
        path: path.to_string(),
        ..Default::default()
    };
    let trimmed = path.trim_matches('/');
    let mut parts: Vec<&str> = if trimmed.is_empty() {
        Vec::new()
    } else {
        trimmed.split('/').collect()
    };
    if parts.len() < 3 {
        return info;
    }
    let prefix = parts[0];
    if prefix != "api" && prefix != "apis" {
        return info;
    }
    parts.remove(0);
    if prefix == "apis" {
        if parts.len() < 3 {
            return info;
        }
        info.api_group = parts.remove(0).to_string();
    }
    info.resource_request = true;
    info.api_version = parts.remove(0).to_string();
    if parts[0] == "watch" || parts[0] == "proxy" {
        if parts.len() < 2 {
            return info;
        }
        info.verb = parts.remove(0).to_string();
    } else {
        info.verb = match method {
            "POST" => "create",
            "GET" | "HEAD" => "get",
            "PUT" => "update",
            "PATCH" => "patch",
            "DELETE" => "delete",
            _ => "",
        }
        .to_string();
    }
    if parts[0] == "namespaces" && parts.len() > 1 {
        info.namespace = parts[1].to_string();
        if parts.len() > 2 && !matches!(parts[2], "status" | "finalize") {
            parts.drain(..2);
        }
    }
    if parts.len() >= 3 && info.verb != "proxy" {
        info.subresource = parts[2].to_string();
    }
    if parts.len() >= 2 {
        info.name = parts[1].to_string();
    }
    info.resource = parts[0].to_string();

    if info.name.is_empty() && info.verb == "get" {
        info.verb = match query.get("watch").map(|w| w.to_ascii_lowercase()) {
            Some(w) if w != "false" && w != "0" => "watch",
            _ => "list",
        }
        .to_string();
        if let Some(name) = query
            .get("fieldSelector")
            .and_then(|s| exact_match(s, "metadata.name"))
        {
            if valid_path_segment_name(&name) {
                info.name = name;
            }
        }
    }
    if info.name.is_empty() && info.verb == "delete" {
        info.verb = "deletecollection".to_string();
    }
    info
}

/// `fields.Selector.RequiresExactMatch(field)`: the value of a `field=value`
/// or `field==value` term.
fn exact_match(selector: &str, field: &str) -> Option<String> {
    selector.split(',').find_map(|term| {
        let term = term.trim();
        if term.contains("!=") {
            return None;
        }
        let (key, value) = term.split_once("==").or_else(|| term.split_once('='))?;
        (key.trim() == field).then(|| value.trim().to_string())
    })
}

/// `path.IsValidPathSegmentName`.
fn valid_path_segment_name(name: &str) -> bool {
    name != "." && name != ".." && !name.contains('/') && !name.contains('%')
}
