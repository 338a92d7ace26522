//! The docs kept true by the code: docs/log-format.md's data dir layout
//! against a data dir the real binary wrote, and its format versions
//! against the log's constants; docs/architecture.md's heartbeat answer
//! against the OpenAPI document; the routes the README and the OpenAPI
//! document say are open against the routes that are; the upload cap
//! everywhere it is written against the registry's; the files and
//! functions docs/architecture.md's tour names against the source.

use crate::common;

use std::path::Path;

use crate::common::Server;
use serde_json::{Value, json};

fn read_doc(name: &str) -> String {
    let path = common::workspace_root().join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The documented data dir: one pattern per entry of the layout's tree,
/// a path relative to DIR, its names' digits and `<…>` placeholders
/// standing for any such ([`matches`]).
fn documented_layout() -> Vec<Vec<String>> {
    let text = read_doc("docs/log-format.md");
    let tree = text
        .split("## Data dir layout")
        .nth(1)
        .and_then(|rest| rest.split("```text\n").nth(1))
        .and_then(|rest| rest.split("```").next())
        .expect("a text block under \"Data dir layout\"");
    let mut folders: Vec<String> = Vec::new();
    let mut patterns = Vec::new();
    for line in tree.lines().skip(1) {
        let depth = (line.len() - line.trim_start().len()) / 2 - 1;
        // The name, then its description after a run of spaces.
        let name = line.trim_start().split("  ").next().expect("a name");
        if name == "…" {
            continue;
        }
        let name = name.trim_end_matches('/').to_owned();
        folders.truncate(depth);
        folders.push(name);
        patterns.push(folders.clone());
    }
    patterns
}

/// Whether the path `entry` fits `pattern`: as many names, each equal but
/// for a digit, which stands for any digit, and `<sha256>` and `<16 hex
/// digits>`, for that many hex digits.
fn matches(pattern: &[String], entry: &str) -> bool {
    let names: Vec<&str> = entry.split('/').collect();
    names.len() == pattern.len() && pattern.iter().zip(names).all(|(p, n)| name_fits(p, n))
}

fn name_fits(pattern: &str, name: &str) -> bool {
    let hex = |name: &str, n: usize| {
        name.len() >= n
            && name[..n]
                .bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
    };
    for (placeholder, len) in [("<sha256>", 64), ("<16 hex digits>", 16)] {
        if let Some(rest) = pattern.strip_prefix(placeholder) {
            return hex(name, len) && name_fits(rest, &name[len..]);
        }
    }
    match (pattern.chars().next(), name.chars().next()) {
        (None, None) => true,
        (Some(p), Some(n)) if p == n || (p.is_ascii_digit() && n.is_ascii_digit()) => {
            name_fits(&pattern[p.len_utf8()..], &name[n.len_utf8()..])
        }
        _ => false,
    }
}

/// Every file and folder under `dir`, relative, `/`-separated.
fn entries(dir: &Path, prefix: &str, out: &mut Vec<String>) {
    for entry in std::fs::read_dir(dir).expect("a folder") {
        let entry = entry.expect("an entry");
        let name = format!("{prefix}{}", entry.file_name().to_string_lossy());
        if entry.file_type().expect("a type").is_dir() {
            entries(&entry.path(), &format!("{name}/"), out);
        }
        out.push(name);
    }
}

/// Every file and folder `serve` writes is in docs/log-format.md's
/// layout, and the layout's fixed parts are what it writes.
#[test]
fn the_data_dir_is_the_documented_layout() {
    let data_dir = common::scratch("docs-layout");
    let server = Server::start(&data_dir, &["--shards", "3"]);
    let config = json!({"topics": [{"name": "orders", "partitions": 4}]});
    let (status, answer) = server.call("PUT", "/v1/groups/orders", Some(&config));
    assert_eq!(status, 201, "{answer}");
    let guest = std::fs::read(common::bad_guest("test-guest-spin-when-told")).expect("a guest");
    let (status, answer) = server.upload("spin", "1", &guest);
    assert_eq!(status, 201, "{answer}");
    drop(server);

    let patterns = documented_layout();
    let mut found = Vec::new();
    entries(&data_dir, "", &mut found);
    for entry in &found {
        assert!(
            patterns.iter().any(|p| matches(p, entry)),
            "{entry} is not in docs/log-format.md's layout: {patterns:?}"
        );
    }
    for written in [
        "LOCK",
        "shards/SHARD_COUNT",
        "shards/0000/HEAD",
        "shards/0002/00000000000000000000.seg",
        "modules",
        "cache",
    ] {
        assert!(found.iter().any(|e| e == written), "{written}: {found:?}");
    }
    let count = std::fs::read_to_string(data_dir.join("shards/SHARD_COUNT")).unwrap();
    assert_eq!(count.trim(), "3");
    let max = assignd::protocol::shard::SHARD_COUNT_MAX;
    assert!(
        read_doc("docs/log-format.md").contains(&format!("shard count in decimal (1 to {max})")),
        "the documented shard count range is 1 to {max}"
    );
}

/// The format versions docs/log-format.md gives are the log's: the one
/// written and the range read.
#[test]
fn the_documented_format_versions_are_the_logs() {
    use assignd::log::frame::{FORMAT_VERSION, FORMAT_VERSION_MIN};
    let text = read_doc("docs/log-format.md");
    let previous = FORMAT_VERSION - 1;
    for said in [
        format!(
            "format version: `{FORMAT_VERSION}` (`{FORMAT_VERSION_MIN}` to `{previous}` are still read"
        ),
        format!(
            "the version is one this assignd reads\n({FORMAT_VERSION_MIN} to {FORMAT_VERSION})"
        ),
        format!("Every frame carries the format version, today `{FORMAT_VERSION}`"),
    ] {
        assert!(text.contains(&said), "docs/log-format.md says {said:?}");
    }
    // Any other range of versions read names these ends.
    let from = format!("{FORMAT_VERSION_MIN} to ");
    for (at, _) in text.match_indices(&from) {
        let mut after = text[at + from.len()..].chars();
        let high = after.next().unwrap_or(' ');
        // A version is one digit; `1 to 1024` is no range of versions.
        if high.is_ascii_digit() && !after.next().is_some_and(|c| c.is_ascii_digit()) {
            assert!(
                [previous, FORMAT_VERSION].contains(&(high as u8 - b'0')),
                "a stale range: {}",
                &text[at.saturating_sub(40)..at + from.len() + 1]
            );
        }
    }
    assert!(!text.contains("1, 2 or 3"), "a stale list of versions");
}

/// The OpenAPI document of the real binary.
fn openapi(server: &Server) -> Value {
    let (status, doc) = server.call("GET", "/v1/openapi.json", None);
    assert_eq!(status, 200);
    doc
}

/// `#/components/schemas/NAME` resolved in `doc`, else `schema` itself.
fn resolved<'a>(doc: &'a Value, schema: &'a Value) -> &'a Value {
    match schema["$ref"].as_str() {
        Some(reference) => {
            let name = reference.rsplit('/').next().unwrap();
            &doc["components"]["schemas"][name]
        }
        None => schema,
    }
}

/// docs/architecture.md's route table gives every field the heartbeat's
/// answer always has.
#[test]
fn the_route_table_gives_every_field_of_the_heartbeat_answer() {
    let data_dir = common::scratch("docs-heartbeat");
    let server = Server::start(&data_dir, &[]);
    let doc = openapi(&server);
    let answer = &doc["paths"]["/v1/groups/{group}/heartbeat"]["post"]["responses"]["200"]["content"]
        ["application/json"]["schema"];
    let answer = resolved(&doc, answer);
    let required: Vec<&str> = answer["required"]
        .as_array()
        .unwrap_or_else(|| panic!("required fields: {answer}"))
        .iter()
        .map(|f| f.as_str().unwrap())
        .collect();
    assert!(required.contains(&"member_epoch"), "{required:?}");
    let row = line_starting(
        &read_doc("docs/architecture.md"),
        "| `POST /v1/groups/{group}/heartbeat` |",
    );
    let answered = row.split(" body `").next().unwrap();
    for field in required {
        assert!(
            answered.contains(field),
            "docs/architecture.md's heartbeat answer lacks {field}: {answered}"
        );
    }
}

/// The line of `text` that starts with `start`.
fn line_starting(text: &str, start: &str) -> String {
    text.lines()
        .find(|line| line.starts_with(start))
        .unwrap_or_else(|| panic!("no line starts with {start:?}"))
        .to_owned()
}

/// The routes without the admin token, by the OpenAPI document: each is
/// named where the README and the document say which routes are open.
#[test]
fn every_open_route_is_named_where_the_docs_list_them() {
    let data_dir = common::scratch("docs-open-routes");
    let server = Server::start(&data_dir, &[]);
    let doc = openapi(&server);
    let mut open = Vec::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for (method, operation) in item.as_object().unwrap() {
            if operation.get("security").is_none() {
                open.push(format!("{} {path}", method.to_uppercase()));
            }
        }
    }
    assert!(open.contains(&"GET /metrics".to_owned()), "{open:?}");
    let readme = line_starting(&read_doc("README.md"), "- Every route but");
    let description = doc["info"]["description"].as_str().expect("a description");
    let scheme = doc["components"]["securitySchemes"]["admin_token"]["description"]
        .as_str()
        .unwrap_or_else(|| panic!("the admin scheme: {}", doc["components"]));
    for route in &open {
        let path = route.split_once(' ').unwrap().1;
        // The heartbeat is named by what it is.
        let named = |text: &str| {
            text.contains(&format!("`{path}`"))
                || text.contains(&format!("`{route}`"))
                || (path.ends_with("/heartbeat") && text.contains("member heartbeat"))
        };
        assert!(
            named(&readme),
            "the README's auth bullet names {route}: {readme}"
        );
        assert!(
            named(description),
            "the document's description names {route}"
        );
        assert!(
            named(scheme),
            "the admin scheme's description names {route}"
        );
    }
}

/// The upload cap the OpenAPI document, the README and
/// docs/architecture.md give is the registry's.
#[test]
fn the_documented_upload_cap_is_the_registrys() {
    let mib = assignd::registry::MODULE_UPLOAD_BYTES_MAX >> 20;
    let data_dir = common::scratch("docs-upload-cap");
    let server = Server::start(&data_dir, &[]);
    let doc = openapi(&server);
    let upload = doc["paths"]["/v1/assignors"]["post"]["description"]
        .as_str()
        .expect("the upload's description");
    let said: Vec<&str> = upload
        .match_indices(" MiB")
        .map(|(at, _)| {
            upload[..at]
                .rsplit(|c: char| !c.is_ascii_digit())
                .next()
                .unwrap()
        })
        .collect();
    assert_eq!(
        said,
        [mib.to_string()],
        "the upload's description: {upload}"
    );
    assert!(read_doc("README.md").contains(&format!("Uploads may be up to {mib} MiB")));
    assert!(read_doc("docs/architecture.md").contains(&format!("at most {mib} MiB")));
}

/// Every `path.rs` and `path.rs::item` that docs/architecture.md's tour
/// names is a file under `host/src/` (or of the crate it names) that
/// defines that function or struct: the tour is followed file by file, and a file
/// moved or a function renamed must take the tour along.
#[test]
fn the_tour_names_files_and_functions_that_exist() {
    let architecture = read_doc("docs/architecture.md");
    let start = architecture.find("## A tour").expect("the tour's heading");
    let end = start
        + architecture[start..]
            .find("\n## ")
            .expect("the section after the tour");
    let tour = &architecture[start..end];
    let root = common::workspace_root();
    let mut named = 0;
    for quoted in tour.split('`').skip(1).step_by(2) {
        let (path, function) = match quoted.split_once("::") {
            Some((path, function)) => (path, Some(function)),
            None => (quoted, None),
        };
        if !path.ends_with(".rs") {
            continue;
        }
        named += 1;
        let file = ["host/src", ""]
            .iter()
            .map(|base| root.join(base).join(path))
            .find(|file| file.is_file())
            .unwrap_or_else(|| panic!("the tour names {path}, which is not a file"));
        if let Some(function) = function {
            let name = function.rsplit("::").next().expect("a name");
            let text = std::fs::read_to_string(&file).expect("readable");
            // A type by its capital, else a function.
            let definitions = if name.starts_with(char::is_uppercase) {
                [format!("struct {name} "), format!("struct {name}<")]
            } else {
                [format!("fn {name}("), format!("fn {name}<")]
            };
            assert!(
                definitions.iter().any(|d| text.contains(d.as_str())),
                "the tour names {quoted}, but {} defines no {name}",
                file.display()
            );
        }
    }
    assert!(
        named >= 20,
        "the tour names {named} files: is it still there?"
    );
}
