package dev.assignd.client;

import java.util.Collection;

/**
 * What the application hears of its assignment, in the shape of Kafka's
 * {@code ConsumerRebalanceListener}. A {@link Member} calls it on one thread of
 * its own ({@code assignd-listener-...}), one call at a time, in the order the
 * member machine tells things; the heartbeats and the lease timers go on while
 * a call runs. Task collections are sorted (see {@link Task}).
 *
 * <p>Only {@link #onTasksAssigned}, {@link #onTasksRevoked} and
 * {@link #onTasksLost} matter for correctness; every other hook is
 * informational and does nothing by default. An exception thrown by a hook is
 * logged and otherwise ignored (but see {@link #onTasksRevoked}).
 */
public interface RebalanceListener {

    /**
     * These tasks are now this member's to process. Called with cold tasks, and
     * (through the default {@link #onTasksPromoted}) with learner or standby
     * copies that became active.
     */
    void onTasksAssigned(Collection<Task> tasks);

    /**
     * Stop processing these tasks (and commit what must be committed) before
     * returning. The member acknowledges the revocation as soon as this
     * returns: only then does the host give the tasks to their next owner, so
     * no task is ever processed by two members at once. Until then the member
     * keeps reporting them as owned; taking longer than the group's expansion
     * timeout gets the member fenced. If this throws, the revocation is never
     * acknowledged (the tasks may still be processing), and the host fences the
     * member past its expansion timeout.
     */
    void onTasksRevoked(Collection<Task> tasks);

    /**
     * These tasks may already be active elsewhere: stop them at once, without
     * committing. Sent when the host fenced or removed the member, when the
     * member's lease ran out without an answer (the next answer assigns them
     * again if the host still counts the member), or as the member sends a
     * leave (the host hands a dynamic member's tasks on at once). As in Kafka,
     * the default calls {@link #onTasksRevoked}; no acknowledgement follows.
     */
    default void onTasksLost(Collection<Task> tasks) {
        onTasksRevoked(tasks);
    }

    /**
     * Learner or standby copies that became active: their warm state is the
     * active state now. The default hands them to {@link #onTasksAssigned};
     * override it to treat them apart (no {@code onLearnerStopped} follows).
     */
    default void onTasksPromoted(Collection<Task> tasks) {
        onTasksAssigned(tasks);
    }

    /** The member joined (or rejoined) with this member id. */
    default void onJoined(String memberId) {
    }

    /** Start warming these up (replay their state) and report their lag through the {@link LagSource}. */
    default void onLearnerStarted(Collection<Task> tasks) {
    }

    /** Stop warming these up: they went elsewhere. */
    default void onLearnerStopped(Collection<Task> tasks) {
    }

    /** Keep hot copies of these (replay their state, report their lag). */
    default void onStandbyStarted(Collection<Task> tasks) {
    }

    default void onStandbyStopped(Collection<Task> tasks) {
    }

    /** The member is draining: its tasks will be revoked as their new owners warm up. */
    default void onDraining() {
    }

    /** The drain finished: the member holds nothing and leaves. */
    default void onDrained() {
    }

    /**
     * The host removed this member (it expired, or held tasks past the expansion
     * timeout); {@link #onTasksLost} with every held task came first. It rejoins
     * ({@code rejoining}) unless it was leaving or draining.
     */
    default void onFenced(boolean rejoining) {
    }

    /**
     * Another process joined with this member's name and took its slot: two
     * processes share a member name. The member stops without rejoining;
     * {@link #onTasksLost} came first.
     */
    default void onReplaced(String memberName) {
    }

    /** A heartbeat failed; the member retries unless the failure says otherwise. */
    default void onError(Failure failure) {
    }
}
