package dev.assignd.client;

import java.util.Collections;
import java.util.SortedSet;
import java.util.TreeSet;

/**
 * A member's assignment as the application has been told it. Immutable; every
 * set is sorted (see {@link Task}).
 *
 * @param active   tasks the application may process
 * @param revoking tasks the application was asked to release and has not
 *                 acknowledged yet (still reported owned)
 * @param learner  tasks to warm up and report lag on; a learner the host
 *                 stopped listing stays while it may still be promoted
 * @param standby  hot copies to keep
 * @param draining the member is draining
 */
public record Assignment(
        SortedSet<Task> active,
        SortedSet<Task> revoking,
        SortedSet<Task> learner,
        SortedSet<Task> standby,
        boolean draining) {

    public static final Assignment EMPTY = new Assignment(
            new TreeSet<>(), new TreeSet<>(), new TreeSet<>(), new TreeSet<>(), false);

    public Assignment {
        active = frozen(active);
        revoking = frozen(revoking);
        learner = frozen(learner);
        standby = frozen(standby);
    }

    private static SortedSet<Task> frozen(SortedSet<Task> tasks) {
        return Collections.unmodifiableSortedSet(new TreeSet<>(tasks));
    }

    /** Whether {@code task} is active here or being released. */
    public boolean holds(Task task) {
        return active.contains(task) || revoking.contains(task);
    }
}
