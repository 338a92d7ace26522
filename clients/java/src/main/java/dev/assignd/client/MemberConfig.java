package dev.assignd.client;

import java.time.Duration;
import java.util.List;
import java.util.Objects;

/**
 * A member's identity and subscription, and where its host is. Immutable;
 * build one with {@link #of} and the {@code with...} methods.
 *
 * @param url            the host's base URL, e.g. {@code http://127.0.0.1:7070}; for a
 *                       cluster, several separated by commas (bootstrap URLs, tried in
 *                       turn while none answers): any node redirects to the coordinator
 * @param group          the group's name
 * @param memberName     a static member's name (KIP-345): a restart under the same name
 *                       within the registration timeout gets its tasks back; {@code null}
 *                       joins as a dynamic member
 * @param topics         the topics to subscribe to, at least one
 * @param rack           the member's rack, or {@code null}
 * @param capacity       its relative capacity, 1 or more
 * @param memberToken    the group's member token, sent as {@code Authorization: Bearer};
 *                       {@code null} if the group has none
 * @param requestTimeout how long one heartbeat may take, redirects and retries included
 */
public record MemberConfig(
        String url,
        String group,
        String memberName,
        List<String> topics,
        String rack,
        int capacity,
        String memberToken,
        Duration requestTimeout) {

    /** How long one heartbeat may take by default. */
    public static final Duration REQUEST_TIMEOUT_DEFAULT = Duration.ofSeconds(5);

    public MemberConfig {
        Objects.requireNonNull(url, "url");
        Objects.requireNonNull(group, "group");
        topics = List.copyOf(topics);
        Objects.requireNonNull(requestTimeout, "requestTimeout");
    }

    /** A dynamic member of {@code group} at {@code url} subscribing to {@code topics}, capacity 1, no rack. */
    public static MemberConfig of(String url, String group, List<String> topics) {
        return new MemberConfig(url, group, null, topics, null, 1, null, REQUEST_TIMEOUT_DEFAULT);
    }

    /** Makes this a static member named {@code name}. */
    public MemberConfig withName(String name) {
        return new MemberConfig(url, group, name, topics, rack, capacity, memberToken, requestTimeout);
    }

    public MemberConfig withRack(String rack) {
        return new MemberConfig(url, group, memberName, topics, rack, capacity, memberToken, requestTimeout);
    }

    public MemberConfig withCapacity(int capacity) {
        return new MemberConfig(url, group, memberName, topics, rack, capacity, memberToken, requestTimeout);
    }

    /** Sends {@code token} as the group's member token. */
    public MemberConfig withMemberToken(String token) {
        return new MemberConfig(url, group, memberName, topics, rack, capacity, token, requestTimeout);
    }

    public MemberConfig withRequestTimeout(Duration timeout) {
        return new MemberConfig(url, group, memberName, topics, rack, capacity, memberToken, timeout);
    }

    /**
     * Checks what can be checked without asking the host.
     *
     * @throws IllegalArgumentException naming what cannot work
     */
    public void check() {
        if (group.isEmpty()) {
            throw new IllegalArgumentException("the group name is empty");
        }
        if (topics.isEmpty()) {
            throw new IllegalArgumentException("a member must subscribe to at least one topic");
        }
        if ("".equals(memberName)) {
            throw new IllegalArgumentException("a static member's name must not be empty");
        }
        if (capacity < 1) {
            throw new IllegalArgumentException("capacity must be at least 1");
        }
        if (requestTimeout.isZero() || requestTimeout.isNegative()) {
            throw new IllegalArgumentException("the request timeout must be above zero");
        }
        if (memberToken != null && (memberToken.isEmpty() || !memberToken.chars().allMatch(c -> c > 0x20 && c < 0x7f))) {
            throw new IllegalArgumentException("a member token must be visible ASCII characters, at least one");
        }
        HeartbeatUrls.all(url, group);
    }

    /** Never prints the member token. */
    @Override
    public String toString() {
        return "MemberConfig[url=" + url + ", group=" + group + ", memberName=" + memberName + ", topics=" + topics
                + ", rack=" + rack + ", capacity=" + capacity + ", memberToken=" + (memberToken == null ? null : "..")
                + ", requestTimeout=" + requestTimeout + "]";
    }
}
