//! A shard's routing tables and change signals ([`RouteWatches`]): one
//! `tokio::sync::watch` per watched group, sent the table's epoch when a
//! step's records change it (so a watcher costs nothing while its table
//! does not change), and each group's table serialized once per epoch.

use std::collections::HashMap;
use std::sync::Mutex;

use tokio::sync::watch;

use crate::protocol::group::Record;

/// A shard's routing tables already serialized, and the change signals of
/// its watched groups.
#[derive(Default)]
pub(super) struct RouteWatches {
    signals: Mutex<HashMap<String, watch::Sender<u64>>>,
    tables: Mutex<HashMap<String, (u64, bytes::Bytes)>>,
}

impl RouteWatches {
    /// A receiver told each new table epoch of `group`.
    pub(super) fn subscribe(&self, group: &str, epoch: u64) -> watch::Receiver<u64> {
        let mut signals = self.signals.lock().unwrap_or_else(|e| e.into_inner());
        // Signals nobody listens to any more are dropped here, so the map
        // holds only groups with a watcher (or one that just left).
        signals.retain(|_, sender| sender.receiver_count() > 0);
        signals
            .entry(group.to_owned())
            .or_insert_with(|| watch::Sender::new(epoch))
            .subscribe()
    }

    /// The step's records: each watched group whose table they changed is
    /// told its new epoch.
    pub(super) fn notify(&self, records: &[Record], epoch_of: impl Fn(&str) -> Option<u64>) {
        if !records.iter().any(Record::changes_routes) {
            return;
        }
        let signals = self.signals.lock().unwrap_or_else(|e| e.into_inner());
        if signals.is_empty() {
            return;
        }
        for record in records.iter().filter(|r| r.changes_routes()) {
            if let Some(sender) = signals.get(record.group())
                && let Some(epoch) = epoch_of(record.group())
            {
                sender.send_if_modified(|seen| std::mem::replace(seen, epoch) != epoch);
            }
        }
    }

    /// A shard that stops being served: every watcher wakes (and finds
    /// its group served elsewhere), and no table is kept.
    pub(super) fn close(&self) {
        self.signals
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
        self.tables
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }

    pub(super) fn cached(&self, group: &str, epoch: u64) -> Option<bytes::Bytes> {
        let tables = self.tables.lock().unwrap_or_else(|e| e.into_inner());
        tables
            .get(group)
            .filter(|(cached, _)| *cached == epoch)
            .map(|(_, json)| json.clone())
    }

    pub(super) fn keep(&self, group: &str, epoch: u64, json: bytes::Bytes) {
        let mut tables = self.tables.lock().unwrap_or_else(|e| e.into_inner());
        tables.insert(group.to_owned(), (epoch, json));
    }
}
