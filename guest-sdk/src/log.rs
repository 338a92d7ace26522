//! Logging from inside an assignor. In a component, lines go through the
//! WIT `log` import to the host, which tags them with the group and module
//! and rate-limits them. Natively (tests, benchmarks), lines are kept in a
//! per-thread buffer that [`take_native_lines`] drains.

/// Severity of a log line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Trace,
    Debug,
    Info,
    Warn,
    Error,
}

/// Lines at error level starting with this prefix carry a guest panic's
/// message; the host attaches it to the trap it reports.
pub const PANIC_PREFIX: &str = "panic: ";

/// Lines kept natively per thread before the oldest are dropped.
pub const NATIVE_LINES_MAX: usize = 1024;

#[cfg(not(target_arch = "wasm32"))]
thread_local! {
    static NATIVE_LINES: std::cell::RefCell<std::collections::VecDeque<(Level, String)>> =
        const { std::cell::RefCell::new(std::collections::VecDeque::new()) };
}

/// Sends one log line to the host.
pub fn log(level: Level, message: &str) {
    #[cfg(target_arch = "wasm32")]
    {
        use crate::bindings::assignd::assignor::log as wit;
        let level = match level {
            Level::Trace => wit::Level::Trace,
            Level::Debug => wit::Level::Debug,
            Level::Info => wit::Level::Info,
            Level::Warn => wit::Level::Warn,
            Level::Error => wit::Level::Error,
        };
        wit::log(level, message);
    }
    #[cfg(not(target_arch = "wasm32"))]
    NATIVE_LINES.with(|lines| {
        let mut lines = lines.borrow_mut();
        if lines.len() == NATIVE_LINES_MAX {
            lines.pop_front();
        }
        lines.push_back((level, message.to_owned()));
    });
}

pub fn debug(message: &str) {
    log(Level::Debug, message);
}

pub fn info(message: &str) {
    log(Level::Info, message);
}

pub fn warn(message: &str) {
    log(Level::Warn, message);
}

pub fn error(message: &str) {
    log(Level::Error, message);
}

/// Drains the lines logged natively on this thread, oldest first.
#[cfg(not(target_arch = "wasm32"))]
pub fn take_native_lines() -> Vec<(Level, String)> {
    NATIVE_LINES.with(|lines| lines.borrow_mut().drain(..).collect())
}
