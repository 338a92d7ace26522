//! The plugin runtime in-process: caching by content hash, a fresh sandbox
//! per call, each failure kind as its own error, and a failing guest that
//! neither poisons its module nor stops other calls.

use std::sync::Arc;

use crate::common::*;
use assignd::plugins::{EngineConfig, Limits, PluginEngine, PluginError};
use assignd_guest_sdk::testing::{GroupSpec, Subscriptions, group};
use assignd_guest_sdk::validate::check_assignment;
use assignd_guest_sdk::{GroupInput, NO_MEMBER};

fn engine() -> PluginEngine {
    PluginEngine::new(EngineConfig::default()).unwrap()
}

fn input() -> GroupInput {
    group(&GroupSpec {
        members: 5,
        topics: 3,
        partitions: 40,
        subscriptions: Subscriptions::Homogeneous,
        racks: 0,
    })
}

fn load_guest(engine: &PluginEngine, package: &str) -> Arc<assignd::plugins::LoadedModule> {
    engine.load_file(&bad_guest(package)).unwrap()
}

#[test]
fn same_bytes_load_once_and_are_named_by_their_sha256() {
    let engine = engine();
    let first = engine.load_builtin("sticky").unwrap();
    let second = engine.load_builtin("sticky").unwrap();
    assert!(
        Arc::ptr_eq(&first, &second),
        "the second load is served from the cache"
    );
    assert_eq!(first.id.len(), 64);
    assert!(first.id.chars().all(|c| c.is_ascii_hexdigit()));
    assert_eq!(first.info.name, "sticky");
    let other = engine.load_builtin("range").unwrap();
    assert_ne!(first.id, other.id);
}

#[test]
fn compiled_artifacts_are_reused_across_engines_through_the_disk_cache() {
    let dir = scratch("disk-cache");
    let config = || EngineConfig {
        cache_dir: Some(dir.clone()),
        ..EngineConfig::default()
    };
    let first = PluginEngine::new(config())
        .unwrap()
        .load_builtin("range")
        .unwrap();
    assert!(!first.from_disk_cache);
    let second = PluginEngine::new(config())
        .unwrap()
        .load_builtin("range")
        .unwrap();
    assert!(
        second.from_disk_cache,
        "a new engine loads the precompiled artifact"
    );
    assert_eq!(first.id, second.id);
    let outcome =
        PluginEngine::new(config())
            .unwrap()
            .assign(&second, &input(), &Limits::default());
    assert!(
        outcome.is_err(),
        "a module belongs to the engine that loaded it"
    );
}

#[test]
fn every_builtin_answers_validly_on_a_fresh_instance_each_call() {
    let engine = engine();
    let input = input();
    for name in assignd::plugins::BUILTIN_NAMES {
        let module = engine.load_builtin(name).unwrap();
        let first = engine.assign(&module, &input, &Limits::default()).unwrap();
        let second = engine.assign(&module, &input, &Limits::default()).unwrap();
        check_assignment(&input, &first.assignment, 1 << 20).unwrap();
        assert_eq!(
            first.assignment, second.assignment,
            "{name} is deterministic"
        );
        assert!(first.stats.fuel > 0);
    }
}

#[test]
fn each_failure_kind_is_its_own_error_and_the_module_stays_usable() {
    let engine = engine();
    let input = input();
    let small = Limits {
        fuel_base: 50_000_000,
        fuel_per_item: 0,
        memory_max_bytes: 64 << 20,
        ..Limits::default()
    };
    let spin = load_guest(&engine, "test-guest-spin-forever");
    for _ in 0..2 {
        // A trapped instance is thrown away: the second call fails the same
        // clean way instead of touching a poisoned instance.
        let error = engine.assign(&spin, &input, &small).unwrap_err();
        assert!(
            matches!(error, PluginError::OutOfFuel { fuel: 50_000_000 }),
            "{error}"
        );
    }
    let timeout = Limits {
        fuel_base: u64::MAX / 2,
        time_limit_ms: 100,
        ..small
    };
    let error = engine.assign(&spin, &input, &timeout).unwrap_err();
    assert!(
        matches!(error, PluginError::Timeout { limit_ms: 100 }),
        "{error}"
    );

    let hog = load_guest(&engine, "test-guest-memory-hog");
    let plenty_of_fuel = Limits {
        fuel_base: u64::MAX / 2,
        ..small
    };
    let error = engine.assign(&hog, &input, &plenty_of_fuel).unwrap_err();
    match error {
        PluginError::MemoryLimit {
            requested_bytes,
            limit_bytes,
        } => {
            assert_eq!(limit_bytes, 64 << 20);
            assert!(requested_bytes > limit_bytes);
        }
        other => panic!("expected MemoryLimit, got {other}"),
    }

    let panicking = load_guest(&engine, "test-guest-panicking");
    let error = engine.assign(&panicking, &input, &small).unwrap_err();
    match &error {
        PluginError::Panicked { message } => {
            assert!(
                message.contains("panicking guest: refusing to assign on purpose"),
                "{message}"
            )
        }
        other => panic!("expected Panicked, got {other}"),
    }
    assert!(error.is_guest_failure());

    let invalid = load_guest(&engine, "test-guest-invalid-output");
    let mut with_mode = input.clone();
    with_mode.params.insert("mode".into(), "unassigned".into());
    let error = engine.assign(&invalid, &with_mode, &small).unwrap_err();
    assert!(
        matches!(error, PluginError::InvalidAssignment(_)),
        "{error}"
    );
    with_mode
        .params
        .insert("mode".into(), "no-such-mode".into());
    let error = engine.assign(&invalid, &with_mode, &small).unwrap_err();
    assert!(matches!(error, PluginError::Refused(_)), "{error}");

    // After all that, the engine and a well-behaved module are unharmed.
    let range = engine.load_builtin("range").unwrap();
    engine.assign(&range, &input, &Limits::default()).unwrap();
}

#[test]
fn an_invalid_input_never_reaches_the_guest() {
    let engine = engine();
    let module = engine.load_builtin("sticky").unwrap();
    let mut input = input();
    input.active_owner.pop();
    let error = engine
        .assign(&module, &input, &Limits::default())
        .unwrap_err();
    assert!(matches!(error, PluginError::InvalidInput(_)), "{error}");
    let mut input = self::input();
    input.active_owner[0] = 99;
    let error = engine
        .assign(&module, &input, &Limits::default())
        .unwrap_err();
    assert!(matches!(error, PluginError::InvalidInput(_)), "{error}");
    assert!(!error.is_guest_failure());
}

#[test]
fn a_looping_guest_does_not_stop_other_calls() {
    let engine = Arc::new(engine());
    let spin = load_guest(&engine, "test-guest-spin-forever");
    let range = engine.load_builtin("range").unwrap();
    let looping = {
        let engine = engine.clone();
        std::thread::spawn(move || {
            let limits = Limits {
                fuel_base: u64::MAX / 2,
                time_limit_ms: 1_500,
                ..Limits::default()
            };
            engine.assign(&spin, &input(), &limits)
        })
    };
    // While the looping guest holds one thread, the other keeps answering.
    let input = input();
    for _ in 0..20 {
        let outcome = engine.assign(&range, &input, &Limits::default()).unwrap();
        assert!(
            outcome
                .assignment
                .active_owner
                .iter()
                .all(|&m| m != NO_MEMBER)
        );
    }
    let error = looping.join().unwrap().unwrap_err();
    assert!(matches!(error, PluginError::Timeout { .. }), "{error}");
}

#[test]
fn modules_of_another_shape_are_refused_by_kind() {
    let engine = engine();
    assert!(matches!(
        engine.load(b"nope"),
        Err(PluginError::NotWasm { .. })
    ));
    let core = wat::parse_str("(module)").unwrap();
    assert!(matches!(engine.load(&core), Err(PluginError::CoreModule)));
    let other = wat::parse_str(OTHER_WORLD_WAT).unwrap();
    assert!(matches!(
        engine.load(&other),
        Err(PluginError::WrongWorld { .. })
    ));
    let wasi = wat::parse_str(WASI_IMPORT_WAT).unwrap();
    match engine.load(&wasi) {
        Err(PluginError::ForeignImport { name }) => assert_eq!(name, "wasi:cli/environment@0.2.0"),
        other => panic!("expected ForeignImport, got {other:?}"),
    }
    let mut truncated = engine_bytes("sticky");
    truncated.truncate(truncated.len() / 2);
    assert!(matches!(
        engine.load(&truncated),
        Err(PluginError::Compile(_))
    ));
}

fn engine_bytes(builtin: &str) -> Vec<u8> {
    assignd::plugins::builtin_component(builtin)
        .unwrap()
        .to_vec()
}

#[test]
fn calls_beyond_the_pool_wait_for_a_slot_instead_of_failing() {
    let engine = Arc::new(
        PluginEngine::new(EngineConfig {
            concurrent_calls_max: 1,
            ..EngineConfig::default()
        })
        .unwrap(),
    );
    let spin = load_guest(&engine, "test-guest-spin-forever");
    let range = engine.load_builtin("range").unwrap();
    let (started_tx, started_rx) = std::sync::mpsc::channel();
    let looping = {
        let engine = engine.clone();
        std::thread::spawn(move || {
            let limits = Limits {
                fuel_base: u64::MAX / 2,
                time_limit_ms: 300,
                ..Limits::default()
            };
            started_tx.send(()).unwrap();
            engine.assign(&spin, &input(), &limits)
        })
    };
    started_rx.recv().unwrap();
    // Whether or not the looping call got the only slot first, this call
    // must succeed: it waits for the slot rather than fail to instantiate.
    let outcome = engine.assign(&range, &input(), &Limits::default()).unwrap();
    check_assignment(&input(), &outcome.assignment, 1 << 20).unwrap();
    let error = looping.join().unwrap().unwrap_err();
    assert!(
        matches!(error, PluginError::Timeout { limit_ms: 300 }),
        "{error}"
    );
}

#[test]
fn a_memory_limit_above_the_engine_ceiling_is_capped_to_it() {
    let engine = PluginEngine::new(EngineConfig {
        memory_ceiling_bytes: 32 << 20,
        ..EngineConfig::default()
    })
    .unwrap();
    let hog = load_guest(&engine, "test-guest-memory-hog");
    let limits = Limits {
        fuel_base: u64::MAX / 2,
        memory_max_bytes: 1 << 30,
        ..Limits::default()
    };
    match engine.assign(&hog, &input(), &limits).unwrap_err() {
        PluginError::MemoryLimit { limit_bytes, .. } => assert_eq!(limit_bytes, 32 << 20),
        other => panic!("expected MemoryLimit, got {other}"),
    }
}
