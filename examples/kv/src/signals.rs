//! SIGTERM and SIGINT (Ctrl-C) as one stream, installed before anything
//! they could interrupt, so a signal never finds the default action.

use tokio::signal::unix::{Signal, SignalKind, signal};

pub struct Signals {
    term: Signal,
    int: Signal,
}

impl Signals {
    pub fn install() -> std::io::Result<Self> {
        Ok(Signals {
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
        })
    }

    /// The next SIGTERM or SIGINT.
    pub async fn next(&mut self) {
        tokio::select! {
            _ = self.term.recv() => {}
            _ = self.int.recv() => {}
        }
    }
}
