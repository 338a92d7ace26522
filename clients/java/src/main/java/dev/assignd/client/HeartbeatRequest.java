package dev.assignd.client;

import java.util.List;
import java.util.Map;

/**
 * The body of {@code POST /v1/groups/{group}/heartbeat}: a join (epoch 0,
 * with {@code topics}), a heartbeat (the member's id and epoch) or a leave
 * (epoch -1). {@code null} fields are absent on the wire.
 *
 * @param memberId    the member's id; on a join, the id the member chose
 * @param memberName  a static member's name, or {@code null}
 * @param memberEpoch 0 to join, -1 to leave, else the member's epoch
 * @param topics      the subscription, sent on a join only
 * @param rack        the member's rack, or {@code null}
 * @param capacity    the member's relative capacity
 * @param owned       active tasks and unacknowledged revocations the host still
 *                    holds for this member, sorted (sent as ranges)
 * @param lags        the last lag report
 * @param drain       ask the host to drain this member
 * @param taskRanges  ask for the answer's task lists as ranges
 * @param endpoint    where the member serves ({@code ""} for none), or {@code null} to leave
 *                    it out (the host keeps what it has)
 * @param metadata    the pairs published with it ({@code {}} for none), or {@code null} to
 *                    leave them out
 * @param loads       load items, sent only after an answer asked for loads, or {@code null}
 * @param utilisation the member's measured utilisation, or {@code null}
 * @param loadCapacity the load it can carry, or {@code null}
 */
public record HeartbeatRequest(
        String memberId,
        String memberName,
        long memberEpoch,
        List<String> topics,
        String rack,
        Integer capacity,
        List<Task> owned,
        List<Lag> lags,
        boolean drain,
        boolean taskRanges,
        String endpoint,
        Map<String, String> metadata,
        List<LoadItem> loads,
        Double utilisation,
        Double loadCapacity) {

    /** The member epoch a join sends. */
    public static final long JOIN_EPOCH = 0;
    /** The member epoch a leave sends. */
    public static final long LEAVE_EPOCH = -1;

    /** A request that leaves the endpoint and metadata out. */
    public HeartbeatRequest(String memberId, String memberName, long memberEpoch, List<String> topics, String rack,
            Integer capacity, List<Task> owned, List<Lag> lags, boolean drain, boolean taskRanges) {
        this(memberId, memberName, memberEpoch, topics, rack, capacity, owned, lags, drain, taskRanges, null, null);
    }

    /** A request that carries no load fields. */
    public HeartbeatRequest(String memberId, String memberName, long memberEpoch, List<String> topics, String rack,
            Integer capacity, List<Task> owned, List<Lag> lags, boolean drain, boolean taskRanges, String endpoint,
            Map<String, String> metadata) {
        this(memberId, memberName, memberEpoch, topics, rack, capacity, owned, lags, drain, taskRanges, endpoint,
                metadata, null, null, null);
    }

    public HeartbeatRequest {
        metadata = metadata == null ? null : Map.copyOf(metadata);
        topics = topics == null ? null : List.copyOf(topics);
        owned = owned == null ? null : List.copyOf(owned);
        lags = lags == null ? null : List.copyOf(lags);
        loads = loads == null ? null : List.copyOf(loads);
    }

    public boolean isLeave() {
        return memberEpoch == LEAVE_EPOCH;
    }
}
