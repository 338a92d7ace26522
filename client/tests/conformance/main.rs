//! The conformance vectors: every script in `scripts` run on the member
//! machine must give exactly the vector committed in
//! `clients/conformance/vectors/`, which every client in every language
//! replays. A change to the machine that alters a vector fails here until
//! the vectors are regenerated on purpose:
//!
//! ```sh
//! ASSIGND_REGENERATE_VECTORS=1 cargo test -p assignd-client --test conformance
//! ```

mod load_scripts;
mod script;
mod scripts;

use std::collections::BTreeSet;
use std::path::PathBuf;

fn vectors_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../clients/conformance/vectors")
}

fn regenerating() -> bool {
    std::env::var_os("ASSIGND_REGENERATE_VECTORS").is_some_and(|v| !v.is_empty() && v != "0")
}

/// The file list other clients read: one vector file name per line.
const INDEX: &str = "INDEX";

#[test]
fn every_script_gives_its_committed_vector() {
    let dir = vectors_dir();
    let scripts = scripts::all();
    let mut names = BTreeSet::new();
    let mut stale = Vec::new();
    for script in &scripts {
        let file = format!("{}.json", script.name());
        assert!(names.insert(file.clone()), "two scripts named {file}");
        let mut text = serde_json::to_string_pretty(&script.vector()).unwrap();
        text.push('\n');
        let path = dir.join(&file);
        if regenerating() {
            std::fs::write(&path, &text).unwrap();
        } else if std::fs::read_to_string(&path).ok().as_deref() != Some(text.as_str()) {
            stale.push(file);
        }
    }
    let index: String = names.iter().map(|name| format!("{name}\n")).collect();
    let on_disk: BTreeSet<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".json"))
        .collect();
    let orphans: Vec<&String> = on_disk.difference(&names).collect();
    if regenerating() {
        std::fs::write(dir.join(INDEX), index).unwrap();
        for orphan in orphans {
            std::fs::remove_file(dir.join(orphan)).unwrap();
        }
        return;
    }
    assert!(
        stale.is_empty(),
        "the member machine no longer gives these vectors: {stale:?}; if the change is meant, \
         regenerate them (ASSIGND_REGENERATE_VECTORS=1 cargo test -p assignd-client --test \
         conformance) and every client must then pass them"
    );
    assert!(orphans.is_empty(), "vectors no script makes: {orphans:?}");
    assert_eq!(
        std::fs::read_to_string(dir.join(INDEX)).ok(),
        Some(index),
        "the INDEX lists every vector"
    );
}

/// The vectors read back as the format says: every step has an input,
/// every output key, and the inputs other clients must understand.
#[test]
fn every_vector_has_every_output_of_every_step() {
    let inputs = [
        "poll_request",
        "answer",
        "failure",
        "ack",
        "report_lags",
        "drain",
        "leave",
        "tick",
        "check",
        "set_endpoint",
        "set_loads",
        "set_utilisation",
        "set_load_capacity",
    ];
    let mut seen = BTreeSet::new();
    for script in scripts::all() {
        let vector = script.vector();
        for step in vector["steps"].as_array().unwrap() {
            let kind = step["input"]["type"].as_str().unwrap();
            assert!(inputs.contains(&kind), "{kind}");
            seen.insert(kind.to_owned());
            let expect = step["expect"].as_object().unwrap();
            for key in [
                "events",
                "timeout",
                "lease_until",
                "member_id",
                "member_epoch",
                "assignment",
                "stopped",
            ] {
                assert!(expect.contains_key(key), "{}: {key}", script.name());
            }
            assert_eq!(expect.contains_key("request"), kind == "poll_request");
            assert_eq!(expect.contains_key("may_process"), kind == "check");
        }
    }
    assert_eq!(seen.len(), inputs.len(), "every input is used: {seen:?}");
}
