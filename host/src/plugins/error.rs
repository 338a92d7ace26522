//! Every way loading or calling a plugin can fail, one variant per kind, each
//! with a message a plugin author can act on. The HTTP layer (`api/error.rs`,
//! by [`PluginError::code`]) and the CLI (`cli/mod.rs`, to an exit code) map
//! these in one place each; nothing here panics on a guest's account.

use assignd_guest_sdk::AssignError;
use assignd_guest_sdk::validate::{InvalidAssignment, InvalidInput};
use assignd_wire::ErrorCode;

/// A plugin failure.
#[derive(Debug, thiserror::Error)]
pub enum PluginError {
    /// The bytes are not WebAssembly at all.
    #[error(
        "not a WebAssembly component: the bytes do not start with the wasm magic \\0asm (they start with {prefix})"
    )]
    NotWasm { prefix: String },

    /// A core module, not a component.
    #[error(
        "this is a core WebAssembly module, not a component: build the assignor with the assignd guest SDK \
         for wasm32-unknown-unknown and turn the module into a component (`assignd-guest-build`, or \
         `wasm-tools component new`)"
    )]
    CoreModule,

    /// A wasm binary of a version or layer this host does not read.
    #[error(
        "unsupported WebAssembly binary version/layer {version:02x?}; expected a component (0d 00 01 00)"
    )]
    UnsupportedVersion { version: [u8; 4] },

    /// Wasmtime could not compile the component.
    #[error("the component does not compile: {0}")]
    Compile(String),

    /// Compiling took longer than its limit; the compiler was stopped.
    #[error(
        "compiling the component took longer than its limit of {limit_ms} ms (Cranelift's work grows with what a component asks of it; the host stopped it)"
    )]
    CompileTimeout { limit_ms: u64 },

    /// Compiling needed more memory than its limit.
    #[error(
        "compiling the component needed more than its memory limit of {limit_bytes} bytes ({detail})"
    )]
    CompileMemoryLimit { limit_bytes: u64, detail: String },

    /// The compiler process crashed for a reason other than its memory
    /// cap: a panic, a signal, an unexpected exit.
    #[error("the compiler process crashed: {detail}")]
    CompileCrashed { detail: String },

    /// The compiled artifact came out larger than its limit.
    #[error(
        "the compiled component is larger than its limit of {limit_bytes} bytes (Cranelift's output grows with what a component asks of it; the host stopped reading it)"
    )]
    CompileOutputTooLarge { limit_bytes: u64 },

    /// Too many compiles run already; try again when one is done.
    #[error("{running} components are being compiled already; try again shortly")]
    CompileBusy { running: u32 },

    /// The component imports something besides our log interface.
    /// Checked before any compile.
    #[error(
        "the component imports `{name}`, but an assignor may import only the `log` of the version of \
         the assignor interface it exports (`assignd:assignor/log@{}`, or `@0.1.0` for a 0.1 assignor) \
         (a guest is a pure function of its input: no WASI, clock, randomness, files or network). \
         Rebuild without it: Rust, for wasm32-unknown-unknown, not wasm32-wasip2; JavaScript \
         (componentize-js), with `--disable stdio random clocks http fetch-event`; Python \
         (componentize-py), with `--stub-wasi`; C, without stdio (no printf: write log lines \
         with the `log` import) and linked with `-nostartfiles -Wl,--no-entry`",
        assignd_guest_sdk::WIT_VERSION
    )]
    ForeignImport { name: String },

    /// The component exports the assignor interface of no version the
    /// host runs.
    #[error(
        "the component does not export {} (it exports: {exports}); is it an assignor built with the assignd guest SDK or its WIT?",
        assignor_interfaces()
    )]
    WrongWorld { exports: String },

    /// The export exists but its functions have other types.
    #[error(
        "the component's `assignd:assignor/assignor` export has the wrong shape for its version: {0}"
    )]
    WrongShape(String),

    /// An import of our package whose functions or types are not the
    /// host's (a guest built against another version of the WIT world).
    #[error(
        "the component's imports do not match the host's `assignd:assignor/log` of the version it exports: {0}; build it against this host's guest-sdk/wit (0.2.0) or guest-sdk/wit/v0.1"
    )]
    ImportShape(String),

    /// Instantiation failed (a start function trapped, a limit was hit).
    #[error("the component could not be instantiated: {0}")]
    Instantiate(String),

    /// The guest used up its fuel (an endless or too expensive computation).
    #[error(
        "the assignor ran out of fuel after {fuel} units (an endless loop, or a strategy too costly for this input: then raise the fuel limit)"
    )]
    OutOfFuel { fuel: u64 },

    /// The guest ran past its wall-time limit.
    #[error("the assignor ran longer than its time limit of {limit_ms} ms")]
    Timeout { limit_ms: u64 },

    /// The guest tried to grow its memory past the cap.
    #[error(
        "the assignor tried to grow its memory to {requested_bytes} bytes, past its limit of {limit_bytes} bytes"
    )]
    MemoryLimit {
        requested_bytes: u64,
        limit_bytes: u64,
    },

    /// The guest overflowed its stack (deep recursion).
    #[error("the assignor overflowed its stack (too deep a recursion?)")]
    StackOverflow,

    /// The guest panicked; the SDK forwarded the message before the trap.
    #[error("the assignor panicked: {message}")]
    Panicked { message: String },

    /// Any other trap.
    #[error("the assignor trapped: {message}")]
    Trapped { message: String },

    /// The guest answered with an error of its own.
    #[error("the assignor refused: {0}")]
    Refused(AssignError),

    /// The answer is too large to accept.
    #[error("the assignor's answer is too large: {0}")]
    OutputTooLarge(String),

    /// The answer breaks the contract.
    #[error("the assignor answered an invalid assignment: {0}")]
    InvalidAssignment(InvalidAssignment),

    /// The input breaks the contract; the guest was not called.
    #[error("{0}")]
    InvalidInput(InvalidInput),

    /// No built-in assignor of that name.
    #[error("no built-in assignor named {name:?} (built-ins: {builtins})")]
    UnknownBuiltin { name: String, builtins: String },

    /// An assignor reference that names neither a built-in nor an uploaded
    /// module (a module deleted after a call on it was started).
    #[error("no assignor {reference:?}: neither a built-in nor an uploaded module")]
    UnknownModule { reference: String },

    /// Reading a module file failed.
    #[error("cannot read module {path}: {message}")]
    Read { path: String, message: String },
}

/// "`assignd:assignor/assignor@0.2.0` or `…@0.1.0`": the assignor
/// interface of every version the host runs, newest first.
fn assignor_interfaces() -> String {
    assignd_guest_sdk::WIT_VERSIONS
        .iter()
        .rev()
        .map(|version| format!("`assignd:assignor/assignor@{version}`"))
        .collect::<Vec<_>>()
        .join(" or ")
}

impl PluginError {
    /// Whether the failure is the guest's fault at call time (as opposed to
    /// a module that could not be loaded or input that was refused).
    pub fn is_guest_failure(&self) -> bool {
        matches!(
            self,
            PluginError::OutOfFuel { .. }
                | PluginError::Timeout { .. }
                | PluginError::MemoryLimit { .. }
                | PluginError::StackOverflow
                | PluginError::Panicked { .. }
                | PluginError::Trapped { .. }
                | PluginError::Refused(_)
                | PluginError::OutputTooLarge(_)
                | PluginError::InvalidAssignment(_)
        )
    }

    /// The stable code of what failed, for API errors (and, spelled
    /// by [`Self::code`], for metrics and recorded failures).
    pub fn error_code(&self) -> ErrorCode {
        match self {
            PluginError::NotWasm { .. } => ErrorCode::NotWasm,
            PluginError::CoreModule => ErrorCode::CoreModule,
            PluginError::UnsupportedVersion { .. } => ErrorCode::UnsupportedWasmVersion,
            PluginError::Compile(_) => ErrorCode::CompileFailed,
            PluginError::CompileTimeout { .. } => ErrorCode::CompileTimeout,
            PluginError::CompileMemoryLimit { .. } => ErrorCode::CompileMemoryLimit,
            PluginError::CompileCrashed { .. } => ErrorCode::CompileCrashed,
            PluginError::CompileOutputTooLarge { .. } => ErrorCode::CompileOutputTooLarge,
            PluginError::CompileBusy { .. } => ErrorCode::CompileBusy,
            PluginError::ForeignImport { .. } => ErrorCode::ForeignImport,
            PluginError::WrongWorld { .. } => ErrorCode::WrongWorld,
            PluginError::WrongShape(_) | PluginError::ImportShape(_) => ErrorCode::WrongWorld,
            PluginError::Instantiate(_) => ErrorCode::InstantiateFailed,
            PluginError::OutOfFuel { .. } => ErrorCode::OutOfFuel,
            PluginError::Timeout { .. } => ErrorCode::Timeout,
            PluginError::MemoryLimit { .. } => ErrorCode::MemoryLimit,
            PluginError::StackOverflow => ErrorCode::StackOverflow,
            PluginError::Panicked { .. } => ErrorCode::Panicked,
            PluginError::Trapped { .. } => ErrorCode::Trapped,
            PluginError::Refused(_) => ErrorCode::Refused,
            PluginError::OutputTooLarge(_) => ErrorCode::OutputTooLarge,
            PluginError::InvalidAssignment(_) => ErrorCode::InvalidAssignment,
            PluginError::InvalidInput(_) => ErrorCode::InvalidInput,
            PluginError::UnknownBuiltin { .. } | PluginError::UnknownModule { .. } => {
                ErrorCode::UnknownAssignor
            }
            PluginError::Read { .. } => ErrorCode::ReadFailed,
        }
    }

    /// [`Self::error_code`] as the error body spells it.
    pub fn code(&self) -> &'static str {
        self.error_code().as_str()
    }
}
