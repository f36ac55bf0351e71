//! The bed's API-server audit log (every request of the operator's identity, see
//! `e2e/bed/bed.sh`) compared with RBAC rules: which granted permission no request used. Reads
//! the log file (IO); the matching is pure.

use anyhow::{Context as _, Result};
use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::Path;

/// One audited request, reduced to what RBAC authorizes.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Request {
    /// The RBAC verb: `get`, `list`, `watch`, `create`, `patch`, …
    pub verb: String,
    pub group: String,
    /// `resource` or `resource/subresource`.
    pub resource: String,
    pub namespace: Option<String>,
    pub name: Option<String>,
    /// The answer's HTTP status code.
    pub code: u16,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Event {
    stage: String,
    verb: String,
    user: User,
    object_ref: Option<ObjectRef>,
    response_status: Option<ResponseStatus>,
}

#[derive(Deserialize)]
struct User {
    username: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ObjectRef {
    resource: Option<String>,
    subresource: Option<String>,
    namespace: Option<String>,
    name: Option<String>,
    api_group: Option<String>,
}

#[derive(Deserialize)]
struct ResponseStatus {
    code: Option<u16>,
}

/// The size of the audit log now: read from here on to see only later requests.
pub fn offset(path: &Path) -> u64 {
    std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
}

/// The completed requests of `user` logged after `from` (a byte offset from [`offset`]).
pub fn requests_since(path: &Path, from: u64, user: &str) -> Result<Vec<Request>> {
    let text = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let start = usize::try_from(from).unwrap_or(usize::MAX).min(text.len());
    let text = String::from_utf8_lossy(&text[start..]);
    let mut out = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let event: Event = serde_json::from_str(line)
            .with_context(|| format!("an audit line that is not an event: {line}"))?;
        if event.user.username != user || event.stage != "ResponseComplete" {
            continue;
        }
        // Requests without an object (discovery, /version) need no RBAC rule on a resource.
        let Some(object) = event.object_ref else {
            continue;
        };
        let Some(resource) = object.resource else {
            continue;
        };
        let resource = match object.subresource {
            Some(sub) => format!("{resource}/{sub}"),
            None => resource,
        };
        out.push(Request {
            verb: event.verb,
            group: object.api_group.unwrap_or_default(),
            resource,
            namespace: object.namespace,
            name: object.name,
            code: event
                .response_status
                .and_then(|s| s.code)
                .unwrap_or_default(),
        });
    }
    Ok(out)
}

/// One permission a rule grants: a verb on a resource of a group, optionally in one namespace
/// and limited to some names.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Grant {
    /// The Role or ClusterRole that grants it.
    pub role: String,
    pub namespace: Option<String>,
    pub group: String,
    pub resource: String,
    pub verb: String,
    pub names: BTreeSet<String>,
}

impl std::fmt::Display for Grant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} grants {} on {}.{}",
            self.role,
            self.verb,
            self.resource,
            if self.group.is_empty() {
                "core"
            } else {
                &self.group
            }
        )?;
        if let Some(ns) = &self.namespace {
            write!(f, " in {ns}")?;
        }
        if !self.names.is_empty() {
            write!(f, " named {:?}", self.names)?;
        }
        Ok(())
    }
}

/// Every permission of the Roles and ClusterRoles among `documents`, one per verb and resource.
pub fn grants(documents: &[Value]) -> Vec<Grant> {
    let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    let list = |v: Option<&Value>| -> Vec<String> {
        v.and_then(Value::as_array)
            .map(|a| a.iter().map(text).collect())
            .unwrap_or_default()
    };
    let mut out = Vec::new();
    for doc in documents {
        let kind = doc["kind"].as_str().unwrap_or_default();
        if kind != "Role" && kind != "ClusterRole" {
            continue;
        }
        let role = format!("{kind} {}", text(&doc["metadata"]["name"]));
        let namespace = doc["metadata"]["namespace"].as_str().map(str::to_owned);
        for rule in doc["rules"].as_array().into_iter().flatten() {
            let names: BTreeSet<String> = list(rule.get("resourceNames")).into_iter().collect();
            for group in list(rule.get("apiGroups")) {
                for resource in list(rule.get("resources")) {
                    for verb in list(rule.get("verbs")) {
                        out.push(Grant {
                            role: role.clone(),
                            namespace: namespace.clone(),
                            group: group.clone(),
                            resource: resource.clone(),
                            verb,
                            names: names.clone(),
                        });
                    }
                }
            }
        }
    }
    out
}

/// Whether `request` used `grant`. A server-side apply that created its object (`patch`
/// answered 201) needed `create` too: the API server authorizes the create separately.
pub fn uses(request: &Request, grant: &Grant) -> bool {
    let verb_matches = request.verb == grant.verb
        || (grant.verb == "create" && request.verb == "patch" && request.code == 201);
    let namespace_matches = grant.namespace.is_none() || grant.namespace == request.namespace;
    let name_matches = grant.names.is_empty()
        || request
            .name
            .as_ref()
            .is_some_and(|n| grant.names.contains(n));
    verb_matches
        && request.group == grant.group
        && request.resource == grant.resource
        && namespace_matches
        && name_matches
        && authorized(request.code)
}

/// Whether the authorizer let a request through: anything but 401 and 403 (a 422 or 404 is
/// the API server's answer after authorization passed).
fn authorized(code: u16) -> bool {
    code != 401 && code != 403
}

/// The grants no request used.
pub fn unused<'a>(grants: &'a [Grant], requests: &[Request]) -> Vec<&'a Grant> {
    grants
        .iter()
        .filter(|g| !requests.iter().any(|r| uses(r, g)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn request(verb: &str, resource: &str, name: Option<&str>, code: u16) -> Request {
        Request {
            verb: verb.into(),
            group: "karpenter-health.io".into(),
            resource: resource.into(),
            namespace: None,
            name: name.map(str::to_owned),
            code,
        }
    }

    #[test]
    fn a_grant_is_used_only_by_a_matching_successful_request() {
        let roles = [json!({
            "kind": "ClusterRole", "metadata": {"name": "r"},
            "rules": [{"apiGroups": ["karpenter-health.io"], "resources": ["karpenterhealths"],
                       "verbs": ["create", "patch", "get"]}]
        })];
        let grants = grants(&roles);
        assert_eq!(grants.len(), 3);
        // An apply that created the object uses patch and create, never get.
        let applied = [request("patch", "karpenterhealths", Some("a"), 201)];
        let unused: Vec<&str> = unused(&grants, &applied)
            .iter()
            .map(|g| g.verb.as_str())
            .collect();
        assert_eq!(unused, ["get"]);
        // A request the authorizer refused uses nothing; one refused later (422) used its verb.
        let refused = [request("get", "karpenterhealths", Some("a"), 403)];
        assert_eq!(super::unused(&grants, &refused).len(), 3);
        let invalid = [request("get", "karpenterhealths", Some("a"), 422)];
        assert_eq!(super::unused(&grants, &invalid).len(), 2);
    }

    #[test]
    fn resource_names_and_namespaces_limit_what_a_request_uses() {
        let roles = [json!({
            "kind": "Role", "metadata": {"name": "r", "namespace": "kube-system"},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"],
                       "resourceNames": ["aws-auth"], "verbs": ["watch"]}]
        })];
        let grants = grants(&roles);
        let mut other = Request {
            verb: "watch".into(),
            group: String::new(),
            resource: "configmaps".into(),
            namespace: Some("kube-system".into()),
            name: Some("other".into()),
            code: 200,
        };
        assert_eq!(unused(&grants, std::slice::from_ref(&other)).len(), 1);
        other.name = Some("aws-auth".into());
        assert!(unused(&grants, std::slice::from_ref(&other)).is_empty());
        other.namespace = Some("default".into());
        assert_eq!(unused(&grants, &[other]).len(), 1);
    }

    #[test]
    fn audit_lines_of_other_users_and_stages_are_ignored() {
        let dir = std::env::temp_dir().join(format!("kh-audit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("audit.log");
        let line = |user: &str, stage: &str| {
            json!({"stage": stage, "verb": "watch", "user": {"username": user},
                   "objectRef": {"resource": "nodepools", "apiGroup": "karpenter.sh"},
                   "responseStatus": {"code": 200}})
            .to_string()
        };
        let text = [
            line("admin", "ResponseComplete"),
            line("op", "ResponseStarted"),
            line("op", "ResponseComplete"),
        ]
        .join("\n");
        std::fs::write(&path, text).unwrap();
        let requests = requests_since(&path, 0, "op").unwrap();
        assert_eq!(requests.len(), 1);
        assert_eq!(requests[0].resource, "nodepools");
        assert_eq!(requests_since(&path, offset(&path), "op").unwrap(), vec![]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
