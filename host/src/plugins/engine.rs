//! The wasmtime engine and the cache of compiled assignors. A component is
//! checked (wasm header, imports, exports, `info()` answers) and compiled
//! once; the result is kept by the sha256 of its bytes in memory and, with a
//! cache directory, on disk as a precompiled artifact so the next process
//! loads it in well under a millisecond instead of recompiling. Only a
//! component that passed every check is kept; [`PluginEngine::evict`]
//! drops one again (a deleted or refused upload), so neither the memory
//! nor the cache directory grows with modules that are gone.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use assignd_guest_sdk::Info;
use sha2::{Digest, Sha256};
use wasmtime::component::{Component, Linker};
use wasmtime::{Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

use super::builtin::{BUILTIN_NAMES, builtin_component};
use super::compile::{CompilesRunning, compile_config, compile_in_child};
use super::error::PluginError;
use super::limits::{
    CORE_INSTANCES_PER_CALL_MAX, CompileBounds, EPOCH_TICK_MS, EngineConfig, Limits,
    MEMORIES_PER_CALL_MAX, TABLES_PER_CALL_MAX,
};
use super::sandbox::{CallSlots, GuestState};
use super::world::{self, InfoCall, WitVersion, WorldPre, call_info, check_world};

/// The sha256 of a component's bytes, lowercase hex.
pub type ModuleId = String;

/// A checked, compiled assignor, ready to instantiate.
pub struct LoadedModule {
    pub id: ModuleId,
    /// What the component's `info()` answered when it was loaded.
    pub info: Info,
    /// Time spent compiling (or loading the precompiled artifact) when this
    /// module was first loaded in this process.
    pub compile_ms: f64,
    /// Whether the compiled artifact came from the on-disk cache.
    pub from_disk_cache: bool,
    /// The version of the assignor interface it exports.
    pub wit_version: WitVersion,
    pub(super) pre: WorldPre,
}

impl std::fmt::Debug for LoadedModule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadedModule")
            .field("id", &self.id)
            .field("name", &self.info.name)
            .field("version", &self.info.version)
            .field("wit_version", &self.wit_version)
            .finish()
    }
}

/// The engine every plugin runs in, and its module cache.
pub struct PluginEngine {
    pub(super) engine: Engine,
    linker: Linker<GuestState>,
    modules: Mutex<HashMap<ModuleId, Arc<LoadedModule>>>,
    cache_dir: Option<PathBuf>,
    pub(super) slots: Arc<CallSlots>,
    pub(super) memory_ceiling_bytes: u64,
    compile_bounds: Option<CompileBounds>,
    compiles_running: CompilesRunning,
    guest_threads: super::GuestThreads,
    /// The shadow assignors' threads, below the live calls' (see
    /// `guest_threads.rs`), with instance slots of their own.
    shadow_threads: super::GuestThreads,
    /// Nice values below the host's priority of the guest threads and of
    /// the compiler processes.
    guest_nice: u8,
}

impl PluginEngine {
    /// An engine with fuel metering and epoch interruption on, and a
    /// background thread that advances the epoch every `EPOCH_TICK_MS`
    /// while a guest runs (it stops when the engine is dropped).
    pub fn new(config: EngineConfig) -> anyhow::Result<Self> {
        let mut wasm_config = compile_config();
        // A pool of instance slots whose memory stays mapped between calls:
        // measured here it takes a quarter off a sticky call on 100,000
        // tasks (3.53 → 2.62 ms) and a third off the marshalling of a small
        // one, because a fresh instance no longer page-faults on every page
        // it touches (docs/benchmarks.md).
        let live_slots = config.concurrent_calls_max.max(1);
        let shadow_slots = config.shadow_calls_max.max(1);
        let slots = live_slots + shadow_slots;
        let mut pool = PoolingAllocationConfig::new();
        pool.total_component_instances(slots)
            .total_core_instances(slots * CORE_INSTANCES_PER_CALL_MAX)
            .max_core_instances_per_component(CORE_INSTANCES_PER_CALL_MAX)
            .total_memories(slots * MEMORIES_PER_CALL_MAX)
            .max_memories_per_component(MEMORIES_PER_CALL_MAX)
            .total_tables(slots * TABLES_PER_CALL_MAX)
            .max_tables_per_component(TABLES_PER_CALL_MAX)
            .max_memory_size(usize::try_from(config.memory_ceiling_bytes)?)
            .linear_memory_keep_resident(usize::try_from(config.memory_keep_resident_bytes)?);
        wasm_config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        let engine = Engine::new(&wasm_config)?;
        let mut linker = Linker::new(&engine);
        world::add_to_linker(&mut linker)?;
        anyhow::ensure!(
            config.guest_nice <= super::GUEST_NICE_MAX,
            "a guest nice increment of {} is out of range (0 to {})",
            config.guest_nice,
            super::GUEST_NICE_MAX
        );
        let guest_threads = super::GuestThreads::new(live_slots, config.guest_nice);
        let shadow_threads = super::GuestThreads::for_shadows(shadow_slots);
        let slots = Arc::new(CallSlots::new(live_slots, shadow_slots));
        start_epoch_ticker(&engine, &slots);
        if let Some(dir) = &config.cache_dir {
            std::fs::create_dir_all(dir).map_err(|e| {
                anyhow::anyhow!("cannot create cache directory {}: {e}", dir.display())
            })?;
        }
        Ok(PluginEngine {
            engine,
            linker,
            modules: Mutex::new(HashMap::new()),
            cache_dir: config.cache_dir,
            slots,
            memory_ceiling_bytes: config.memory_ceiling_bytes,
            compile_bounds: config.compile_bounds,
            compiles_running: CompilesRunning::default(),
            guest_threads,
            shadow_threads,
            guest_nice: config.guest_nice,
        })
    }

    /// Runs `work` (a guest call, with whatever loading and checking goes
    /// with it) on one of the guest threads, below the host's priority,
    /// and resolves to its result. At most as many threads as call slots.
    pub fn on_guest_thread<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> impl std::future::Future<Output = Result<T, super::GuestThreadError>> + Send + 'static
    {
        self.guest_threads.run(work)
    }

    /// Runs `work` (a shadow assignor's call) on a shadow thread, below
    /// every live call and in an instance slot no live call uses, if one
    /// is free now; `None` if every shadow thread is busy (the call is not
    /// queued).
    pub fn try_on_shadow_thread<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Option<
        impl std::future::Future<Output = Result<T, super::GuestThreadError>> + Send + 'static,
    > {
        self.shadow_threads.try_run(work)
    }

    /// [`Self::on_guest_thread`] for a caller off the async workers (the
    /// registry's self-test and params check): blocks until `work` is done.
    pub fn on_guest_thread_blocking<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, super::GuestThreadError> {
        self.guest_threads.run_blocking(work)
    }

    /// Loads a built-in assignor by name.
    pub fn load_builtin(&self, name: &str) -> Result<Arc<LoadedModule>, PluginError> {
        let bytes = builtin_component(name).ok_or_else(|| PluginError::UnknownBuiltin {
            name: name.to_owned(),
            builtins: BUILTIN_NAMES.join(", "),
        })?;
        self.load_trusted(bytes, true)
    }

    /// Loads a component from a file.
    pub fn load_file(&self, path: &Path) -> Result<Arc<LoadedModule>, PluginError> {
        let bytes = std::fs::read(path).map_err(|e| PluginError::Read {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
        self.load(&bytes)
    }

    /// Checks and compiles component bytes, or returns the cached module
    /// with the same sha256.
    pub fn load(&self, bytes: &[u8]) -> Result<Arc<LoadedModule>, PluginError> {
        self.load_trusted(bytes, false)
    }

    /// [`Self::load`]; a `shipped` component (a built-in) is compiled in
    /// process even where others are compiled under bounds.
    fn load_trusted(&self, bytes: &[u8], shipped: bool) -> Result<Arc<LoadedModule>, PluginError> {
        check_header(bytes)?;
        let id = module_id(bytes);
        if let Some(module) = self.modules.lock().expect("module cache poisoned").get(&id) {
            return Ok(module.clone());
        }
        // Before any compile: a refusal must not cost a compile (seconds
        // for a 12 MB JavaScript guest) nor leave an artifact behind.
        let wit_version = check_world(bytes)?;
        let started = Instant::now();
        let (component, from_disk_cache) = self.compile(&id, bytes, shipped)?;
        let compile_ms = started.elapsed().as_secs_f64() * 1e3;
        // Only imports are checked here: every name is ours (above), so a
        // mismatch is one of their functions or types.
        let instance_pre = self
            .linker
            .instantiate_pre(&component)
            .map_err(|e| PluginError::ImportShape(format!("{e:#}")))?;
        let pre = WorldPre::new(wit_version, instance_pre)?;
        // The module's own code: on a guest thread, as every guest call.
        let info_call = InfoCall {
            engine: self.engine.clone(),
            slots: self.slots.clone(),
            memory_ceiling_bytes: self.memory_ceiling_bytes,
            pre: pre.clone(),
        };
        let info = self
            .guest_threads
            .run_blocking(move || call_info(&info_call, &Limits::default()))
            .unwrap_or_else(|unfinished| panic!("loading a module: {unfinished}"))?;
        if !from_disk_cache {
            self.write_artifact(&id, &component);
        }
        let module = Arc::new(LoadedModule {
            id: id.clone(),
            info,
            compile_ms,
            from_disk_cache,
            wit_version,
            pre,
        });
        self.modules
            .lock()
            .expect("module cache poisoned")
            .insert(id, module.clone());
        Ok(module)
    }

    /// Forgets the compiled module `id`: its in-memory entry and its
    /// artifact in the cache directory. Calls still running keep their own
    /// reference. A built-in's is kept: the built-ins are always loadable,
    /// and an upload of a built-in's bytes shares its compiled form.
    pub fn evict(&self, id: &str) {
        if BUILTIN_NAMES
            .iter()
            .filter_map(|name| builtin_component(name))
            .any(|bytes| module_id(bytes) == id)
        {
            return;
        }
        self.modules
            .lock()
            .expect("module cache poisoned")
            .remove(id);
        let Some(dir) = &self.cache_dir else { return };
        // Every artifact of this id, whatever engine build wrote it.
        let Ok(listing) = std::fs::read_dir(dir) else {
            return;
        };
        for file in listing.flatten() {
            let name = file.file_name();
            let Some(name) = name.to_str() else { continue };
            if name
                .strip_prefix(id)
                .is_some_and(|rest| rest.starts_with('-'))
                && let Err(e) = std::fs::remove_file(file.path())
            {
                tracing::warn!(path = %file.path().display(), error = %e, "cannot remove a compiled artifact");
            }
        }
    }

    /// Where the precompiled artifact of `id` for this engine is cached.
    fn artifact_path(&self, id: &str) -> Option<PathBuf> {
        self.cache_dir.as_ref().map(|dir| {
            let mut hasher = std::collections::hash_map::DefaultHasher::new();
            self.engine
                .precompile_compatibility_hash()
                .hash(&mut hasher);
            dir.join(format!("{id}-{:016x}.cwasm", hasher.finish()))
        })
    }

    /// Writes a checked component's artifact to the disk cache. The cache
    /// is an optimisation: failing to write it is logged, never fatal.
    fn write_artifact(&self, id: &str, component: &Component) {
        let Some(path) = self.artifact_path(id) else {
            return;
        };
        let written = component
            .serialize()
            .map_err(anyhow::Error::from)
            .and_then(|artifact| write_atomically(&path, &artifact));
        if let Err(e) = written {
            tracing::warn!(path = %path.display(), error = %e, "cannot write compiled artifact to cache");
        }
    }

    /// Compiles, or loads the precompiled artifact from the disk cache.
    /// The artifact is written by [`Self::load`] once the component passed
    /// its checks, so a refused component leaves nothing behind.
    fn compile(
        &self,
        id: &str,
        bytes: &[u8],
        shipped: bool,
    ) -> Result<(Component, bool), PluginError> {
        let cached = self.artifact_path(id);
        if let Some(path) = &cached
            && path.exists()
        {
            // SAFETY: the file was written by `precompile_component` of an
            // engine with the same compatibility hash (it is in the file
            // name), into a cache directory this host owns. A corrupt or
            // foreign file is refused by wasmtime's header checks and we
            // fall back to compiling.
            match unsafe { Component::deserialize_file(&self.engine, path) } {
                Ok(component) => return Ok((component, true)),
                Err(e) => {
                    tracing::warn!(path = %path.display(), error = %e, "ignoring unusable cached artifact")
                }
            }
        }
        let component = match &self.compile_bounds {
            Some(bounds) if !shipped => {
                let artifact =
                    compile_in_child(bounds, &self.compiles_running, bytes, self.guest_nice)?;
                // SAFETY: the artifact was just written by
                // `precompile_component` of our own binary, with the
                // settings of `compile_config` this engine was built
                // from; wasmtime's header checks refuse anything else.
                unsafe { Component::deserialize(&self.engine, &artifact) }.map_err(|e| {
                    PluginError::Compile(format!("loading the compiled artifact: {e:#}"))
                })?
            }
            _ => Component::new(&self.engine, bytes)
                .map_err(|e| PluginError::Compile(format!("{e:#}")))?,
        };
        Ok((component, false))
    }
}

fn write_atomically(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    use std::io::Write;
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    // Only the host's user reads compiled code (0600).
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(&tmp)?.write_all(bytes)?;
    std::fs::rename(&tmp, path)?;
    Ok(())
}

/// How often the idle ticker looks whether its engine is gone.
const EPOCH_IDLE_CHECK: Duration = Duration::from_secs(1);

fn start_epoch_ticker(engine: &Engine, slots: &Arc<CallSlots>) {
    let weak = engine.weak();
    let slots = Arc::downgrade(slots);
    std::thread::Builder::new()
        .name("assignd-epoch".into())
        .spawn(move || {
            // A call's deadline counts ticks from the epoch when its store
            // was made, so a ticker that stood still while no call ran
            // gives every call its full time.
            while let Some(slots) = slots.upgrade() {
                if !slots.wait_until_taken(EPOCH_IDLE_CHECK) {
                    continue;
                }
                drop(slots);
                let Some(engine) = weak.upgrade() else {
                    return;
                };
                engine.increment_epoch();
                drop(engine);
                std::thread::sleep(Duration::from_millis(EPOCH_TICK_MS));
            }
        })
        .expect("cannot start the epoch ticker thread");
}

/// The id of a component: the sha256 of its bytes. Cheap next to
/// compiling, so a registry can look an upload up before it compiles it.
pub fn module_id(bytes: &[u8]) -> ModuleId {
    hex(&Sha256::digest(bytes))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Tells apart non-wasm bytes, core modules and components by their header.
fn check_header(bytes: &[u8]) -> Result<(), PluginError> {
    if bytes.len() < 8 || &bytes[..4] != b"\0asm" {
        let prefix: String = bytes
            .iter()
            .take(8)
            .map(|b| format!("{b:02x}"))
            .collect::<Vec<_>>()
            .join(" ");
        return Err(PluginError::NotWasm {
            prefix: if prefix.is_empty() {
                "nothing (empty input)".into()
            } else {
                prefix
            },
        });
    }
    let version: [u8; 4] = bytes[4..8].try_into().expect("slice of four bytes");
    match version {
        [0x01, 0x00, 0x00, 0x00] => Err(PluginError::CoreModule),
        // Component binaries carry version 0x0d and layer 1.
        [0x0d, 0x00, 0x01, 0x00] => Ok(()),
        other => Err(PluginError::UnsupportedVersion { version: other }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The epoch ticker waits while every slot is free (an idle host
    /// spends nothing on it) and runs while one is held.
    #[test]
    fn the_epoch_ticker_runs_only_while_a_slot_is_held() {
        let slots = CallSlots::new(2, 1);
        assert!(!slots.wait_until_taken(Duration::ZERO), "idle");
        let first = slots.acquire();
        assert!(slots.wait_until_taken(Duration::ZERO));
        let second = slots.acquire();
        drop(first);
        assert!(slots.wait_until_taken(Duration::ZERO), "one still held");
        drop(second);
        assert!(!slots.wait_until_taken(Duration::ZERO), "idle again");
    }

    /// A foreign import is refused from the bytes, before any compile: a
    /// component whose code would not even compile is refused for its
    /// import, and the cache keeps nothing of it.
    #[test]
    fn a_foreign_import_is_refused_before_anything_is_compiled() {
        let bytes = wat::parse_str(
            r#"(component
                 (import "wasi:clocks/wall-clock@0.2.0" (instance))
                 (core module (func (result i32)))
               )"#,
        )
        .expect("parses (it does not validate)");
        let engine = PluginEngine::new(EngineConfig::default()).expect("engine");
        match engine.load(&bytes) {
            Err(PluginError::ForeignImport { name }) => {
                assert_eq!(name, "wasi:clocks/wall-clock@0.2.0")
            }
            other => panic!("expected ForeignImport, got {other:?}"),
        }
        assert!(engine.modules.lock().unwrap().is_empty());
        let message = PluginError::ForeignImport {
            name: "wasi:io/poll@0.2.0".into(),
        }
        .to_string();
        for hint in [
            "wasm32-unknown-unknown",
            "--disable stdio",
            "--stub-wasi",
            "stdio",
        ] {
            assert!(message.contains(hint), "{message}");
        }
    }

    /// An import of our own log interface with other functions is said to
    /// be the imports' mismatch, not the export's.
    #[test]
    fn a_log_import_of_another_shape_is_reported_as_an_import_mismatch() {
        let bytes = wat::parse_str(
            r#"(component
                 (import "assignd:assignor/log@0.1.0" (instance
                   (export "shout" (func (param "message" string)))))
                 (import "assignd:assignor/types@0.1.0" (instance))
                 (instance $a)
                 (export "assignd:assignor/assignor@0.1.0" (instance $a))
               )"#,
        )
        .expect("parses");
        let engine = PluginEngine::new(EngineConfig::default()).expect("engine");
        match engine.load(&bytes) {
            Err(e @ PluginError::ImportShape(_)) => {
                assert!(e.to_string().contains("imports do not match"), "{e}")
            }
            other => panic!("expected ImportShape, got {other:?}"),
        }
    }

    #[test]
    fn header_tells_apart_text_core_modules_and_components() {
        assert!(matches!(
            check_header(b"hello world"),
            Err(PluginError::NotWasm { .. })
        ));
        assert!(matches!(
            check_header(b""),
            Err(PluginError::NotWasm { .. })
        ));
        assert!(matches!(
            check_header(b"\0asm\x01\0\0\0"),
            Err(PluginError::CoreModule)
        ));
        assert!(matches!(
            check_header(b"\0asm\x0e\0\x01\0"),
            Err(PluginError::UnsupportedVersion { .. })
        ));
        assert!(check_header(b"\0asm\x0d\0\x01\0").is_ok());
    }
}
