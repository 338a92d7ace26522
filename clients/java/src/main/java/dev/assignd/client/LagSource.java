package dev.assignd.client;

import java.util.List;

/**
 * Where the application's lag figures come from: the state it keeps for tasks
 * it does not process (learners, standbys) lags behind their changelogs.
 * Called on the member's thread before every heartbeat, so it must be quick;
 * the rows replace the member's previous report on the host. A learner at or
 * under the group's acceptable recovery lag counts as caught up, and its task
 * moves here.
 */
@FunctionalInterface
public interface LagSource {

    /** A member that keeps no state: it reports no lags. */
    LagSource NONE = assignment -> List.of();

    /**
     * The lag (records behind the changelog's end) of the learner and standby
     * tasks of {@code assignment}, and of any other task whose state this member
     * keeps, if it wants the host to know.
     */
    List<Lag> lags(Assignment assignment);
}
