//! The module registry: assignor components uploaded over HTTP, kept by
//! the sha256 of their bytes in `DATA_DIR/modules/<sha256>.wasm`, each with
//! a JSON sidecar `<sha256>.json` (name, version, size, upload time). It
//! validates a component before accepting it (it loads, and it answers a
//! self-test assignment within the default limits), resolves the assignor
//! references of group configs (a built-in name, a module id, or
//! `name@version`) and hands out the compiled module. It knows nothing of
//! groups or HTTP: whether a module is bound is the runtime's question.

pub mod metric_families;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use assignd_guest_sdk::testing::{GroupSpec, Subscriptions, group};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::durable::{self, Folder, private_file};
use crate::plugins::{BUILTIN_NAMES, Limits, LoadedModule, ModuleId, PluginEngine, PluginError};

/// The largest component accepted: 48 MiB, room for a 40 MB guest
/// (componentize-py's are 18.5 MB, componentize-js's 12 MB).
pub const MODULE_UPLOAD_BYTES_MAX: usize = 48 << 20;

/// Longest module name and version, in bytes.
pub const MODULE_NAME_LEN_MAX: usize = 128;

/// How many modules, and how many of their bytes in total, the registry
/// keeps (`serve --modules-max`, `--module-bytes-max`). In a cluster the
/// registry holds a copy of every module of the cluster, so these count
/// the cluster's modules.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ModuleCaps {
    pub modules_max: u64,
    pub module_bytes_max: u64,
}

impl Default for ModuleCaps {
    fn default() -> Self {
        ModuleCaps {
            modules_max: 100,
            // Ten modules at the size limit; a cluster keeps them in etcd,
            // whose default quota is 2 GiB.
            module_bytes_max: 512 << 20,
        }
    }
}

/// What an assignor reference names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Resolved {
    Builtin(&'static str),
    Uploaded(ModuleId),
}

/// What the sidecar file keeps next to a module's bytes.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Sidecar {
    name: String,
    version: String,
    size_bytes: u64,
    uploaded_at_ms: u64,
}

/// An uploaded module.
#[derive(Clone, Debug)]
pub struct Entry {
    pub module: Arc<LoadedModule>,
    pub name: String,
    pub version: String,
    pub size_bytes: u64,
    /// Unix time of the upload, in milliseconds.
    pub uploaded_at_ms: u64,
}

/// Why an upload or a delete was refused; nothing changed.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// The name or version is empty, too long, holds `@` or `/`, or a
    /// character the name rule refuses ([`crate::protocol::names`]).
    #[error("{0}")]
    InvalidName(String),
    /// The component does not load: not wasm, wrong world, compile error…
    #[error("the module does not load: {0}")]
    Invalid(PluginError),
    /// It loads, but the self-test assignment failed.
    #[error(
        "the module failed its self-test assignment ({members} members, {tasks} tasks): {error}"
    )]
    SelfTest {
        members: usize,
        tasks: usize,
        error: PluginError,
    },
    /// The module refused the params of a binding.
    #[error("{module} refuses these params: {message}")]
    ParamsRejected { module: String, message: String },
    /// The registry keeps `max` modules already.
    #[error(
        "{max} modules are uploaded, the limit (serve --modules-max): delete one that no group uses first"
    )]
    ModulesMaxReached { max: u64 },
    /// The module's bytes would bring the modules' total past `max`.
    #[error(
        "the uploaded modules hold {total} bytes: {size} more would pass the limit of {max} (serve --module-bytes-max); delete one that no group uses first"
    )]
    ModuleBytesMaxReached { max: u64, total: u64, size: u64 },
    /// Another module already has this name and version.
    #[error("{name}@{version} is already module {id}")]
    NameTaken {
        name: String,
        version: String,
        id: ModuleId,
    },
    #[error("no assignor {0:?} (a built-in name, a module id, or name@version)")]
    Unknown(String),
    #[error("{0:?} is a built-in assignor and cannot be deleted")]
    Builtin(String),
    #[error("module {id} is bound to groups: {groups}")]
    InUse { id: ModuleId, groups: String },
    /// Writing or removing the module's files failed.
    #[error("storage: {0}")]
    Storage(String),
    /// The self-test or params check did not run to its end on a guest
    /// thread: the host panicked in it (a bug), or is shutting down.
    #[error("checking the module: {0}")]
    GuestThread(#[from] crate::plugins::GuestThreadError),
}

/// The uploaded modules, and the engine they run in.
pub struct Registry {
    engine: Arc<PluginEngine>,
    /// None: kept in memory only (tests).
    dir: Option<PathBuf>,
    modules: RwLock<BTreeMap<ModuleId, Entry>>,
    /// Serializes uploads and deletes (their file work and their checks).
    pub(crate) mutation: tokio::sync::Mutex<()>,
    caps: ModuleCaps,
}

impl Registry {
    /// A registry that keeps nothing on disk.
    pub fn in_memory(engine: Arc<PluginEngine>) -> Self {
        Registry {
            engine,
            dir: None,
            modules: RwLock::new(BTreeMap::new()),
            mutation: tokio::sync::Mutex::new(()),
            caps: ModuleCaps::default(),
        }
    }

    /// This registry, keeping at most what `caps` allows from now on.
    pub fn with_caps(mut self, caps: ModuleCaps) -> Self {
        self.caps = caps;
        self.publish_gauges();
        self
    }

    pub fn caps(&self) -> ModuleCaps {
        self.caps
    }

    /// Sets the module gauges: how many modules and bytes are kept, and
    /// the caps.
    fn publish_gauges(&self) {
        // The recorder first: a registry is opened before the runtime
        // that would install it.
        crate::telemetry::handle();
        let (count, bytes) = self.usage();
        ::metrics::gauge!("assignd_modules").set(count as f64);
        ::metrics::gauge!("assignd_module_bytes").set(bytes as f64);
        ::metrics::gauge!("assignd_modules_max").set(self.caps.modules_max as f64);
        ::metrics::gauge!("assignd_module_bytes_max").set(self.caps.module_bytes_max as f64);
    }

    /// How many modules are kept, and their bytes in total.
    fn usage(&self) -> (u64, u64) {
        let modules = self.modules.read().expect("registry poisoned");
        let bytes = modules.values().map(|e| e.size_bytes).sum();
        (modules.len() as u64, bytes)
    }

    /// Refuses a new module of `size` bytes past the caps. Stored modules
    /// past them (the caps were lowered, or copied from the cluster) stay.
    fn check_caps(&self, size: u64) -> Result<(), RegistryError> {
        let (count, total) = self.usage();
        let caps = self.caps;
        if count >= caps.modules_max {
            return Err(RegistryError::ModulesMaxReached {
                max: caps.modules_max,
            });
        }
        if total.saturating_add(size) > caps.module_bytes_max {
            return Err(RegistryError::ModuleBytesMaxReached {
                max: caps.module_bytes_max,
                total,
                size,
            });
        }
        Ok(())
    }

    /// Opens (creating it if missing) `dir` and loads every module in it. A
    /// module that no longer loads (a file damaged on disk) is skipped with
    /// an error in the log, so the host still starts.
    pub fn open(engine: Arc<PluginEngine>, dir: &Path) -> anyhow::Result<Self> {
        std::fs::create_dir_all(dir)
            .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", dir.display()))?;
        let registry = Registry {
            dir: Some(dir.to_owned()),
            ..Registry::in_memory(engine)
        };
        let mut modules = BTreeMap::new();
        let listing = std::fs::read_dir(dir)
            .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", dir.display()))?;
        for file in listing {
            let path = file?.path();
            if path.extension().and_then(|e| e.to_str()) != Some("json") {
                continue;
            }
            match registry.load_stored(&path) {
                Ok(entry) => {
                    modules.insert(entry.module.id.clone(), entry);
                }
                Err(error) => {
                    tracing::error!(path = %path.display(), %error, "skipping a stored module")
                }
            }
        }
        *registry.modules.write().expect("registry poisoned") = modules;
        registry.publish_gauges();
        Ok(registry)
    }

    fn load_stored(&self, sidecar_path: &Path) -> anyhow::Result<Entry> {
        let sidecar: Sidecar = serde_json::from_slice(&std::fs::read(sidecar_path)?)?;
        let bytes = std::fs::read(sidecar_path.with_extension("wasm"))?;
        let module = self.engine.load(&bytes)?;
        let stem = sidecar_path.file_stem().and_then(|s| s.to_str());
        anyhow::ensure!(
            stem == Some(module.id.as_str()),
            "the bytes hash to {}, not to the file name",
            module.id
        );
        Ok(Entry {
            module,
            name: sidecar.name,
            version: sidecar.version,
            size_bytes: sidecar.size_bytes,
            uploaded_at_ms: sidecar.uploaded_at_ms,
        })
    }

    /// The engine every module runs in.
    pub fn engine(&self) -> &Arc<PluginEngine> {
        &self.engine
    }

    /// What `reference` names: a built-in name, an uploaded module's id, or
    /// `name@version` of an uploaded module.
    pub fn resolve(&self, reference: &str) -> Option<Resolved> {
        if let Some(name) = BUILTIN_NAMES.iter().find(|name| **name == reference) {
            return Some(Resolved::Builtin(name));
        }
        let modules = self.modules.read().expect("registry poisoned");
        if modules.contains_key(reference) {
            return Some(Resolved::Uploaded(reference.to_owned()));
        }
        let (name, version) = reference.split_once('@')?;
        modules
            .values()
            .find(|e| e.name == name && e.version == version)
            .map(|e| Resolved::Uploaded(e.module.id.clone()))
    }

    /// Whether the assignor `reference` accepts `params`: one assignment of
    /// the self-test group with them, under small limits, before a binding
    /// is recorded. Only the module's own refusal counts: a module that
    /// fails otherwise (a trap, a limit: `spin=yes` of a test guest) is
    /// bound, and its failure shows on the group as any failure would.
    pub fn check_params(
        &self,
        reference: &str,
        params: &BTreeMap<String, String>,
    ) -> Result<(), RegistryError> {
        let module = self
            .load(reference)
            .map_err(|_| RegistryError::Unknown(reference.to_owned()))?;
        let mut input = self_test_input();
        input.params = params.clone();
        // A check, not a group's call: what the guest logs here is nobody's
        // business, and is neither kept nor reported as dropped. It runs
        // as guest calls do, below the host's priority.
        let engine = self.engine.clone();
        let result = self.engine.on_guest_thread_blocking(move || {
            engine
                .assign_keeping_logs(&module, &input, &PARAMS_CHECK_LIMITS)
                .0
        })?;
        match result {
            Err(PluginError::Refused(refusal)) => Err(RegistryError::ParamsRejected {
                module: reference.to_owned(),
                message: refusal.to_string(),
            }),
            _ => Ok(()),
        }
    }

    /// The compiled module `reference` names. A call started before its
    /// group was rebound may find the module deleted since: an error, not
    /// a panic.
    pub fn load(&self, reference: &str) -> Result<Arc<LoadedModule>, PluginError> {
        let unknown = || PluginError::UnknownModule {
            reference: reference.to_owned(),
        };
        match self.resolve(reference) {
            Some(Resolved::Builtin(name)) => self.engine.load_builtin(name),
            Some(Resolved::Uploaded(id)) => {
                self.get(&id).map(|entry| entry.module).ok_or_else(unknown)
            }
            None => Err(unknown()),
        }
    }

    /// An uploaded module by id.
    pub fn get(&self, id: &str) -> Option<Entry> {
        self.modules
            .read()
            .expect("registry poisoned")
            .get(id)
            .cloned()
    }

    /// Every uploaded module, by id.
    pub fn list(&self) -> Vec<Entry> {
        self.modules
            .read()
            .expect("registry poisoned")
            .values()
            .cloned()
            .collect()
    }

    /// Validates `bytes` (loads, passes the self-test) and stores them.
    /// Returns the entry and whether it is new: the same bytes again answer
    /// the existing entry (its first name and version) and store nothing.
    /// A taken name is refused before anything is compiled, and a refused
    /// component's compiled form is evicted again, so refusals cost no
    /// memory and no cache space. A new module past the caps
    /// ([`ModuleCaps`]) is refused. Slow (compiles): call it off the async
    /// threads.
    pub fn upload(
        &self,
        name: &str,
        version: &str,
        bytes: &[u8],
    ) -> Result<(Entry, bool), RegistryError> {
        self.add(name, version, bytes, true)
    }

    /// [`Self::upload`] of a module the cluster holds already, whatever the
    /// caps: the cluster's modules are counted when they are uploaded, and
    /// a node must be able to run every one of them.
    pub fn copy(
        &self,
        name: &str,
        version: &str,
        bytes: &[u8],
    ) -> Result<(Entry, bool), RegistryError> {
        self.add(name, version, bytes, false)
    }

    fn add(
        &self,
        name: &str,
        version: &str,
        bytes: &[u8],
        capped: bool,
    ) -> Result<(Entry, bool), RegistryError> {
        check_name("name", name)?;
        check_name("version", version)?;
        let id = crate::plugins::module_id(bytes);
        if let Some(entry) = self.get(&id) {
            return Ok((entry, false));
        }
        self.check_name_free(name, version)?;
        // Before anything is compiled; again under `mutation` in `store`.
        if capped {
            self.check_caps(bytes.len() as u64)?;
        }
        let module = self.engine.load(bytes).map_err(RegistryError::Invalid)?;
        let stored = self.store(module, name, version, bytes, capped);
        if stored.is_err() {
            self.engine.evict(&id);
        }
        stored
    }

    /// Refuses `name@version` if an uploaded module has it.
    fn check_name_free(&self, name: &str, version: &str) -> Result<(), RegistryError> {
        match self.resolve(&format!("{name}@{version}")) {
            Some(Resolved::Uploaded(id)) => Err(RegistryError::NameTaken {
                name: name.to_owned(),
                version: version.to_owned(),
                id,
            }),
            _ => Ok(()),
        }
    }

    /// The rest of [`Self::upload`], once `module` compiled: the
    /// self-test, then the checks again under `mutation` (another upload
    /// may have won the race), then the files.
    fn store(
        &self,
        module: Arc<LoadedModule>,
        name: &str,
        version: &str,
        bytes: &[u8],
        capped: bool,
    ) -> Result<(Entry, bool), RegistryError> {
        self_test(&self.engine, &module)?;
        let _mutation = self.mutation.blocking_lock();
        if let Some(entry) = self.get(&module.id) {
            return Ok((entry, false));
        }
        self.check_name_free(name, version)?;
        if capped {
            self.check_caps(bytes.len() as u64)?;
        }
        let entry = Entry {
            module,
            name: name.to_owned(),
            version: version.to_owned(),
            size_bytes: bytes.len() as u64,
            uploaded_at_ms: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64),
        };
        if let Some(dir) = &self.dir {
            let sidecar = Sidecar {
                name: entry.name.clone(),
                version: entry.version.clone(),
                size_bytes: entry.size_bytes,
                uploaded_at_ms: entry.uploaded_at_ms,
            };
            let id = &entry.module.id;
            // The bytes first: a sidecar is only ever next to its module.
            write_durably(dir, &format!("{id}.wasm"), bytes)
                .and_then(|()| {
                    write_durably(
                        dir,
                        &format!("{id}.json"),
                        &serde_json::to_vec_pretty(&sidecar).expect("a sidecar serializes"),
                    )
                })
                .map_err(|e| RegistryError::Storage(format!("{e:#}")))?;
        }
        self.modules
            .write()
            .expect("registry poisoned")
            .insert(entry.module.id.clone(), entry.clone());
        self.publish_gauges();
        Ok((entry, true))
    }

    /// Unlists a module; the caller holds `mutation` and has checked that
    /// no group is bound to it. Its files are removed by [`Self::remove_files`].
    pub(crate) fn unlist(&self, id: &str) -> Option<Entry> {
        let entry = self.modules.write().expect("registry poisoned").remove(id);
        self.publish_gauges();
        entry
    }

    /// Removes an unlisted module's files (the sidecar first, so a crash in
    /// between leaves an orphan `.wasm` that start-up ignores) and its
    /// compiled form, in memory and in the engine's cache directory.
    pub(crate) fn remove_files(&self, id: &str) -> Result<(), RegistryError> {
        self.engine.evict(id);
        let Some(dir) = &self.dir else {
            return Ok(());
        };
        for ext in ["json", "wasm"] {
            let path = dir.join(format!("{id}.{ext}"));
            match std::fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    return Err(RegistryError::Storage(format!(
                        "cannot remove {}: {e}",
                        path.display()
                    )));
                }
            }
        }
        sync_dir(dir).map_err(|e| RegistryError::Storage(format!("{e:#}")))
    }
}

fn check_name(what: &str, value: &str) -> Result<(), RegistryError> {
    if value.is_empty() || value.len() > MODULE_NAME_LEN_MAX {
        return Err(RegistryError::InvalidName(format!(
            "the module {what} must be 1 to {MODULE_NAME_LEN_MAX} bytes"
        )));
    }
    if value.contains(['@', '/']) {
        return Err(RegistryError::InvalidName(format!(
            "the module {what} {value:?} must not contain '@' or '/'"
        )));
    }
    crate::protocol::names::check_name(&format!("the module {what}"), value)
        .map_err(|refused| RegistryError::InvalidName(refused.to_string()))
}

/// The limits of a params check: a well-behaved assignor answers the small
/// self-test group in well under a million fuel units.
const PARAMS_CHECK_LIMITS: Limits = Limits {
    fuel_base: 50_000_000,
    fuel_per_item: 0,
    fuel_max: 50_000_000,
    time_limit_ms: 200,
    memory_max_bytes: 64 << 20,
    output_rows_per_task_max: 8,
    output_rows_max: 1_000,
    log_lines_max: 0,
    // The refusal's message is cut to this, as a log line would be.
    log_line_len_max: 4096,
    log_bytes_max: 0,
};

fn self_test_input() -> assignd_guest_sdk::GroupInput {
    group(&GroupSpec::grid(
        SELF_TEST_MEMBERS,
        SELF_TEST_TASKS_PER_MEMBER,
        SELF_TEST_TOPICS,
        Subscriptions::Homogeneous,
    ))
}

/// The group of the self-test: a few members over a few dozen tasks.
const SELF_TEST_MEMBERS: u32 = 4;
const SELF_TEST_TASKS_PER_MEMBER: u32 = 12;
const SELF_TEST_TOPICS: u32 = 3;

/// One assignment on a small generated group, within the default limits,
/// on a guest thread (below the host's priority, as guest calls run); the
/// engine checks the answer is a valid assignment of that input.
fn self_test(engine: &Arc<PluginEngine>, module: &Arc<LoadedModule>) -> Result<(), RegistryError> {
    let (engine_on_thread, module) = (engine.clone(), module.clone());
    engine
        .on_guest_thread_blocking(move || {
            engine_on_thread
                .assign(&module, &self_test_input(), &Limits::default())
                .map(|_| ())
        })?
        .map_err(|error| RegistryError::SelfTest {
            members: SELF_TEST_MEMBERS as usize,
            tasks: (SELF_TEST_MEMBERS * SELF_TEST_TASKS_PER_MEMBER) as usize,
            error,
        })
}

/// Writes `name` in `dir`, readable by its owner only, whole or not at all
/// ([`durable::write_file`]: a temporary file, fsync, rename, fsync of the
/// folder).
fn write_durably(dir: &Path, name: &str, bytes: &[u8]) -> anyhow::Result<()> {
    let path = dir.join(name);
    let tmp = dir.join(format!("{name}.tmp{}", std::process::id()));
    durable::write_file(&tmp, &path, &[bytes], private_file, Folder::Path(dir))
        .map(drop)
        .map_err(|e| e.source.into())
}

fn sync_dir(dir: &Path) -> anyhow::Result<()> {
    #[cfg(unix)]
    std::fs::File::open(dir)?.sync_all()?;
    Ok(())
}

/// An assignor's `info()` as JSON, as `assignd info` prints it, with the
/// version of the assignor interface it was built for (`wit_version`; a
/// 0.1 component never balances load).
pub fn info_json(module: &LoadedModule) -> Value {
    let info = &module.info;
    json!({
        "name": info.name,
        "version": info.version,
        "description": info.description,
        "wit_version": module.wit_version.as_str(),
        "capabilities": {
            "learners": info.capabilities.learners,
            "standbys": info.capabilities.standbys,
            "racks": info.capabilities.racks,
            "load": info.capabilities.load,
        },
        "params": info.params.iter().map(|p| json!({
            "name": p.name, "default": p.default_value, "description": p.description,
        })).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugins::{EngineConfig, builtin_component};

    fn engine() -> Arc<PluginEngine> {
        Arc::new(
            PluginEngine::new(EngineConfig {
                concurrent_calls_max: 2,
                ..EngineConfig::default()
            })
            .unwrap(),
        )
    }

    #[test]
    fn uploads_survive_reopening_and_deleted_ones_do_not() {
        let dir = std::env::temp_dir().join(format!("assignd-registry-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let engine = engine();
        let bytes = builtin_component("sticky").unwrap();
        let id = {
            let registry = Registry::open(engine.clone(), &dir).unwrap();
            let (entry, new) = registry.upload("mine", "1.0", bytes).unwrap();
            assert!(new);
            let (again, new) = registry.upload("other", "2", bytes).unwrap();
            assert!(!new, "same bytes, same module");
            assert_eq!(
                (again.name.as_str(), again.version.as_str()),
                ("mine", "1.0")
            );
            entry.module.id.clone()
        };
        let registry = Registry::open(engine.clone(), &dir).unwrap();
        assert_eq!(
            registry.resolve("mine@1.0"),
            Some(Resolved::Uploaded(id.clone()))
        );
        assert_eq!(registry.resolve(&id), Some(Resolved::Uploaded(id.clone())));
        assert_eq!(
            registry.resolve("sticky"),
            Some(Resolved::Builtin("sticky"))
        );
        assert_eq!(registry.resolve("mine@2"), None);
        assert_eq!(registry.load("mine@1.0").unwrap().info.name, "sticky");
        registry.unlist(&id).unwrap();
        registry.remove_files(&id).unwrap();
        let registry = Registry::open(engine, &dir).unwrap();
        assert!(registry.list().is_empty());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn bad_names_and_bytes_store_nothing() {
        let registry = Registry::in_memory(engine());
        let bytes = builtin_component("range").unwrap();
        assert!(matches!(
            registry.upload("a@b", "1", bytes),
            Err(RegistryError::InvalidName(_))
        ));
        for (name, version) in [("a\nb", "1"), ("a", "1\u{202e}0"), ("a\u{200b}", "1")] {
            let Err(RegistryError::InvalidName(message)) = registry.upload(name, version, bytes)
            else {
                panic!("{name:?}@{version:?} is refused as a name");
            };
            assert!(message.contains("are refused"), "{message}");
        }
        assert!(matches!(
            registry.upload("a", "1", b"garbage"),
            Err(RegistryError::Invalid(PluginError::NotWasm { .. }))
        ));
        assert!(matches!(
            registry.upload("a", "1", &bytes[..bytes.len() / 2]),
            Err(RegistryError::Invalid(_))
        ));
        assert!(registry.list().is_empty());
        assert!(matches!(
            registry.load("a@1"),
            Err(PluginError::UnknownModule { .. })
        ));
    }
}
