package dev.assignd.client;

import java.lang.System.Logger.Level;

/**
 * The lease of a member: how long after sending the heartbeat last answered
 * it may process its tasks. The host gives nobody else the member's tasks
 * before then, however long the member is stalled.
 *
 * <p>While every heartbeat since that answer certainly reached no coordinator
 * (failed {@code unreached}: the coordinator died and no node serves the group
 * yet), no task is being released and the answer carried a flight bound, the
 * answer's longer <em>unreached lease</em> holds instead, since the host takes
 * tasks early only through a heartbeat it got. While a request is in flight
 * then, it counts only up to that request's send time plus the flight bound.
 * Any other failure brings the plain lease back until the next answer.
 */
final class Lease {

    private static final System.Logger LOG = System.getLogger(Lease.class.getName());

    /** The plain lease's end: send time plus {@code lease_ms}; {@code null} if unknown. */
    private Long until;
    private Long unreachedUntil;
    private Long flightMs;
    /** A request since the last answer failed in a way that may have reached the coordinator. */
    private boolean reachedSinceAnswer;
    /** Every request since the last answer certainly reached no coordinator: the unreached lease holds. */
    private boolean onUnreached;

    /** Takes the lease of an answer to the heartbeat sent at {@code sent}. */
    void answered(HeartbeatResponse response, long sent, String memberId) {
        if (onUnreached) {
            LOG.log(Level.INFO, "member {0}: a coordinator of the group answers again: off the unreached lease", memberId);
        }
        until = plus(sent, response.leaseMs());
        unreachedUntil = plus(sent, response.unreachedLeaseMs());
        flightMs = response.unreachedFlightMs();
        reachedSinceAnswer = false;
        onUnreached = false;
    }

    /** Judges which lease holds after a failed heartbeat. */
    void failed(Failure failure, boolean releasing, String memberId) {
        boolean unreached = failure instanceof Failure.Unreached && !reachedSinceAnswer;
        reachedSinceAnswer |= !unreached;
        // The host never answers an unreached lease past the plain one while
        // tasks are to be released (their fence may come first); checked here
        // too. Without the flight bound (a host before it), no extension: the
        // next heartbeat may reach a coordinator.
        boolean extends_ = unreached
                && !releasing
                && flightMs != null
                && until != null
                && unreachedUntil != null
                && unreachedUntil > until;
        if (extends_ == onUnreached) {
            return;
        }
        onUnreached = extends_;
        if (extends_) {
            LOG.log(Level.INFO, "member {0}: no heartbeat reaches a coordinator of the group: "
                    + "keeping the tasks on the unreached lease (plain until {1} ms, unreached until {2} ms)",
                    memberId, String.valueOf(until), String.valueOf(unreachedUntil));
        } else {
            LOG.log(Level.INFO, "member {0}: a heartbeat may have reached the coordinator: "
                    + "back on the last answer's lease", memberId);
        }
    }

    boolean onUnreached() {
        return onUnreached;
    }

    /** The end of the last answer's unreached lease, in force or not; {@code null} before one. */
    Long unreachedUntil() {
        return unreachedUntil;
    }

    /**
     * The end of the lease in force, or {@code null} before any answer with a
     * lease. {@code inFlightSent} is the send time of the request in flight, or
     * {@code null}.
     */
    Long end(Long inFlightSent) {
        if (!onUnreached) {
            return until;
        }
        Long inFlightBound;
        if (inFlightSent == null) {
            inFlightBound = unreachedUntil;
        } else if (flightMs != null) {
            inFlightBound = inFlightSent + flightMs;
        } else {
            inFlightBound = until;
        }
        // No bound known means no unreached lease.
        Long unreached = unreachedUntil == null || inFlightBound == null
                ? null
                : Math.min(unreachedUntil, inFlightBound);
        if (until == null) {
            return unreached;
        }
        return unreached == null ? until : Math.max(until, unreached);
    }

    private static Long plus(long sent, Long ms) {
        return ms == null ? null : sent + ms;
    }
}
