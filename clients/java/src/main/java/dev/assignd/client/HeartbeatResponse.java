package dev.assignd.client;

import java.util.Collections;
import java.util.SortedSet;
import java.util.TreeSet;

/**
 * The 200 answer to a heartbeat.
 *
 * @param leaseMs           how long after the heartbeat was <em>sent</em> the
 *                          member may process its tasks without a newer answer;
 *                          {@code null} from a host before leases
 * @param unreachedLeaseMs  the longer lease that holds while none of the
 *                          member's later heartbeats reaches a coordinator;
 *                          {@code null} from a host before it
 * @param unreachedFlightMs while a heartbeat is in flight, the unreached lease
 *                          counts only up to that heartbeat's send time plus this
 * @param loadReport        what the next heartbeat reports of the member's loads
 */
public record HeartbeatResponse(
        String memberId,
        long memberEpoch,
        long heartbeatIntervalMs,
        SortedSet<Task> active,
        SortedSet<Task> revoking,
        SortedSet<Task> learner,
        SortedSet<Task> standby,
        boolean draining,
        boolean drained,
        Long leaseMs,
        Long unreachedLeaseMs,
        Long unreachedFlightMs,
        LoadReport loadReport) {

    /** An answer from a host without loads. */
    public HeartbeatResponse(String memberId, long memberEpoch, long heartbeatIntervalMs, SortedSet<Task> active,
            SortedSet<Task> revoking, SortedSet<Task> learner, SortedSet<Task> standby, boolean draining,
            boolean drained, Long leaseMs, Long unreachedLeaseMs, Long unreachedFlightMs) {
        this(memberId, memberEpoch, heartbeatIntervalMs, active, revoking, learner, standby, draining, drained, leaseMs,
                unreachedLeaseMs, unreachedFlightMs, LoadReport.NONE);
    }

    public HeartbeatResponse {
        active = frozen(active);
        revoking = frozen(revoking);
        learner = frozen(learner);
        standby = frozen(standby);
        loadReport = loadReport == null ? LoadReport.NONE : loadReport;
    }

    private static SortedSet<Task> frozen(SortedSet<Task> tasks) {
        return Collections.unmodifiableSortedSet(new TreeSet<>(tasks == null ? new TreeSet<>() : tasks));
    }
}
