package dev.assignd.client;

import java.time.Duration;
import java.util.Objects;

/**
 * Where a {@link Router} asks and with what credential. Immutable; build one
 * with {@link #of} and the {@code with...} methods.
 *
 * @param url            the host's base URL; for a cluster, several separated by commas
 *                       (tried in turn while none answers)
 * @param group          the group whose routing table to keep
 * @param token          the group's reader token or the admin token, sent as
 *                       {@code Authorization: Bearer}; {@code null} for none
 * @param waitTime       how long the host may hold a watch while nothing changes; while the table held promises
 *                       an ownership bound, at most half of it, so that the next answer renews the bound before
 *                       it runs out
 * @param requestTimeout how long one request may take; {@code null}: {@code waitTime} + 10 s
 */
public record RouterConfig(String url, String group, String token, Duration waitTime, Duration requestTimeout) {

    /** How long the host holds a watch by default. */
    public static final Duration WAIT_DEFAULT = Duration.ofSeconds(20);
    /** The longest the host holds a watch. */
    public static final Duration WAIT_MAX = Duration.ofSeconds(20);
    /** How much longer than its wait a watch may take before it counts as lost. */
    static final Duration REQUEST_SLACK = Duration.ofSeconds(10);

    public RouterConfig {
        Objects.requireNonNull(url, "url");
        Objects.requireNonNull(group, "group");
        Objects.requireNonNull(waitTime, "waitTime");
    }

    /** A router of {@code group} at {@code url}, without a token, waiting 20 s. */
    public static RouterConfig of(String url, String group) {
        return new RouterConfig(url, group, null, WAIT_DEFAULT, null);
    }

    /** Sends {@code token} (the group's reader token, or the admin token). */
    public RouterConfig withToken(String token) {
        return new RouterConfig(url, group, token, waitTime, requestTimeout);
    }

    public RouterConfig withWaitTime(Duration waitTime) {
        return new RouterConfig(url, group, token, waitTime, requestTimeout);
    }

    public RouterConfig withRequestTimeout(Duration timeout) {
        return new RouterConfig(url, group, token, waitTime, timeout);
    }

    /** The bound of one request: the configured one, or the wait plus 10 s. */
    public Duration effectiveRequestTimeout() {
        return requestTimeout != null ? requestTimeout : waitTime.plus(REQUEST_SLACK);
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
        if (waitTime.isNegative() || waitTime.isZero() || effectiveRequestTimeout().isNegative()
                || effectiveRequestTimeout().isZero()) {
            throw new IllegalArgumentException("the wait and the request timeout must be above zero");
        }
        if (waitTime.compareTo(WAIT_MAX) > 0) {
            throw new IllegalArgumentException("the host holds a watch at most " + WAIT_MAX + ", not " + waitTime);
        }
        if (token != null && (token.isEmpty() || !token.chars().allMatch(c -> c > 0x20 && c < 0x7f))) {
            throw new IllegalArgumentException("a token must be visible ASCII characters, at least one");
        }
        HeartbeatUrls.all(url, group, "routes");
    }

    /** Never prints the token. */
    @Override
    public String toString() {
        return "RouterConfig[url=" + url + ", group=" + group + ", token=" + (token == null ? null : "..") + ", waitTime="
                + waitTime + ", requestTimeout=" + requestTimeout + "]";
    }
}
