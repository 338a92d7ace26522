package dev.assignd.client;

import java.lang.System.Logger.Level;

/**
 * What a member does after a failed heartbeat (not a leave): the machine's
 * policy for each refusal code, and the backoff and {@code Retry-After} for
 * everything else. Kept apart from {@link MemberMachine} so each stays short.
 */
final class FailurePolicy {

    private static final System.Logger LOG = System.getLogger(FailurePolicy.class.getName());

    private FailurePolicy() {
    }

    static void apply(MemberMachine machine, Failure failure, long sent, long now) {
        boolean joined = machine.joined();
        boolean leaving = machine.leavingOrDraining();
        String code = failure.code();
        MemberEvent error = new MemberEvent.Error(failure);
        if (ErrorCodes.REPLACED.equals(code)) {
            // Refused to a join too: a retried join whose first attempt
            // the host handled, after which another process took the name.
            replaced(machine);
        } else if (joined && ErrorCodes.FENCED.equals(code)) {
            machine.loseEverything();
            machine.tell(new MemberEvent.Fenced(!leaving));
            if (leaving) {
                machine.stop(StopReason.FENCED);
            }
            machine.setDue(sent);
        } else if (ErrorCodes.FENCED.equals(code)) {
            // A join whose id the host has already removed (a retry that came
            // after the member was expired): join anew.
            machine.tell(error);
            machine.chooseJoinId();
            machine.retryLater(sent);
        } else if (joined && (ErrorCodes.UNKNOWN_MEMBER.equals(code) || ErrorCodes.UNKNOWN_GROUP.equals(code))) {
            // The slot is gone (expired, or the group deleted): every task may
            // be elsewhere already. Start over as a new member.
            machine.tell(error);
            machine.loseEverything();
            if (leaving) {
                machine.stop(StopReason.REMOVED);
            } else if (ErrorCodes.UNKNOWN_GROUP.equals(code)) {
                machine.retryLater(sent);
            } else {
                machine.setDue(sent);
            }
        } else if (joined && ErrorCodes.STALE_EPOCH.equals(code)) {
            machine.tell(error);
            if (machine.config().memberName() != null) {
                // A new incarnation of the name takes the slot with its tasks
                // as they are: nothing is lost.
                machine.forgetMemberId();
            } else {
                machine.loseEverythingButId();
                // Free the old slot's tasks now rather than at its session timeout.
                machine.beginLeave(null, now);
            }
            machine.setDue(sent);
        } else {
            machine.tell(error);
            machine.retryLater(sent);
            pauseIfAsked(machine, failure, joined, sent, now);
        }
    }

    private static void replaced(MemberMachine machine) {
        String memberName = machine.config().memberName() == null ? "" : machine.config().memberName();
        LOG.log(Level.ERROR, "member {0}: another process joined with member name {1} and took its tasks: "
                + "stopping this member (two processes must not share a member name)",
                machine.currentMemberId(), memberName);
        machine.loseEverything();
        machine.tell(new MemberEvent.Replaced(memberName));
        machine.stop(StopReason.REPLACED);
    }

    /**
     * The host asked for a pause (backpressure: a join rate limit, a connection
     * cap), counted from its answer. A joined member waits no longer than its
     * interval, so its session holds.
     */
    private static void pauseIfAsked(MemberMachine machine, Failure failure, boolean joined, long sent, long now) {
        Long hint = failure.retryAfterMs();
        if (hint == null) {
            return;
        }
        long pause = joined ? Math.min(hint, machine.intervalMs()) : hint;
        long backoff = machine.due() - sent;
        machine.setDue(now + Math.max(backoff, pause));
    }
}
