//! The rollout runner's hands: requests to the host's own HTTP API, in
//! process (a clone of the host's router, called with
//! `tower::ServiceExt::oneshot` and the admin token). In a cluster the
//! router's routing layer forwards each group's request to the node that
//! coordinates it, so the same requests work on one host and in a
//! cluster. It owns the mapping of a [`Command`] to its request and of
//! an answer to the machine's outcome; nothing else.

use std::time::Duration;

use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use serde_json::{Value, json};
use tower::ServiceExt;

use crate::rollout::{Action, BindingRef, Command};

/// The largest answer read back (a group view of a large group).
const ANSWER_BYTES_MAX: usize = 64 << 20;
/// Attempts of a request answered "try again" (a shard moving between
/// nodes, a node that did not answer) before its failure is reported.
const TRANSIENT_ATTEMPTS_MAX: u32 = 10;
/// The wait between those attempts.
const TRANSIENT_RETRY: Duration = Duration::from_millis(300);

/// An answer: its status and its JSON body (`Null` if none).
pub struct Answer {
    pub status: StatusCode,
    pub body: Value,
}

impl Answer {
    /// `code: message` of an error answer.
    pub fn error(&self) -> String {
        let code = self.body["error"]["code"].as_str().unwrap_or("");
        let message = self.body["error"]["message"].as_str().unwrap_or("");
        format!("{} {code}: {message}", self.status.as_u16())
    }

    fn code(&self) -> &str {
        self.body["error"]["code"].as_str().unwrap_or("")
    }

    /// A group that does not exist (any more).
    pub fn unknown_group(&self) -> bool {
        self.status == StatusCode::NOT_FOUND && self.code() == "unknown_group"
    }
}

/// The host's router and the token its admin routes take.
#[derive(Clone)]
pub struct InProcess {
    router: axum::Router,
    authorization: String,
}

impl InProcess {
    pub fn new(router: axum::Router, admin_token: &str) -> Self {
        InProcess {
            router,
            authorization: format!("Bearer {admin_token}"),
        }
    }

    /// One request, retried while it is answered "try again" (503, or a
    /// 307 of a shard on its way to another node).
    pub async fn call(&self, method: Method, path: &str, body: Option<&Value>) -> Answer {
        let mut attempt = 1;
        loop {
            let answer = self.once(method.clone(), path, body).await;
            let transient = matches!(
                answer.status,
                StatusCode::SERVICE_UNAVAILABLE | StatusCode::TEMPORARY_REDIRECT
            );
            if !transient || attempt >= TRANSIENT_ATTEMPTS_MAX {
                return answer;
            }
            attempt += 1;
            tokio::time::sleep(TRANSIENT_RETRY).await;
        }
    }

    async fn once(&self, method: Method, path: &str, body: Option<&Value>) -> Answer {
        let mut request = Request::builder()
            .method(method)
            .uri(path)
            .header(header::AUTHORIZATION, &self.authorization);
        let body = match body {
            Some(body) => {
                request = request.header(header::CONTENT_TYPE, "application/json");
                Body::from(body.to_string())
            }
            None => Body::empty(),
        };
        let request = request
            .body(body)
            .expect("a request of a path the runner built");
        let response = match self.router.clone().oneshot(request).await {
            Ok(response) => response,
            Err(never) => match never {},
        };
        let status = response.status();
        let bytes = axum::body::to_bytes(response.into_body(), ANSWER_BYTES_MAX)
            .await
            .unwrap_or_default();
        let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        Answer { status, body }
    }

    /// A group's view; `None` if the group does not exist.
    pub async fn group(&self, group: &str) -> Result<Option<Value>, String> {
        let answer = self.call(Method::GET, &group_path(group, ""), None).await;
        match answer.status {
            StatusCode::OK => Ok(Some(answer.body)),
            _ if answer.unknown_group() => Ok(None),
            _ => Err(answer.error()),
        }
    }

    /// The names of every group (every node's, in a cluster).
    pub async fn group_names(&self) -> Result<Vec<String>, String> {
        let answer = self.call(Method::GET, "/v1/groups", None).await;
        if answer.status != StatusCode::OK {
            return Err(answer.error());
        }
        let groups = answer.body["groups"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        Ok(groups
            .iter()
            .filter_map(|g| g["name"].as_str().map(str::to_owned))
            .collect())
    }

    /// The assignor `module` names, if the host has it: `Ok(false)` for
    /// an unknown one.
    pub async fn module_exists(&self, module: &str) -> Result<bool, String> {
        let path = format!("/v1/assignors/{}", segment(module));
        let answer = self.call(Method::GET, &path, None).await;
        match answer.status {
            StatusCode::OK => Ok(true),
            StatusCode::NOT_FOUND => Ok(false),
            _ => Err(answer.error()),
        }
    }

    /// Performs `command`: the machine's outcome of it. A group deleted
    /// meanwhile has nothing to put back (a restore or unshadow is done)
    /// and cannot take the module (a shadow or bind is refused).
    pub async fn perform(&self, command: &Command) -> Result<(), String> {
        let (method, path, body) = request_of(command);
        let answer = self.call(method, &path, body.as_ref()).await;
        let reverting = matches!(
            command.action,
            Action::Restore { .. } | Action::Unshadow { .. }
        );
        if answer.status.is_success() || (reverting && answer.unknown_group()) {
            Ok(())
        } else {
            Err(answer.error())
        }
    }
}

/// The request that performs `command`.
fn request_of(command: &Command) -> (Method, String, Option<Value>) {
    let shadow = group_path(&command.group, "/shadow");
    let assignor = group_path(&command.group, "/assignor");
    match &command.action {
        Action::Shadow { module, params } => (
            Method::PUT,
            shadow,
            Some(json!({"assignor": module, "params": params})),
        ),
        Action::Unshadow { restore: None } => (Method::DELETE, shadow, None),
        Action::Unshadow {
            restore: Some(binding),
        } => (
            Method::PUT,
            shadow,
            Some(json!({
                "assignor": binding.assignor,
                "params": binding.params,
                "limits": binding.limits,
            })),
        ),
        Action::Bind { binding } | Action::Restore { binding } => {
            (Method::PUT, assignor, Some(bind_body(binding)))
        }
    }
}

fn bind_body(binding: &BindingRef) -> Value {
    json!({
        "module": binding.assignor,
        "params": binding.params,
        "limits": binding.limits,
        "fallback": binding.fallback,
    })
}

fn group_path(group: &str, rest: &str) -> String {
    format!("/v1/groups/{}{rest}", segment(group))
}

/// `text` as one path segment: every byte but the unreserved ones
/// percent-encoded.
pub fn segment(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    #[test]
    fn each_action_is_one_request_naming_its_result_in_full() {
        let binding = BindingRef {
            assignor: "sticky".into(),
            params: BTreeMap::from([("a".into(), "1".into())]),
            limits: Default::default(),
            fallback: Some("range".into()),
        };
        let command = |action| Command {
            id: 1,
            group: "g 1".into(),
            action,
        };
        let (method, path, body) = request_of(&command(Action::Unshadow { restore: None }));
        assert_eq!(
            (method, path.as_str(), body),
            (Method::DELETE, "/v1/groups/g%201/shadow", None)
        );
        let (method, path, body) = request_of(&command(Action::Restore {
            binding: binding.clone(),
        }));
        assert_eq!(
            (method, path.as_str()),
            (Method::PUT, "/v1/groups/g%201/assignor")
        );
        let body = body.unwrap();
        assert_eq!(
            (body["module"].as_str(), body["fallback"].as_str()),
            (Some("sticky"), Some("range"))
        );
        let (_, path, body) = request_of(&command(Action::Unshadow {
            restore: Some(binding),
        }));
        assert_eq!(path, "/v1/groups/g%201/shadow");
        assert_eq!(body.unwrap()["assignor"], "sticky");
    }
}
