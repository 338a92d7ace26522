package dev.assignd.client;

import java.lang.System.Logger.Level;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
import java.util.function.LongConsumer;

/**
 * Hands the machine's events to a {@link RebalanceListener} on a thread of its
 * own, one at a time and in order, so a slow listener never holds up the
 * heartbeats or the lease timers. A revocation is acknowledged once the
 * listener's {@code onTasksRevoked} has returned (not if it threw: the tasks
 * may still be processing).
 */
final class Dispatcher {

    private static final System.Logger LOG = System.getLogger(Dispatcher.class.getName());

    private final RebalanceListener listener;
    private final LongConsumer ack;
    private final ExecutorService thread;
    private volatile Thread current;

    /** {@code ack} passes an acknowledgement id back to the member's thread. */
    Dispatcher(RebalanceListener listener, LongConsumer ack, String name) {
        this.listener = listener;
        this.ack = ack;
        this.thread = Executors.newSingleThreadExecutor(runnable -> {
            Thread t = new Thread(runnable, name);
            t.setDaemon(true);
            return t;
        });
    }

    /** Queues {@code event} for the listener. */
    void deliver(MemberEvent event) {
        run(() -> dispatch(event));
    }

    /** Runs {@code action} on the listener's thread after every event queued so far. */
    void run(Runnable action) {
        try {
            thread.execute(() -> {
                current = Thread.currentThread();
                action.run();
            });
        } catch (RejectedExecutionException e) {
            LOG.log(Level.DEBUG, "the listener's thread has stopped: dropping an event");
        }
    }

    /** Whether the caller is the listener's thread (it must not wait for the member to stop). */
    boolean isListenerThread() {
        return Thread.currentThread() == current;
    }

    /** Lets the queued events run, then ends the thread. */
    void shutdown() {
        thread.shutdown();
    }

    /** Drops queued events and interrupts a running one. */
    void shutdownNow() {
        thread.shutdownNow();
    }

    private void dispatch(MemberEvent event) {
        try {
            call(event);
        } catch (RuntimeException e) {
            LOG.log(Level.ERROR, "the rebalance listener failed on " + event
                    + (event instanceof MemberEvent.Revoked
                            ? ": the revocation stays unacknowledged (the host fences the member past its"
                                    + " expansion timeout)"
                            : ""), e);
            return;
        }
        if (event instanceof MemberEvent.Revoked revoked) {
            ack.accept(revoked.ack());
        }
    }

    private void call(MemberEvent event) {
        if (event instanceof MemberEvent.Joined e) {
            listener.onJoined(e.memberId());
        } else if (event instanceof MemberEvent.Assigned e) {
            listener.onTasksAssigned(e.tasks());
        } else if (event instanceof MemberEvent.Promoted e) {
            listener.onTasksPromoted(e.tasks());
        } else if (event instanceof MemberEvent.Revoked e) {
            listener.onTasksRevoked(e.tasks());
        } else if (event instanceof MemberEvent.Lost e) {
            listener.onTasksLost(e.tasks());
        } else if (event instanceof MemberEvent.LearnerStarted e) {
            listener.onLearnerStarted(e.tasks());
        } else if (event instanceof MemberEvent.LearnerStopped e) {
            listener.onLearnerStopped(e.tasks());
        } else if (event instanceof MemberEvent.StandbyStarted e) {
            listener.onStandbyStarted(e.tasks());
        } else if (event instanceof MemberEvent.StandbyStopped e) {
            listener.onStandbyStopped(e.tasks());
        } else if (event instanceof MemberEvent.Draining) {
            listener.onDraining();
        } else if (event instanceof MemberEvent.Drained) {
            listener.onDrained();
        } else if (event instanceof MemberEvent.Fenced e) {
            listener.onFenced(e.rejoining());
        } else if (event instanceof MemberEvent.Replaced e) {
            listener.onReplaced(e.memberName());
        } else if (event instanceof MemberEvent.Error e) {
            listener.onError(e.failure());
        }
    }
}
