package dev.assignd.client;

import java.lang.System.Logger.Level;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalLong;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;

/**
 * The shell around one {@link MemberMachine}, on a thread of its own: it sends
 * what the machine builds (on a second thread, so the lease timers fire while
 * a request is in flight), sleeps until the machine's timeout, passes answers,
 * failures, acknowledgements, drains and leaves in with the time, hands the
 * events to the {@link Dispatcher} and publishes the machine's state for
 * {@link Member}. It decides nothing itself.
 */
final class MemberLoop implements Runnable {

    private static final System.Logger LOG = System.getLogger(MemberLoop.class.getName());

    /** What reaches the member's thread from the others. */
    private sealed interface Input {
        record Ack(long id) implements Input {
        }

        record Drain() implements Input {
        }

        record SetEndpoint(String endpoint, Map<String, String> metadata) implements Input {
        }

        /** Loads, and the utilisation and load capacity when not {@code null}. */
        record ReportLoad(Map<Task, Double> loads, Double utilisation, Double loadCapacity) implements Input {
        }

        record Leave() implements Input {
        }

        record Abort() implements Input {
        }

        record Answered(HeartbeatResponse response) implements Input {
        }

        record Failed(Failure failure) implements Input {
        }
    }

    /** The machine's state as last published, for any thread to read. */
    record Status(String memberId, long memberEpoch, Assignment assignment, Long leaseUntilMs, StopReason stopped) {
    }

    private final BlockingQueue<Input> inbox = new LinkedBlockingQueue<>();
    private final MemberMachine machine;
    private final Transport transport;
    private final LagSource lagSource;
    private final Dispatcher dispatcher;
    private final ExecutorService sender;
    private final CompletableFuture<StopReason> closed = new CompletableFuture<>();
    /** The instant the machine's time 0 stands for, in {@link System#nanoTime()}. */
    private final long origin = System.nanoTime();
    private volatile Status status = new Status(null, 0, Assignment.EMPTY, null, null);
    private boolean sending;

    MemberLoop(MemberMachine machine, Transport transport, LagSource lagSource, RebalanceListener listener,
            String name) {
        this.machine = machine;
        this.transport = transport;
        this.lagSource = lagSource;
        this.dispatcher = new Dispatcher(listener, this::ack, "assignd-listener-" + name);
        this.sender = Executors.newSingleThreadExecutor(runnable -> {
            Thread t = new Thread(runnable, "assignd-heartbeat-" + name);
            t.setDaemon(true);
            return t;
        });
    }

    // ---- for any thread ----

    Status status() {
        return status;
    }

    /** Milliseconds on the machine's clock. */
    long nowMs() {
        return (System.nanoTime() - origin) / 1_000_000;
    }

    CompletableFuture<StopReason> closed() {
        return closed;
    }

    void ack(long id) {
        inbox.add(new Input.Ack(id));
    }

    void drain() {
        inbox.add(new Input.Drain());
    }

    void setEndpoint(String endpoint, Map<String, String> metadata) {
        inbox.add(new Input.SetEndpoint(endpoint, metadata));
    }

    void reportLoad(Map<Task, Double> loads, Double utilisation, Double loadCapacity) {
        inbox.add(new Input.ReportLoad(loads, utilisation, loadCapacity));
    }

    void leave() {
        inbox.add(new Input.Leave());
    }

    void abort() {
        inbox.add(new Input.Abort());
    }

    boolean isListenerThread() {
        return dispatcher.isListenerThread();
    }

    // ---- the member's thread ----

    @Override
    public void run() {
        try {
            if (loop()) {
                StopReason reason = machine.stopped().orElseThrow();
                LOG.log(Level.INFO, "member stopped: {0}", reason.wireName());
                // After every event the listener has yet to hear.
                dispatcher.run(() -> closed.complete(reason));
                dispatcher.shutdown();
            } else {
                dispatcher.shutdownNow();
                closed.completeExceptionally(new CancellationException("the member was aborted"));
            }
        } catch (InterruptedException e) {
            dispatcher.shutdownNow();
            closed.completeExceptionally(new CancellationException("the member's thread was interrupted"));
        } catch (RuntimeException | Error e) {
            LOG.log(Level.ERROR, "the member's thread failed", e);
            dispatcher.shutdownNow();
            closed.completeExceptionally(e);
            throw e;
        } finally {
            sender.shutdownNow();
        }
    }

    /** Runs the machine until it stops (true) or the member is aborted (false). */
    private boolean loop() throws InterruptedException {
        while (true) {
            long now = nowMs();
            machine.tick(now);
            publish();
            deliver();
            if (machine.stopped().isPresent()) {
                return true;
            }
            if (!sending && machine.requestDue(now)) {
                send(now);
            }
            if (!take(machine.pollTimeout())) {
                return false;
            }
        }
    }

    private void send(long now) {
        reportLags();
        Optional<HeartbeatRequest> request = machine.pollRequest(now);
        if (request.isEmpty()) {
            return;
        }
        sending = true;
        // Published before it goes: a leave gives up every task, and
        // mayProcess must say so before the host can hand them on.
        publish();
        HeartbeatRequest body = request.get();
        try {
            sender.execute(() -> inbox.add(exchange(body)));
        } catch (RejectedExecutionException e) {
            inbox.add(new Input.Failed(new Failure.Unreached("the member is stopping")));
        }
    }

    private Input exchange(HeartbeatRequest request) {
        try {
            return new Input.Answered(transport.heartbeat(request));
        } catch (HeartbeatFailedException e) {
            return new Input.Failed(e.failure());
        } catch (RuntimeException e) {
            LOG.log(Level.ERROR, "sending a heartbeat failed", e);
            return new Input.Failed(new Failure.NoAnswer(e.toString()));
        }
    }

    private void reportLags() {
        try {
            List<Lag> lags = lagSource.lags(machine.assignment());
            machine.reportLags(lags == null ? List.of() : lags);
        } catch (RuntimeException e) {
            LOG.log(Level.WARNING, "the lag source failed: the last report stands", e);
        }
    }

    /** Waits for an input until {@code wake}; returns false when the member is aborted. */
    private boolean take(OptionalLong wake) throws InterruptedException {
        Input input;
        if (wake.isEmpty()) {
            input = inbox.take();
        } else {
            long waitNanos = origin + wake.getAsLong() * 1_000_000 - System.nanoTime();
            input = inbox.poll(Math.max(waitNanos, 0), TimeUnit.NANOSECONDS);
        }
        if (input == null) {
            return true;
        }
        long now = nowMs();
        if (input instanceof Input.Ack ack) {
            machine.ack(ack.id(), now);
        } else if (input instanceof Input.Drain) {
            machine.drain(now);
        } else if (input instanceof Input.SetEndpoint change) {
            machine.setEndpoint(change.endpoint(), change.metadata());
        } else if (input instanceof Input.ReportLoad report) {
            report.loads().forEach(machine::setLoad);
            if (report.utilisation() != null) {
                machine.setUtilisation(report.utilisation());
            }
            if (report.loadCapacity() != null) {
                machine.setLoadCapacity(report.loadCapacity());
            }
        } else if (input instanceof Input.Leave) {
            machine.leave(now);
        } else if (input instanceof Input.Abort) {
            return false;
        } else if (input instanceof Input.Answered answered) {
            sending = false;
            machine.onAnswer(answered.response(), now);
        } else if (input instanceof Input.Failed failed) {
            sending = false;
            LOG.log(Level.DEBUG, "heartbeat failed: {0}: {1}", failed.failure().kind(), failed.failure().message());
            machine.onFailure(failed.failure(), now);
        }
        return true;
    }

    private void deliver() {
        for (Optional<MemberEvent> event = machine.pollEvent(); event.isPresent(); event = machine.pollEvent()) {
            log(event.get());
            dispatcher.deliver(event.get());
        }
    }

    private void publish() {
        OptionalLong lease = machine.leaseUntil();
        status = new Status(machine.memberId().orElse(null), machine.memberEpoch(), machine.assignment(),
                lease.isPresent() ? lease.getAsLong() : null, machine.stopped().orElse(null));
    }

    private void log(MemberEvent event) {
        Level level;
        if (event instanceof MemberEvent.Lost || event instanceof MemberEvent.Fenced) {
            level = Level.WARNING;
        } else if (event instanceof MemberEvent.Error) {
            level = Level.DEBUG;
        } else {
            level = Level.INFO;
        }
        LOG.log(level, "member {0} epoch {1}: {2}", machine.memberId().orElse("(joining)"),
                String.valueOf(machine.memberEpoch()),
                event);
    }
}
