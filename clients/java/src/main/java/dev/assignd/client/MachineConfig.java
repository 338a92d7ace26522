package dev.assignd.client;

import java.util.List;
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
 */
public record MachineConfig(String memberName, List<String> topics, String rack, int capacity, String idPrefix) {

    public MachineConfig {
        topics = List.copyOf(topics);
        Objects.requireNonNull(idPrefix, "idPrefix");
        if (capacity < 1) {
            throw new IllegalArgumentException("capacity must be at least 1");
        }
    }
}
