package dev.assignd.client;

import java.util.Map;
import java.util.Objects;
import java.util.Optional;

/**
 * A member as the routing table shows it.
 *
 * @param memberId   its member id
 * @param memberName a static member's name; empty for a dynamic member
 * @param endpoint   where it serves, as it published it; empty if it did not
 * @param metadata   what it published besides (unmodifiable)
 */
public record RouteMember(String memberId, Optional<String> memberName, Optional<String> endpoint,
        Map<String, String> metadata) {

    public RouteMember {
        Objects.requireNonNull(memberId, "memberId");
        Objects.requireNonNull(memberName, "memberName");
        Objects.requireNonNull(endpoint, "endpoint");
        metadata = Map.copyOf(metadata);
    }
}
