//! `assignd assignor …`, `assignd group …` and `assignd rollout …`
//! (`remote/rollout.rs`): the admin routes of a
//! running host from the command line, over a blocking HTTP client. Each
//! subcommand is one request; a JSON answer is pretty-printed on stdout, an
//! error answer becomes one `error: CODE: MESSAGE` line and exit 1, and so
//! does a host that cannot be reached.
//!
//! It owns the requests and their printing only: it never reads a data
//! directory or the protocol core, and it knows the routes only by their
//! paths (docs/architecture.md, "HTTP API").

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{Args, Subcommand};
use serde_json::{Map, Value, json};

use super::{EXIT_BAD_INPUT, Failure};

mod rollout;
mod shadow;

pub use rollout::{RolloutArgs, rollout};

/// Where the host is when neither `--host` nor `ASSIGND_HOST` says.
pub const DEFAULT_HOST: &str = "http://127.0.0.1:7070";

/// The largest answer read from the host: a group view of 100,000 tasks is
/// a few MiB.
const ANSWER_BYTES_MAX: u64 = 256 * 1024 * 1024;
// Whatever a node passes back from another, the CLI reads.
const _: () = assert!(ANSWER_BYTES_MAX >= crate::api::routing::FORWARDED_ANSWER_BYTES_MAX as u64);

/// How much of an answer that is not the JSON error body is quoted.
const QUOTE_CHARS_MAX: usize = 200;

/// Which host to talk to and how; every remote subcommand takes these,
/// before or after its own arguments.
#[derive(Debug, Args)]
pub struct HostArgs {
    /// The host's base URL.
    #[arg(long = "host", env = "ASSIGND_HOST", default_value = DEFAULT_HOST,
          value_name = "URL", value_parser = parse_host, global = true)]
    host: String,
    /// Admin token, sent as `Authorization: Bearer TOKEN`.
    #[arg(
        long,
        env = "ASSIGND_TOKEN",
        value_name = "TOKEN",
        hide_env_values = true,
        global = true
    )]
    token: Option<String>,
    /// How long to wait for each answer (an upload is validated and
    /// compiled before it is answered).
    #[arg(long, value_name = "MS", default_value_t = 120_000, global = true,
          value_parser = clap::value_parser!(u64).range(1..))]
    timeout_ms: u64,
}

#[derive(Debug, Args)]
pub struct AssignorArgs {
    #[command(flatten)]
    host: HostArgs,
    #[command(subcommand)]
    command: AssignorCommand,
}

#[derive(Debug, Subcommand)]
enum AssignorCommand {
    /// Upload a component: the host validates it (load, info, self-test)
    /// and answers its id (sha256), name, version and info.
    Upload {
        /// The component file.
        #[arg(value_name = "FILE.wasm")]
        file: PathBuf,
        /// The module's name (no '@' or '/').
        #[arg(long)]
        name: String,
        /// The module's version (no '@' or '/').
        #[arg(long)]
        version: String,
    },
    /// Every assignor: the four built-ins and every uploaded module.
    List,
    /// One assignor, by module id, name@version, or built-in name.
    Show {
        #[arg(value_name = "REF")]
        reference: String,
    },
    /// Delete an uploaded module (by id or name@version); refused while a
    /// group is bound to it.
    Delete {
        #[arg(value_name = "REF")]
        reference: String,
    },
}

#[derive(Debug, Args)]
pub struct GroupArgs {
    #[command(flatten)]
    host: HostArgs,
    #[command(subcommand)]
    command: GroupCommand,
}

#[derive(Debug, Subcommand)]
enum GroupCommand {
    /// Create a group or replace its config, from a JSON file, from flags,
    /// or from a file with flags overriding it.
    Create {
        name: String,
        /// The group config (JSON), or - for standard input.
        #[arg(long, value_name = "FILE.json", required_unless_present = "topics")]
        config: Option<PathBuf>,
        /// A topic and its partition count; repeatable. Replaces the
        /// config file's topics.
        #[arg(long = "topic", value_name = "NAME:PARTITIONS", value_parser = parse_topic)]
        topics: Vec<(String, u32)>,
        /// The assignor: a built-in name, a module id, or name@version.
        /// Replaces the config file's.
        #[arg(long, value_name = "REF")]
        assignor: Option<String>,
    },
    /// A group's config, epochs, members, targets and learners.
    Show { name: String },
    /// Every group, one summary each.
    List,
    /// Ask a member (id or static name) to drain: its tasks move once
    /// learners elsewhere caught up.
    Drain { name: String, member: String },
    /// Hot-swap the group's assignor: the next target is computed with it
    /// at once and reached cooperatively.
    Bind {
        name: String,
        /// A built-in name, a module id, or name@version.
        module: String,
        /// An assignor param; repeatable.
        #[arg(long = "param", value_name = "KEY=VALUE", value_parser = parse_param)]
        params: Vec<(String, String)>,
        /// An assignor that answers when this one fails (the failure still
        /// shows on the group).
        #[arg(long, value_name = "REF")]
        fallback: Option<String>,
        /// Fuel one call may burn, under the host's ceiling.
        #[arg(long, value_name = "UNITS")]
        fuel_max: Option<u64>,
        /// Wall-clock limit of one call, under the host's ceiling.
        #[arg(long, value_name = "MS")]
        time_limit_ms: Option<u64>,
        /// Memory the guest may grow to, under the host's ceiling.
        #[arg(long, value_name = "MIB")]
        memory_max_mib: Option<u64>,
    },
    /// Return to the group's previous binding (twice toggles back).
    Rollback { name: String },
    /// Run a candidate assignor on the group's current input without
    /// applying it: its assignment, the moves, learners and tasks held
    /// back the host would make, and the balance before and after.
    Preview {
        name: String,
        /// A built-in name, a module id, or name@version.
        module: String,
        /// An assignor param; repeatable. None given: the group's current
        /// params.
        #[arg(long = "param", value_name = "KEY=VALUE", value_parser = parse_param)]
        params: Vec<(String, String)>,
    },
    /// A shadow assignor beside the group's live one: asked the same input
    /// every time, compared, never applied. `NAME REF` binds it, `--off`
    /// ends it, `--promote` binds it live; `NAME` alone shows its
    /// comparisons.
    Shadow(shadow::ShadowArgs),
}

fn parse_param(value: &str) -> Result<(String, String), String> {
    let (key, value) = value
        .split_once('=')
        .ok_or_else(|| format!("expected KEY=VALUE, got {value:?}"))?;
    if key.is_empty() {
        return Err("a param needs a key".into());
    }
    Ok((key.to_owned(), value.to_owned()))
}

fn failure(message: String) -> Failure {
    Failure {
        message,
        exit_code: EXIT_BAD_INPUT,
    }
}

fn parse_host(value: &str) -> Result<String, String> {
    let trimmed = value.trim_end_matches('/');
    let rest = trimmed
        .strip_prefix("http://")
        .or_else(|| trimmed.strip_prefix("https://"))
        .ok_or_else(|| format!("expected a URL like {DEFAULT_HOST}, got {value:?}"))?;
    if rest.is_empty() || rest.contains(['/', '?', '#']) {
        return Err(format!(
            "expected a URL like {DEFAULT_HOST} (scheme, host and port only), got {value:?}"
        ));
    }
    Ok(trimmed.to_owned())
}

fn parse_topic(value: &str) -> Result<(String, u32), String> {
    let (name, partitions) = value
        .rsplit_once(':')
        .ok_or_else(|| format!("expected NAME:PARTITIONS, got {value:?}"))?;
    if name.is_empty() {
        return Err(format!("expected NAME:PARTITIONS, got {value:?}"));
    }
    let partitions = partitions
        .parse()
        .map_err(|e| format!("partitions of {name:?}: {e}"))?;
    Ok((name.to_owned(), partitions))
}

/// Percent-encodes `value` for a path segment or a query value: everything
/// but RFC 3986's unreserved characters (and `@`, kept readable in
/// `name@version` path segments).
fn encode(value: &str, keep_at: bool) -> String {
    let mut out = String::with_capacity(value.len());
    for byte in value.bytes() {
        let keep = byte.is_ascii_alphanumeric()
            || matches!(byte, b'-' | b'.' | b'_' | b'~')
            || (keep_at && byte == b'@');
        if keep {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

fn segment(value: &str) -> String {
    encode(value, true)
}

/// One host, one agent: every request of a subcommand goes through it.
struct Remote {
    agent: ureq::Agent,
    base: String,
    token: Option<String>,
    timeout_ms: u64,
}

impl Remote {
    fn new(args: HostArgs) -> Remote {
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_millis(args.timeout_ms)))
            .build()
            .into();
        Remote {
            agent,
            base: args.host,
            token: args.token,
            timeout_ms: args.timeout_ms,
        }
    }

    fn authorize<B>(&self, request: ureq::RequestBuilder<B>) -> ureq::RequestBuilder<B> {
        match &self.token {
            Some(token) => request.header("authorization", format!("Bearer {token}")),
            None => request,
        }
    }

    fn get(&self, path: &str) -> Result<Option<Value>, Failure> {
        let url = format!("{}{path}", self.base);
        self.answer(self.authorize(self.agent.get(&url)).call())
    }

    fn delete(&self, path: &str) -> Result<Option<Value>, Failure> {
        let url = format!("{}{path}", self.base);
        self.answer(self.authorize(self.agent.delete(&url)).call())
    }

    fn put_json(&self, path: &str, body: &Value) -> Result<Option<Value>, Failure> {
        let url = format!("{}{path}", self.base);
        self.answer(self.authorize(self.agent.put(&url)).send_json(body))
    }

    fn post(&self, path: &str, body: Option<(&str, &[u8])>) -> Result<Option<Value>, Failure> {
        let url = format!("{}{path}", self.base);
        let request = self.authorize(self.agent.post(&url));
        let response = match body {
            Some((content_type, bytes)) => request.header("content-type", content_type).send(bytes),
            None => request.send_empty(),
        };
        self.answer(response)
    }

    /// The answer's JSON (`None` for an empty body, as a 204 has), or the
    /// failure to print: the host's `{"error": {"code", "message"}}` as
    /// `CODE: MESSAGE`, or why no answer came.
    fn answer(
        &self,
        response: Result<ureq::http::Response<ureq::Body>, ureq::Error>,
    ) -> Result<Option<Value>, Failure> {
        let mut response = response.map_err(|e| self.transport_failure(e))?;
        let status = response.status();
        let text = response
            .body_mut()
            .with_config()
            .limit(ANSWER_BYTES_MAX)
            .read_to_string()
            .map_err(|e| self.transport_failure(e))?;
        if !status.is_success() {
            let mut line = error_line(status.as_u16(), &text);
            if let Some(hint) = token_hint(status.as_u16(), self.token.is_some()) {
                line = format!("{line}; {hint}");
            }
            return Err(failure(line));
        }
        if text.trim().is_empty() {
            return Ok(None);
        }
        serde_json::from_str(&text).map(Some).map_err(|e| {
            failure(format!(
                "the host answered {} with a body that is not JSON ({e}): {}",
                status.as_u16(),
                quote(&text)
            ))
        })
    }

    fn transport_failure(&self, error: ureq::Error) -> Failure {
        failure(match error {
            ureq::Error::Timeout(_) => format!(
                "the host at {} did not answer within {} ms",
                self.base, self.timeout_ms
            ),
            error => format!("cannot reach the host at {}: {error}", self.base),
        })
    }
}

/// `CODE: MESSAGE` from the JSON error body, or the status and a quote of
/// whatever else came.
fn error_line(status: u16, text: &str) -> String {
    let parsed: Option<Value> = serde_json::from_str(text).ok();
    let error = parsed.as_ref().and_then(|v| v.get("error"));
    let code = error.and_then(|e| e.get("code")).and_then(Value::as_str);
    let message = error.and_then(|e| e.get("message")).and_then(Value::as_str);
    match (code, message) {
        (Some(code), Some(message)) => format!("{code}: {message}"),
        (Some(code), None) => format!("{code} (HTTP {status})"),
        _ if text.trim().is_empty() => format!("HTTP {status} with an empty body"),
        _ => format!("HTTP {status}: {}", quote(text)),
    }
}

/// What to do about a refused token: 401 (none sent) or 403 (another).
fn token_hint(status: u16, sent: bool) -> Option<&'static str> {
    match (status, sent) {
        (401, false) => Some(
            "pass --token or set ASSIGND_TOKEN to the host's admin token \
             (`assignd serve` printed where its token file is: DATA_DIR/admin-token)",
        ),
        (401, true) => Some("the token sent is empty; check --token / ASSIGND_TOKEN"),
        (403, _) => Some(
            "--token / ASSIGND_TOKEN is not this host's admin token \
             (see --admin-token, ASSIGND_ADMIN_TOKEN or DATA_DIR/admin-token on the host)",
        ),
        _ => None,
    }
}

fn quote(text: &str) -> String {
    let text = text.trim();
    match text.char_indices().nth(QUOTE_CHARS_MAX) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}

fn print(answer: Option<Value>) {
    if let Some(value) = answer {
        let text = serde_json::to_string_pretty(&value).expect("a JSON value always serializes");
        outln!("{text}");
    }
}

pub fn assignor(args: AssignorArgs) -> Result<(), Failure> {
    let remote = Remote::new(args.host);
    let answer = match args.command {
        AssignorCommand::Upload {
            file,
            name,
            version,
        } => {
            // Refused here rather than by the host, which closes the
            // connection at the declared length: the CLI would then report
            // the broken pipe of its write, not the host's 413.
            let len = std::fs::metadata(&file)
                .map_err(|e| failure(format!("cannot read {}: {e}", file.display())))?
                .len();
            let len_max = crate::registry::MODULE_UPLOAD_BYTES_MAX;
            if len > len_max as u64 {
                return Err(failure(format!(
                    "payload_too_large: {} is {len} bytes; a module may be at most {len_max} bytes ({} MiB)",
                    file.display(),
                    len_max >> 20
                )));
            }
            let bytes = std::fs::read(&file)
                .map_err(|e| failure(format!("cannot read {}: {e}", file.display())))?;
            let path = format!(
                "/v1/assignors?name={}&version={}",
                encode(&name, false),
                encode(&version, false)
            );
            remote.post(&path, Some(("application/wasm", &bytes)))?
        }
        AssignorCommand::List => remote.get("/v1/assignors")?,
        AssignorCommand::Show { reference } => {
            remote.get(&format!("/v1/assignors/{}", segment(&reference)))?
        }
        AssignorCommand::Delete { reference } => {
            remote.delete(&format!("/v1/assignors/{}", segment(&reference)))?
        }
    };
    print(answer);
    Ok(())
}

pub fn group(args: GroupArgs) -> Result<(), Failure> {
    let remote = Remote::new(args.host);
    let answer = match args.command {
        GroupCommand::Create {
            name,
            config,
            topics,
            assignor,
        } => {
            let config = group_config(config.as_deref(), &topics, assignor)?;
            remote.put_json(&format!("/v1/groups/{}", segment(&name)), &config)?
        }
        GroupCommand::Show { name } => remote.get(&format!("/v1/groups/{}", segment(&name)))?,
        GroupCommand::List => remote.get("/v1/groups")?,
        GroupCommand::Drain { name, member } => remote.post(
            &format!(
                "/v1/groups/{}/members/{}/drain",
                segment(&name),
                segment(&member)
            ),
            None,
        )?,
        GroupCommand::Bind {
            name,
            module,
            params,
            fallback,
            fuel_max,
            time_limit_ms,
            memory_max_mib,
        } => remote.put_json(
            &format!("/v1/groups/{}/assignor", segment(&name)),
            &bind_body(
                module,
                params,
                fallback,
                [
                    ("fuel_max", fuel_max),
                    ("time_limit_ms", time_limit_ms),
                    ("memory_max_mib", memory_max_mib),
                ],
            ),
        )?,
        GroupCommand::Rollback { name } => remote.post(
            &format!("/v1/groups/{}/assignor/rollback", segment(&name)),
            None,
        )?,
        GroupCommand::Shadow(shadow) => return shadow::shadow(&remote, shadow),
        GroupCommand::Preview {
            name,
            module,
            params,
        } => remote.post(
            &format!("/v1/groups/{}/assignor/preview", segment(&name)),
            Some((
                "application/json",
                preview_body(module, params).to_string().as_bytes(),
            )),
        )?,
    };
    print(answer);
    Ok(())
}

/// The body of `group bind`: the module, its params as strings, the
/// fallback, and only the limits given (an absent one is the host's
/// ceiling).
fn bind_body(
    module: String,
    params: Vec<(String, String)>,
    fallback: Option<String>,
    limits: [(&str, Option<u64>); 3],
) -> Value {
    let params: serde_json::Map<String, Value> = params
        .into_iter()
        .map(|(k, v)| (k, Value::String(v)))
        .collect();
    let limits: serde_json::Map<String, Value> = limits
        .into_iter()
        .filter_map(|(key, value)| Some((key.to_owned(), Value::from(value?))))
        .collect();
    serde_json::json!({
        "module": module, "params": params, "limits": limits, "fallback": fallback,
    })
}

/// The body of `group preview`: the module, and its params as strings if
/// any were given (none: the group's current ones).
fn preview_body(module: String, params: Vec<(String, String)>) -> Value {
    let mut body = serde_json::json!({"module": module});
    if !params.is_empty() {
        let params: serde_json::Map<String, Value> = params
            .into_iter()
            .map(|(k, v)| (k, Value::String(v)))
            .collect();
        body["params"] = Value::Object(params);
    }
    body
}

/// The config to PUT: the file's object (if any) with `--topic` and
/// `--assignor` replacing its fields. The host checks the rest.
fn group_config(
    file: Option<&Path>,
    topics: &[(String, u32)],
    assignor: Option<String>,
) -> Result<Value, Failure> {
    let mut config = match file {
        Some(path) => read_config(path)?,
        None => Map::new(),
    };
    if !topics.is_empty() {
        let topics = topics
            .iter()
            .map(|(name, partitions)| json!({"name": name, "partitions": partitions}))
            .collect();
        config.insert("topics".into(), Value::Array(topics));
    }
    if let Some(assignor) = assignor {
        config.insert("assignor".into(), Value::String(assignor));
    }
    Ok(Value::Object(config))
}

fn read_config(path: &Path) -> Result<Map<String, Value>, Failure> {
    let mut text = String::new();
    let read = if path == Path::new("-") {
        std::io::stdin().read_to_string(&mut text).map(|_| ())
    } else {
        std::fs::read_to_string(path).map(|t| text = t)
    };
    read.map_err(|e| failure(format!("cannot read config {}: {e}", path.display())))?;
    match serde_json::from_str(&text) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(failure(format!(
            "config {}: expected a JSON object",
            path.display()
        ))),
        Err(e) => Err(failure(format!("config {}: {e}", path.display()))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_urls_are_checked_and_trimmed() {
        assert_eq!(
            parse_host("http://127.0.0.1:7070/"),
            Ok("http://127.0.0.1:7070".into())
        );
        assert_eq!(
            parse_host("https://coord.example"),
            Ok("https://coord.example".into())
        );
        assert!(parse_host("127.0.0.1:7070").is_err());
        assert!(parse_host("http://").is_err());
        assert!(parse_host("http://host:1/v1").is_err());
    }

    #[test]
    fn topics_are_name_colon_partitions() {
        assert_eq!(parse_topic("orders:12"), Ok(("orders".into(), 12)));
        assert_eq!(parse_topic("a:b:3"), Ok(("a:b".into(), 3)));
        assert!(parse_topic("orders").is_err());
        assert!(parse_topic(":3").is_err());
        assert!(parse_topic("orders:-1").is_err());
    }

    #[test]
    fn path_segments_and_query_values_are_percent_encoded() {
        assert_eq!(segment("mine@1.0.0"), "mine@1.0.0");
        assert_eq!(segment("a b/c"), "a%20b%2Fc");
        assert_eq!(encode("x@1&y=2", false), "x%401%26y%3D2");
        assert_eq!(encode("é", false), "%C3%A9");
    }

    #[test]
    fn error_answers_become_one_line() {
        assert_eq!(
            error_line(
                404,
                r#"{"error":{"code":"unknown_group","message":"no group \"x\""}}"#
            ),
            r#"unknown_group: no group "x""#
        );
        assert_eq!(error_line(502, ""), "HTTP 502 with an empty body");
        assert!(token_hint(401, false).unwrap().contains("ASSIGND_TOKEN"));
        assert!(token_hint(403, true).unwrap().contains("admin token"));
        assert_eq!(token_hint(404, true), None);
        assert_eq!(error_line(502, "Bad Gateway\n"), "HTTP 502: Bad Gateway");
    }

    #[test]
    fn flags_replace_the_config_files_fields() {
        let dir = std::env::temp_dir().join(format!("assignd-remote-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("group.json");
        std::fs::write(
            &file,
            r#"{"topics":[{"name":"old","partitions":1}],"assignor":"range","max_learners":3}"#,
        )
        .unwrap();
        let config = group_config(
            Some(&file),
            &[("orders".into(), 12), ("refunds".into(), 2)],
            Some("sticky".into()),
        )
        .unwrap();
        assert_eq!(
            config,
            json!({
                "topics": [{"name": "orders", "partitions": 12}, {"name": "refunds", "partitions": 2}],
                "assignor": "sticky",
                "max_learners": 3,
            })
        );
        let untouched = group_config(Some(&file), &[], None).unwrap();
        assert_eq!(untouched["assignor"], "range");
        std::fs::write(&file, "[1]").unwrap();
        let refused = group_config(Some(&file), &[], None).unwrap_err();
        assert!(refused.message.contains("expected a JSON object"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
