//! Where records go, and in which order. [`RecordSink`] is the persistence
//! boundary: `assignd serve` persists into the record log
//! ([`crate::log::LogSink`], fsync and group commit), `assignd demo` into
//! [`CountingSink`], which only counts. [`RecordQueue`] feeds a sink
//! from one thread: batches are queued under the core's lock, so the sink
//! sees records in exactly the order the core applied them, and each
//! submitter waits for its own batch without holding that lock. Batches
//! that queue up while the sink is busy are handed over in one `persist`
//! call — the shape group commit needs. A step that wrote nothing waits
//! only for the records of its own group still in flight ([`Durable`]):
//! its answer shows that group's state and nothing else, so a slow write
//! of another group of the shard does not hold it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, OnceLock};

use tokio::sync::{oneshot, watch};

use super::scope::Scope;
use crate::protocol::group::Record;

/// Makes records durable. `persist` returns only once `records` are
/// durable; it is called from one thread at a time, in apply order.
pub trait RecordSink: Send + Sync + 'static {
    fn persist(&self, records: &[Record]) -> anyhow::Result<()>;
}

/// A sink that keeps nothing and counts what it was given: the in-process
/// demo's (`assignd demo`), whose group need not survive a restart.
#[derive(Debug, Default)]
pub struct CountingSink {
    records: AtomicU64,
    calls: AtomicU64,
}

impl CountingSink {
    /// Records persisted so far.
    pub fn records(&self) -> u64 {
        self.records.load(Ordering::SeqCst)
    }

    /// `persist` calls so far (several submitted batches may share one).
    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::SeqCst)
    }
}

impl RecordSink for CountingSink {
    fn persist(&self, records: &[Record]) -> anyhow::Result<()> {
        self.records
            .fetch_add(records.len() as u64, Ordering::SeqCst);
        self.calls.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

/// Why a batch is not durable. After the first failure every later batch
/// fails too: the core's state is ahead of what the sink holds, and
/// answering anything from it would acknowledge state a restart loses.
#[derive(Clone, Debug, thiserror::Error)]
#[error("persisting records failed: {message}")]
pub struct PersistError {
    pub message: Arc<str>,
    /// The storage could not be reached (a sink's [`StorageUnavailable`]):
    /// whether the batch landed is unknown, and a shard loaded again from
    /// the storage once it answers serves exactly what landed.
    pub unavailable: bool,
}

impl PersistError {
    pub fn new(message: impl Into<Arc<str>>) -> Self {
        PersistError {
            message: message.into(),
            unavailable: false,
        }
    }

    fn of(error: &anyhow::Error) -> Self {
        PersistError {
            message: format!("{error:#}").into(),
            unavailable: error.downcast_ref::<StorageUnavailable>().is_some(),
        }
    }
}

/// The error a sink fails with when its storage does not answer (cluster
/// mode's etcd without a quorum), as opposed to refusing or losing data.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct StorageUnavailable(pub String);

/// One submitter's records and where to say they are durable.
struct Batch {
    records: Vec<Record>,
    done: oneshot::Sender<Result<(), PersistError>>,
}

/// The ordered queue in front of a sink, served by its own OS thread (a
/// sink may block on fsync). Dropping the queue stops the thread once the
/// batches already queued are persisted.
pub struct RecordQueue {
    sender: Option<mpsc::Sender<Batch>>,
    thread: Option<std::thread::JoinHandle<()>>,
    /// The first failure: every batch after it fails with it.
    failed: Arc<OnceLock<PersistError>>,
    /// Non-empty batches submitted, and how many of them are durable (the
    /// persistence thread sends the count after each persist, and sends
    /// again, unchanged, when one fails): a request that changed nothing
    /// need not wait for the persistence thread when what it showed is
    /// already durable. Batches are numbered from 1 in submission order,
    /// so batch `n` is durable once the count reaches `n`.
    submitted: AtomicU64,
    durable: watch::Receiver<u64>,
    /// Per group, the number of the last batch that held a record of it
    /// (groups whose batches are all durable may be left out).
    last_batch: Mutex<HashMap<String, u64>>,
}

/// Groups kept in [`RecordQueue::last_batch`] past which those whose
/// batches are durable are dropped from it.
const LAST_BATCH_GROUPS_KEPT: usize = 1024;

/// What a step's answer waits for: its own records, and everything queued
/// before them, to be durable; or, for a step that wrote nothing, the
/// records of its group still in flight ([`RecordQueue::submit_for`]).
pub enum Durable {
    /// Nothing to wait for.
    Now,
    /// A batch sent to the persistence thread, answered once it (and all
    /// before it) is durable.
    Batch(oneshot::Receiver<Result<(), PersistError>>),
    /// Batch number `batch` (and all before it) to be durable.
    Until {
        batch: u64,
        durable: watch::Receiver<u64>,
        failed: Arc<OnceLock<PersistError>>,
    },
}

impl Durable {
    /// Waits; fails if what was waited for cannot be made durable.
    pub async fn wait(self) -> Result<(), PersistError> {
        let stopped = || PersistError::new("the persistence thread has stopped");
        match self {
            Durable::Now => Ok(()),
            Durable::Batch(receiver) => receiver.await.map_err(|_| stopped())?,
            Durable::Until {
                batch,
                mut durable,
                failed,
            } => loop {
                if *durable.borrow_and_update() >= batch {
                    return Ok(());
                }
                // A failure: batch `batch` is durable now or never (every
                // batch after a failure fails). The count is read again:
                // the thread sends it before a later persist can fail.
                if let Some(failure) = failed.get() {
                    return if *durable.borrow() >= batch {
                        Ok(())
                    } else {
                        Err(failure.clone())
                    };
                }
                if durable.changed().await.is_err() {
                    return if *durable.borrow() >= batch {
                        Ok(())
                    } else {
                        Err(failed.get().cloned().unwrap_or_else(stopped))
                    };
                }
            },
        }
    }
}

impl RecordQueue {
    pub fn start(sink: Arc<dyn RecordSink>) -> Self {
        let (sender, receiver) = mpsc::channel::<Batch>();
        let failed = Arc::new(OnceLock::new());
        let thread_failed = failed.clone();
        let (thread_durable, durable) = watch::channel(0);
        let thread = std::thread::Builder::new()
            .name("assignd-persist".into())
            .spawn(move || persist_loop(&*sink, &receiver, &thread_failed, &thread_durable))
            .expect("cannot start the persistence thread");
        RecordQueue {
            sender: Some(sender),
            thread: Some(thread),
            failed,
            submitted: AtomicU64::new(0),
            durable,
            last_batch: Mutex::default(),
        }
    }

    /// Whether a persist has failed (the runtime then refuses every
    /// request).
    pub fn failed(&self) -> bool {
        self.failed.get().is_some()
    }

    /// Where the first failure is kept, to read without the queue.
    pub fn failure_cell(&self) -> Arc<OnceLock<PersistError>> {
        self.failed.clone()
    }

    /// The failure every batch fails with from now on, if a persist failed.
    pub fn failure(&self) -> Option<&PersistError> {
        self.failed.get()
    }

    /// Queues `records` (call this under the core's lock, right after the
    /// core emitted them, so that queue order is apply order). The receiver
    /// resolves once they, and everything queued before them, are durable;
    /// an empty batch is a barrier that resolves once everything before it
    /// is.
    pub fn submit(&self, records: Vec<Record>) -> oneshot::Receiver<Result<(), PersistError>> {
        let (done, receiver) = oneshot::channel();
        if records.is_empty()
            && *self.durable.borrow() == self.submitted.load(Ordering::SeqCst)
            && !self.failed()
        {
            // A barrier with nothing before it: already satisfied.
            let _ = done.send(Ok(()));
            return receiver;
        }
        if !records.is_empty() {
            let batch = self.submitted.fetch_add(1, Ordering::SeqCst) + 1;
            self.note_groups(&records, batch);
        }
        let sender = self.sender.as_ref().expect("only taken on drop");
        if let Err(mpsc::SendError(batch)) = sender.send(Batch { records, done }) {
            // The thread is gone (it only stops when the queue is dropped,
            // or if the sink panicked).
            let _ = batch
                .done
                .send(Err(PersistError::new("the persistence thread has stopped")));
        }
        receiver
    }

    /// Queues the records of a step of `scope` as [`RecordQueue::submit`]
    /// does. A step that wrote records waits for
    /// them and everything before them (the sink persists in order). A
    /// step of a group that wrote nothing waits only for that group's
    /// batches still in flight: its answer shows that group's state, which
    /// the batches of other groups do not change, so it is durable once
    /// they are.
    pub fn submit_for(&self, scope: Scope<'_>, records: Vec<Record>) -> Durable {
        let group = match scope {
            Scope::Group(group) if records.is_empty() => group,
            _ => return Durable::Batch(self.submit(records)),
        };
        let durable = *self.durable.borrow();
        let mut last_batch = self.last_batch.lock().unwrap_or_else(|e| e.into_inner());
        match last_batch.get(group) {
            Some(&batch) if batch > durable => Durable::Until {
                batch,
                durable: self.durable.clone(),
                failed: self.failed.clone(),
            },
            Some(_) => {
                last_batch.remove(group);
                Durable::Now
            }
            None => Durable::Now,
        }
    }

    /// `records` are in batch number `batch`.
    fn note_groups(&self, records: &[Record], batch: u64) {
        let mut last_batch = self.last_batch.lock().unwrap_or_else(|e| e.into_inner());
        for record in records {
            match last_batch.get_mut(record.group()) {
                Some(last) => *last = batch,
                None => {
                    last_batch.insert(record.group().to_owned(), batch);
                }
            }
        }
        if last_batch.len() > LAST_BATCH_GROUPS_KEPT {
            let durable = *self.durable.borrow();
            last_batch.retain(|_, &mut last| last > durable);
        }
    }
}

impl Drop for RecordQueue {
    /// Persists what is queued, then stops the thread.
    fn drop(&mut self) {
        self.sender.take();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A storage that does not answer (etcd without a quorum) is an outage
/// the node reports where it sees it and recovers from by itself: the
/// shard is loaded again once etcd answers, so it is a WARN. Any other
/// failure (a disk error, a refusal of the write) needs a person.
fn log_persist_failure(failure: &PersistError, records: usize) {
    if failure.unavailable {
        tracing::warn!(error = %failure.message, records, "persisting records failed: the storage does not answer; this shard refuses requests until it is loaded again");
    } else {
        tracing::error!(error = %failure.message, records, "persisting records failed; this shard refuses every request from now on");
    }
}

fn persist_loop(
    sink: &dyn RecordSink,
    receiver: &mpsc::Receiver<Batch>,
    failed: &OnceLock<PersistError>,
    durable: &watch::Sender<u64>,
) {
    while let Ok(first) = receiver.recv() {
        // Everything that queued up while the last persist ran goes out in
        // one call.
        let mut waiting = vec![first];
        waiting.extend(receiver.try_iter());
        let mut records = Vec::new();
        let mut replies = Vec::with_capacity(waiting.len());
        let non_empty = waiting.iter().filter(|b| !b.records.is_empty()).count() as u64;
        for batch in waiting {
            records.extend(batch.records);
            replies.push(batch.done);
        }
        let result = if let Some(failure) = failed.get() {
            Err(failure.clone())
        } else if records.is_empty() {
            Ok(())
        } else {
            sink.persist(&records).map_err(|e| {
                let failure = PersistError::of(&e);
                log_persist_failure(&failure, records.len());
                failed.get_or_init(|| failure).clone()
            })
        };
        if result.is_ok() {
            durable.send_modify(|count| *count += non_empty);
        } else {
            // Wakes those waiting for a batch that will never be durable.
            durable.send_modify(|_| {});
        }
        for reply in replies {
            // A submitter that went away (its client hung up) is fine: its
            // records are persisted all the same.
            let _ = reply.send(result.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    /// Keeps the group name of every record, and how many calls it got.
    #[derive(Default)]
    struct Keep {
        groups: Mutex<Vec<String>>,
        fail_after: Option<usize>,
    }

    impl RecordSink for Keep {
        fn persist(&self, records: &[Record]) -> anyhow::Result<()> {
            let mut groups = self.groups.lock().unwrap();
            if self
                .fail_after
                .is_some_and(|n| groups.len() + records.len() > n)
            {
                anyhow::bail!("full");
            }
            groups.extend(records.iter().map(|r| r.group().to_owned()));
            Ok(())
        }
    }

    fn record(n: usize) -> Record {
        Record::NameMapDropped {
            group: n.to_string(),
        }
    }

    #[test]
    fn batches_are_persisted_in_submission_order() {
        let sink = Arc::new(Keep::default());
        let queue = RecordQueue::start(sink.clone());
        let receivers: Vec<_> = (0..200)
            .map(|n| queue.submit(if n % 3 == 0 { vec![] } else { vec![record(n)] }))
            .collect();
        for receiver in receivers {
            receiver.blocking_recv().unwrap().unwrap();
        }
        let expected: Vec<String> = (0..200)
            .filter(|n| n % 3 != 0)
            .map(|n| n.to_string())
            .collect();
        assert_eq!(*sink.groups.lock().unwrap(), expected);
    }

    #[test]
    fn after_a_failure_every_batch_fails() {
        let sink = Arc::new(Keep {
            fail_after: Some(2),
            ..Keep::default()
        });
        let queue = RecordQueue::start(sink.clone());
        let results: Vec<bool> = (0..5)
            .map(|n| {
                queue
                    .submit(vec![record(n)])
                    .blocking_recv()
                    .unwrap()
                    .is_ok()
            })
            .collect();
        assert_eq!(results, [true, true, false, false, false]);
        assert!(queue.failed());
        assert!(queue.submit(vec![]).blocking_recv().unwrap().is_err());
        assert_eq!(sink.groups.lock().unwrap().len(), 2);
    }

    /// Holds every persist until the test opens it, then fails those of
    /// records of group "fail".
    struct Gate {
        open: Mutex<bool>,
        opened: std::sync::Condvar,
        /// Persist calls begun.
        entered: AtomicU64,
    }

    impl Gate {
        fn new() -> Arc<Gate> {
            Arc::new(Gate {
                open: Mutex::new(false),
                opened: std::sync::Condvar::new(),
                entered: AtomicU64::new(0),
            })
        }

        /// Waits until a persist call has begun.
        fn wait_entered(&self) {
            while self.entered.load(Ordering::SeqCst) == 0 {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        }

        fn open(&self) {
            *self.open.lock().unwrap() = true;
            self.opened.notify_all();
        }
    }

    impl RecordSink for Gate {
        fn persist(&self, records: &[Record]) -> anyhow::Result<()> {
            self.entered.fetch_add(1, Ordering::SeqCst);
            let mut open = self.open.lock().unwrap();
            while !*open {
                open = self.opened.wait(open).unwrap();
            }
            if records.iter().any(|r| r.group() == "fail") {
                anyhow::bail!("refused");
            }
            Ok(())
        }
    }

    fn of(group: &str) -> Record {
        Record::NameMapDropped {
            group: group.to_owned(),
        }
    }

    /// Whether `durable` resolves within a short wait (it resolves at
    /// once when there is nothing to wait for).
    fn resolves(runtime: &tokio::runtime::Runtime, durable: Durable) -> Option<bool> {
        runtime.block_on(async {
            tokio::time::timeout(std::time::Duration::from_millis(200), durable.wait())
                .await
                .ok()
                .map(|result| result.is_ok())
        })
    }

    #[test]
    fn a_step_that_wrote_nothing_waits_only_for_its_own_groups_records() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let gate = Gate::new();
        let queue = RecordQueue::start(gate.clone());
        let written = queue.submit_for(Scope::Group("a"), vec![of("a")]);
        // Another group's answer shows nothing of the write in flight.
        assert_eq!(
            resolves(&runtime, queue.submit_for(Scope::Group("b"), vec![])),
            Some(true)
        );
        // Its own group's answer may show it: it waits, as does a step of
        // the whole shard.
        let same_group = queue.submit_for(Scope::Group("a"), vec![]);
        let whole_shard = queue.submit_for(Scope::Shard, vec![]);
        assert_eq!(
            resolves(&runtime, queue.submit_for(Scope::Group("a"), vec![])),
            None
        );
        gate.open();
        for durable in [written, same_group, whole_shard] {
            assert_eq!(resolves(&runtime, durable), Some(true));
        }
        assert_eq!(
            resolves(&runtime, queue.submit_for(Scope::Group("a"), vec![])),
            Some(true)
        );
    }

    #[test]
    fn a_group_whose_write_failed_is_never_answered_and_the_others_are() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let gate = Gate::new();
        let queue = RecordQueue::start(gate.clone());
        queue.submit_for(Scope::Group("a"), vec![of("a")]);
        // a's batch is persisted on its own, and lands.
        gate.wait_entered();
        let a_durable = queue.submit_for(Scope::Group("a"), vec![]);
        // Queued after a's batch: it fails with it, whatever group.
        let failed = queue.submit_for(Scope::Group("fail"), vec![of("fail")]);
        let waiting = queue.submit_for(Scope::Group("fail"), vec![]);
        gate.open();
        assert_eq!(resolves(&runtime, failed), Some(false));
        assert_eq!(resolves(&runtime, waiting), Some(false));
        // a's records landed before the failure: its state is durable.
        assert_eq!(resolves(&runtime, a_durable), Some(true));
        assert_eq!(
            resolves(&runtime, queue.submit_for(Scope::Group("a"), vec![])),
            Some(true)
        );
        assert_eq!(
            resolves(&runtime, queue.submit_for(Scope::Group("fail"), vec![])),
            Some(false)
        );
    }

    /// Fails every persist as a storage that does not answer.
    struct Unreachable;

    impl RecordSink for Unreachable {
        fn persist(&self, _records: &[Record]) -> anyhow::Result<()> {
            Err(anyhow::Error::new(StorageUnavailable("no quorum".into())).context("writing"))
        }
    }

    #[test]
    fn an_unreachable_storage_is_told_apart_and_every_later_batch_says_so() {
        let queue = RecordQueue::start(Arc::new(Unreachable));
        for n in 0..3 {
            let failure = queue
                .submit(vec![record(n)])
                .blocking_recv()
                .unwrap()
                .unwrap_err();
            assert!(failure.unavailable, "{failure}");
            assert!(failure.message.contains("no quorum"), "{failure}");
        }
        assert!(queue.failure().is_some_and(|f| f.unavailable));
        // A sink's other errors are not.
        let queue = RecordQueue::start(Arc::new(Keep {
            fail_after: Some(0),
            ..Keep::default()
        }));
        let failure = queue.submit(vec![record(0)]).blocking_recv().unwrap();
        assert!(!failure.unwrap_err().unavailable);
    }
}
