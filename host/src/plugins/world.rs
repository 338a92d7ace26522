//! The versions of the assignor interface the host runs: 0.2 (the guest
//! SDK's, with loads) and 0.1 (before loads), each with its own bindings
//! (`world/v0_1.rs`, `world/v0_2.rs`). A component's version is read from
//! its exports before anything is compiled; the host then calls it through
//! that version's bindings and hands it that version's input (a 0.1
//! component gets no loads), and its `info()` when it is loaded. Answers
//! are the same in both versions, so the validation of an answer does not
//! depend on the version.

use std::sync::Arc;

use assignd_guest_sdk::{AssignError, Assignment, GroupInput, Info};
use wasmtime::component::{HasSelf, InstancePre, Linker};
use wasmtime::{Engine, Store};

use super::error::PluginError;
use super::limits::Limits;
use super::sandbox::{CallSlots, GuestState, capped, classify, new_store};

/// A version of the `assignd:assignor` package.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WitVersion {
    V0_1,
    V0_2,
}

impl WitVersion {
    /// Every version the host runs, newest first.
    pub const ALL: [WitVersion; 2] = [WitVersion::V0_2, WitVersion::V0_1];

    /// The newest version: the guest SDK's.
    pub const NEWEST: WitVersion = WitVersion::V0_2;

    /// The package version, e.g. "0.2.0".
    pub fn as_str(self) -> &'static str {
        match self {
            WitVersion::V0_1 => "0.1.0",
            WitVersion::V0_2 => "0.2.0",
        }
    }

    /// `assignd:assignor/NAME@VERSION`: the name of one of its interfaces.
    pub fn interface(self, name: &str) -> String {
        format!("assignd:assignor/{name}@{}", self.as_str())
    }
}

impl std::fmt::Display for WitVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Links the host's imports of every version (each its own `log`).
pub(super) fn add_to_linker(linker: &mut Linker<GuestState>) -> wasmtime::Result<()> {
    v0_1::Plugin::add_to_linker::<_, HasSelf<_>>(linker, |state| state)?;
    v0_2::Plugin::add_to_linker::<_, HasSelf<_>>(linker, |state| state)?;
    Ok(())
}

/// A component pre-linked for its version.
#[derive(Clone)]
pub(super) enum WorldPre {
    V0_1(v0_1::PluginPre<GuestState>),
    V0_2(v0_2::PluginPre<GuestState>),
}

/// An instance of a component, to call once.
pub(super) enum WorldInstance {
    V0_1(v0_1::Plugin),
    V0_2(v0_2::Plugin),
}

impl WorldPre {
    /// Checks that the component's exports have `version`'s shape.
    pub(super) fn new(
        version: WitVersion,
        pre: InstancePre<GuestState>,
    ) -> Result<Self, PluginError> {
        let shape = |e: wasmtime::Error| PluginError::WrongShape(format!("{e:#}"));
        Ok(match version {
            WitVersion::V0_1 => WorldPre::V0_1(v0_1::PluginPre::new(pre).map_err(shape)?),
            WitVersion::V0_2 => WorldPre::V0_2(v0_2::PluginPre::new(pre).map_err(shape)?),
        })
    }

    pub(super) fn instantiate(
        &self,
        store: &mut Store<GuestState>,
    ) -> wasmtime::Result<WorldInstance> {
        Ok(match self {
            WorldPre::V0_1(pre) => WorldInstance::V0_1(pre.instantiate(store)?),
            WorldPre::V0_2(pre) => WorldInstance::V0_2(pre.instantiate(store)?),
        })
    }
}

impl WorldInstance {
    /// `info()`, its strings cut to `len_max` bytes.
    pub(super) fn call_info(
        &self,
        store: &mut Store<GuestState>,
        len_max: usize,
    ) -> wasmtime::Result<Info> {
        match self {
            WorldInstance::V0_1(plugin) => v0_1::call_info(plugin, store, len_max),
            WorldInstance::V0_2(plugin) => v0_2::call_info(plugin, store, len_max),
        }
    }

    /// `assign(input)`, with the input of this version; the guest's
    /// refusal is the inner error.
    pub(super) fn call_assign(
        &self,
        store: &mut Store<GuestState>,
        input: &GroupInput,
    ) -> wasmtime::Result<Result<Assignment, AssignError>> {
        match self {
            WorldInstance::V0_1(plugin) => v0_1::call_assign(plugin, store, input),
            WorldInstance::V0_2(plugin) => v0_2::call_assign(plugin, store, input),
        }
    }
}

/// What an `info()` call needs of its engine, owned, so that it can run
/// on a guest thread while the engine's `load` waits for it.
pub(super) struct InfoCall {
    pub engine: Engine,
    pub slots: Arc<CallSlots>,
    pub memory_ceiling_bytes: u64,
    pub pre: WorldPre,
}

/// Calls `info()` on a fresh instance.
pub(super) fn call_info(call: &InfoCall, limits: &Limits) -> Result<Info, PluginError> {
    let limits = &capped(call.memory_ceiling_bytes, limits);
    let fuel = limits.fuel_base;
    let _slot = call.slots.acquire();
    let mut store = new_store(&call.engine, limits, fuel);
    let pre = &call.pre;
    let plugin = match pre.instantiate(&mut store) {
        Ok(plugin) => plugin,
        Err(e) => {
            return Err(PluginError::Instantiate(format!(
                "{:#}",
                classify(e, &store, limits, fuel)
            )));
        }
    };
    plugin
        .call_info(&mut store, limits.log_line_len_max)
        .map_err(|e| classify(e, &store, limits, fuel))
}

/// The conversions both versions share (their types have the same shape
/// but are distinct Rust types): the types and log hosts, the answer and
/// the refusal, and `info()` but for its capabilities. Expanded inside
/// each version's module, next to its `bindgen!`.
macro_rules! shared_glue {
    () => {
        use self::assignd::assignor::log::{Host as LogHost, Level};
        use self::assignd::assignor::types as wit;

        /// The types interface has no functions; the linker still wants it.
        impl wit::Host for GuestState {}

        impl LogHost for GuestState {
            fn log(&mut self, level: Level, message: String) {
                let level = match level {
                    Level::Trace => "trace",
                    Level::Debug => "debug",
                    Level::Info => "info",
                    Level::Warn => "warn",
                    Level::Error => "error",
                };
                self.log_line(level, message);
            }
        }

        /// The guest's answer as the host's types.
        fn answer(
            answer: Result<wit::Assignment, wit::AssignError>,
        ) -> Result<assignd_guest_sdk::Assignment, assignd_guest_sdk::AssignError> {
            use assignd_guest_sdk::{AssignError, Assignment, TaskMembers};
            match answer {
                Ok(answer) => Ok(Assignment {
                    active_owner: answer.active_owner,
                    learners: TaskMembers {
                        task: answer.learners.task,
                        member: answer.learners.member,
                    },
                    standbys: TaskMembers {
                        task: answer.standbys.task,
                        member: answer.standbys.member,
                    },
                }),
                Err(wit::AssignError::InvalidParam(m)) => Err(AssignError::InvalidParam(m)),
                Err(wit::AssignError::UnsupportedInput(m)) => Err(AssignError::UnsupportedInput(m)),
                Err(wit::AssignError::Failed(m)) => Err(AssignError::Failed(m)),
            }
        }

        /// Calls `info()`; its strings cut to `len_max` bytes.
        pub(super) fn call_info(
            plugin: &Plugin,
            store: &mut wasmtime::Store<GuestState>,
            len_max: usize,
        ) -> wasmtime::Result<assignd_guest_sdk::Info> {
            use super::super::sandbox::truncate;
            let info = plugin.assignd_assignor_assignor().call_info(store)?;
            Ok(assignd_guest_sdk::Info {
                name: truncate(info.name, len_max),
                version: truncate(info.version, len_max),
                description: truncate(info.description, len_max),
                capabilities: capabilities(&info.capabilities),
                params: info
                    .params
                    .into_iter()
                    .map(|p| assignd_guest_sdk::ParamSpec {
                        name: truncate(p.name, len_max),
                        default_value: truncate(p.default_value, len_max),
                        description: truncate(p.description, len_max),
                    })
                    .collect(),
            })
        }
    };
}

// After the macro: its textual scope covers them.
mod v0_1;
mod v0_2;

/// Refuses components that import anything but the log and types
/// interfaces of the version whose assignor interface they export, or that
/// export no version's assignor interface, naming the offending item.
/// Reads only the component's own import and export sections (not those of
/// the modules and components nested in it), from the bytes: nothing is
/// compiled. The component's version is the one it exports.
pub(super) fn check_world(bytes: &[u8]) -> Result<WitVersion, PluginError> {
    let (imports, exports) = top_level_names(bytes)?;
    let ours = |name: &str, version: WitVersion| {
        name == version.interface("log") || name == version.interface("types")
    };
    if let Some(name) = imports
        .iter()
        .find(|name| !WitVersion::ALL.iter().any(|v| ours(name, *v)))
    {
        return Err(PluginError::ForeignImport { name: name.clone() });
    }
    let Some(version) = WitVersion::ALL
        .into_iter()
        .find(|v| exports.contains(&v.interface("assignor")))
    else {
        return Err(PluginError::WrongWorld {
            exports: if exports.is_empty() {
                "nothing".into()
            } else {
                exports.join(", ")
            },
        });
    };
    // The log of another version than the export's: a component made of
    // two SDKs' halves. Refused like any import the world lacks.
    if let Some(name) = imports.iter().find(|name| !ours(name, version)) {
        return Err(PluginError::ForeignImport { name: name.clone() });
    }
    Ok(version)
}

/// The names of the component's own imports and exports.
fn top_level_names(bytes: &[u8]) -> Result<(Vec<String>, Vec<String>), PluginError> {
    use wasmparser::{Parser, Payload};
    let (mut imports, mut exports) = (Vec::new(), Vec::new());
    let mut depth = 0_u32;
    let parse_error = |e: wasmparser::BinaryReaderError| PluginError::Compile(e.to_string());
    for payload in Parser::new(0).parse_all(bytes) {
        match payload.map_err(parse_error)? {
            Payload::ModuleSection { .. } | Payload::ComponentSection { .. } => depth += 1,
            Payload::End(_) => depth = depth.saturating_sub(1),
            Payload::ComponentImportSection(section) if depth == 0 => {
                for import in section {
                    imports.push(import.map_err(parse_error)?.name.name.to_owned());
                }
            }
            Payload::ComponentExportSection(section) if depth == 0 => {
                for export in section {
                    exports.push(export.map_err(parse_error)?.name.name.to_owned());
                }
            }
            _ => {}
        }
    }
    Ok((imports, exports))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn component(imports: &[&str], export: &str) -> Vec<u8> {
        let imports: String = imports
            .iter()
            .map(|name| format!("(import {name:?} (instance))"))
            .collect();
        wat::parse_str(format!(
            "(component {imports} (instance $a) (export {export:?} (instance $a)))"
        ))
        .expect("parses")
    }

    #[test]
    fn a_component_is_of_the_version_it_exports() {
        for version in WitVersion::ALL {
            let bytes = component(
                &[&version.interface("types"), &version.interface("log")],
                &version.interface("assignor"),
            );
            assert_eq!(check_world(&bytes).unwrap(), version);
        }
    }

    #[test]
    fn a_component_of_no_version_is_told_both() {
        let bytes = component(&[], "assignd:assignor/assignor@0.3.0");
        let error = check_world(&bytes).unwrap_err();
        assert!(matches!(error, PluginError::WrongWorld { .. }), "{error:?}");
        let message = error.to_string();
        for said in [
            "assignd:assignor/assignor@0.2.0",
            "assignd:assignor/assignor@0.1.0",
            "it exports: assignd:assignor/assignor@0.3.0",
        ] {
            assert!(message.contains(said), "{said}: {message}");
        }
    }

    #[test]
    fn a_log_of_another_version_than_the_export_is_refused() {
        let bytes = component(
            &["assignd:assignor/log@0.1.0"],
            &WitVersion::V0_2.interface("assignor"),
        );
        match check_world(&bytes) {
            Err(PluginError::ForeignImport { name }) => {
                assert_eq!(name, "assignd:assignor/log@0.1.0")
            }
            other => panic!("expected ForeignImport, got {other:?}"),
        }
    }

    /// The versions the host runs are the guest SDK's.
    #[test]
    fn the_versions_are_the_sdks() {
        let ours: Vec<&str> = WitVersion::ALL.iter().rev().map(|v| v.as_str()).collect();
        assert_eq!(ours, assignd_guest_sdk::WIT_VERSIONS);
        assert_eq!(WitVersion::NEWEST.as_str(), assignd_guest_sdk::WIT_VERSION);
        assert!(assignd_guest_sdk::WIT_0_1.contains("package assignd:assignor@0.1.0;"));
    }
}
