package dev.assignd.client;

import java.util.List;
import java.util.Map;
import java.util.Objects;

/**
 * Who a member is and what it subscribes to, as the {@link MemberMachine}
 * needs it.
 *
 * @param memberName a static member's name, or {@code null} for a dynamic member
 * @param topics     the subscription, sent on every join
 * @param rack       the member's rack, or {@code null}
 * @param capacity   its relative capacity, 1 or more
 * @param idPrefix   the member ids the machine chooses are {@code {idPrefix}-{n}},
 *                   n = 1, 2, ...: a fresh one for each new join, the same for
 *                   every retry of a join (so a retried join the host did handle
 *                   is the same member). {@link Member} draws it at random.
 * @param endpoint   where the member serves (a URL or {@code host:port}), for the group's
 *                   routing table; {@code null} publishes none. Sent on every join.
 * @param metadata   small string pairs published with it; sent on every join unless empty
 * @param loadThreshold how far (relative) a task's load moves from the value the host acknowledged
 *                   before it is sent again
 */
public record MachineConfig(String memberName, List<String> topics, String rack, int capacity, String idPrefix,
        String endpoint, Map<String, String> metadata, double loadThreshold) {

    /** A member that publishes no endpoint. */
    public MachineConfig(String memberName, List<String> topics, String rack, int capacity, String idPrefix) {
        this(memberName, topics, rack, capacity, idPrefix, null, Map.of());
    }

    /** A member with the default load threshold (10 %). */
    public MachineConfig(String memberName, List<String> topics, String rack, int capacity, String idPrefix,
            String endpoint, Map<String, String> metadata) {
        this(memberName, topics, rack, capacity, idPrefix, endpoint, metadata, LoadBook.LOAD_THRESHOLD_DEFAULT);
    }

    public MachineConfig {
        topics = List.copyOf(topics);
        metadata = Map.copyOf(metadata);
        Objects.requireNonNull(idPrefix, "idPrefix");
        if (capacity < 1) {
            throw new IllegalArgumentException("capacity must be at least 1");
        }
    }

    /** The same member, serving at {@code endpoint} ({@code null}: nowhere) with {@code metadata}. */
    public MachineConfig withEndpoint(String endpoint, Map<String, String> metadata) {
        return new MachineConfig(memberName, topics, rack, capacity, idPrefix, endpoint, metadata, loadThreshold);
    }
}
