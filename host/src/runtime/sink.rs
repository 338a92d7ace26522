//! Where records go, and in which order. [`RecordSink`] is the persistence
//! boundary: `assignd serve` persists into the record log
//! ([`crate::log::LogSink`], fsync and group commit), `assignd demo` into
//! [`CountingSink`], which only counts. [`RecordQueue`] feeds a sink
//! from one thread: batches are queued under the core's lock, so the sink
//! sees records in exactly the order the core applied them, and each
//! submitter waits for its own batch without holding that lock. Batches
//! that queue up while the sink is busy are handed over in one `persist`
//! call — the shape group commit needs.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, OnceLock};

use tokio::sync::oneshot;

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
    /// Non-empty batches submitted, and how many of them are durable: a
    /// request that changed nothing need not wait for the persistence
    /// thread when everything before it is already durable.
    submitted: AtomicU64,
    durable: Arc<AtomicU64>,
}

impl RecordQueue {
    pub fn start(sink: Arc<dyn RecordSink>) -> Self {
        let (sender, receiver) = mpsc::channel::<Batch>();
        let failed = Arc::new(OnceLock::new());
        let thread_failed = failed.clone();
        let durable = Arc::new(AtomicU64::new(0));
        let thread_durable = durable.clone();
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
            && self.durable.load(Ordering::SeqCst) == self.submitted.load(Ordering::SeqCst)
            && !self.failed()
        {
            // A barrier with nothing before it: already satisfied.
            let _ = done.send(Ok(()));
            return receiver;
        }
        if !records.is_empty() {
            self.submitted.fetch_add(1, Ordering::SeqCst);
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

fn persist_loop(
    sink: &dyn RecordSink,
    receiver: &mpsc::Receiver<Batch>,
    failed: &OnceLock<PersistError>,
    durable: &AtomicU64,
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
                tracing::error!(error = %failure.message, records = records.len(), unavailable = failure.unavailable, "persisting records failed; refusing every request from now on");
                failed.get_or_init(|| failure).clone()
            })
        };
        if result.is_ok() {
            durable.fetch_add(non_empty, Ordering::SeqCst);
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
