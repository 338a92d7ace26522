package dev.assignd.client;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.TreeMap;

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
 * @param endpoint       where this member serves (a URL or {@code host:port}), published in
 *                       the group's routing table for routers to send its keys to;
 *                       {@code null} publishes none. {@link Member#setEndpoint} changes it.
 * @param loadCapacity   the load it can carry, in the group's load unit, reported when the host
 *                       asks for loads; {@code null}: none
 * @param loadThreshold  how far (relative) a task's load moves from what the host has before it
 *                       is sent again (default 0.1: 10 %)
 * @param metadata       small string pairs published with it (zone, version, ...), at most
 *                       {@link #METADATA_PAIRS_MAX}
 */
public record MemberConfig(
        String url,
        String group,
        String memberName,
        List<String> topics,
        String rack,
        int capacity,
        String memberToken,
        Duration requestTimeout,
        String endpoint,
        Map<String, String> metadata,
        Double loadCapacity,
        double loadThreshold) {

    /** How long one heartbeat may take by default. */
    public static final Duration REQUEST_TIMEOUT_DEFAULT = Duration.ofSeconds(5);
    /** The host's limits on a member's endpoint and metadata ({@code docs/routing.md}); past them a heartbeat is refused. */
    public static final int ENDPOINT_BYTES_MAX = 256;
    public static final int METADATA_PAIRS_MAX = 16;
    public static final int METADATA_KEY_BYTES_MAX = 64;
    public static final int METADATA_VALUE_BYTES_MAX = 256;

    public MemberConfig {
        Objects.requireNonNull(url, "url");
        Objects.requireNonNull(group, "group");
        topics = List.copyOf(topics);
        Objects.requireNonNull(requestTimeout, "requestTimeout");
        metadata = Map.copyOf(metadata);
    }

    /** A dynamic member of {@code group} at {@code url} subscribing to {@code topics}, capacity 1, no rack. */
    public static MemberConfig of(String url, String group, List<String> topics) {
        return new MemberConfig(url, group, null, topics, null, 1, null, REQUEST_TIMEOUT_DEFAULT, null, Map.of(), null,
                LoadBook.LOAD_THRESHOLD_DEFAULT);
    }

    /** Makes this a static member named {@code name}. */
    public MemberConfig withName(String name) {
        return new MemberConfig(url, group, name, topics, rack, capacity, memberToken, requestTimeout, endpoint, metadata, loadCapacity, loadThreshold);
    }

    public MemberConfig withRack(String rack) {
        return new MemberConfig(url, group, memberName, topics, rack, capacity, memberToken, requestTimeout, endpoint, metadata, loadCapacity, loadThreshold);
    }

    public MemberConfig withCapacity(int capacity) {
        return new MemberConfig(url, group, memberName, topics, rack, capacity, memberToken, requestTimeout, endpoint, metadata, loadCapacity, loadThreshold);
    }

    /** Sends {@code token} as the group's member token. */
    public MemberConfig withMemberToken(String token) {
        return new MemberConfig(url, group, memberName, topics, rack, capacity, token, requestTimeout, endpoint, metadata, loadCapacity, loadThreshold);
    }

    /** Publishes {@code endpoint} (a URL or {@code host:port}, visible ASCII) as where this member serves. */
    public MemberConfig withEndpoint(String endpoint) {
        return new MemberConfig(url, group, memberName, topics, rack, capacity, memberToken, requestTimeout, endpoint,
                metadata, loadCapacity, loadThreshold);
    }

    /** Publishes the pair {@code key} = {@code value} with the endpoint. */
    public MemberConfig withMetadata(String key, String value) {
        Map<String, String> more = new TreeMap<>(metadata);
        more.put(key, value);
        return new MemberConfig(url, group, memberName, topics, rack, capacity, memberToken, requestTimeout, endpoint,
                more, loadCapacity, loadThreshold);
    }

    public MemberConfig withRequestTimeout(Duration timeout) {
        return new MemberConfig(url, group, memberName, topics, rack, capacity, memberToken, timeout, endpoint, metadata, loadCapacity, loadThreshold);
    }

    /** Reports {@code capacity} (in the group's load unit) as the load this member can carry, when the host asks. */
    public MemberConfig withLoadCapacity(double load) {
        return new MemberConfig(url, group, memberName, topics, rack, capacity, memberToken, requestTimeout, endpoint,
                metadata, load, loadThreshold);
    }

    /** Resends a task's load once it moved by more than {@code threshold} (relative: 0.1 for 10 %) from what the host has. */
    public MemberConfig withLoadThreshold(double threshold) {
        return new MemberConfig(url, group, memberName, topics, rack, capacity, memberToken, requestTimeout, endpoint,
                metadata, loadCapacity, threshold);
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
        if (!Double.isFinite(loadThreshold) || loadThreshold < 0) {
            throw new IllegalArgumentException("the load threshold must be a finite number, 0 or more");
        }
        if (!LoadBook.validLoadCapacity(loadCapacity)) {
            throw new IllegalArgumentException("a load capacity must be above 0 and at most 1e15");
        }
        HeartbeatUrls.all(url, group);
        checkEndpoint(endpoint, metadata);
    }

    /**
     * Checks an endpoint and its metadata against the host's limits, so that a
     * mistake fails where it is made rather than as the host's refusal of a
     * heartbeat.
     *
     * @throws IllegalArgumentException naming what is past a limit
     */
    static void checkEndpoint(String endpoint, Map<String, String> metadata) {
        if (endpoint != null && (endpoint.isEmpty() || endpoint.length() > ENDPOINT_BYTES_MAX
                || !endpoint.chars().allMatch(c -> c > 0x20 && c < 0x7f))) {
            throw new IllegalArgumentException("an endpoint must be 1 to " + ENDPOINT_BYTES_MAX
                    + " bytes of visible ASCII: " + endpoint);
        }
        if (metadata.size() > METADATA_PAIRS_MAX) {
            throw new IllegalArgumentException("at most " + METADATA_PAIRS_MAX + " metadata pairs, not "
                    + metadata.size());
        }
        metadata.forEach((key, value) -> {
            if (key.isEmpty() || utf8(key) > METADATA_KEY_BYTES_MAX) {
                throw new IllegalArgumentException("a metadata key must be 1 to " + METADATA_KEY_BYTES_MAX
                        + " bytes: " + key);
            }
            if (utf8(value) > METADATA_VALUE_BYTES_MAX) {
                throw new IllegalArgumentException("a metadata value must be at most " + METADATA_VALUE_BYTES_MAX
                        + " bytes: " + key);
            }
            if ((key + value).chars().anyMatch(Character::isISOControl)) {
                throw new IllegalArgumentException("metadata must be visible characters: " + key);
            }
        });
    }

    private static int utf8(String text) {
        return text.getBytes(java.nio.charset.StandardCharsets.UTF_8).length;
    }

    /** Never prints the member token. */
    @Override
    public String toString() {
        return "MemberConfig[url=" + url + ", group=" + group + ", memberName=" + memberName + ", topics=" + topics
                + ", rack=" + rack + ", capacity=" + capacity + ", memberToken=" + (memberToken == null ? null : "..")
                + ", requestTimeout=" + requestTimeout + ", endpoint=" + endpoint + ", metadata=" + metadata + "]";
    }
}
