package dev.assignd.client;

import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;

/**
 * One routes request over HTTP: a blocking query past an epoch or a plain one,
 * redirects followed with the token, the answer classified. It holds no
 * router state but the URLs.
 */
final class RoutesClient {

    /** The most redirects one request follows. */
    static final int REDIRECTS_MAX = 5;
    /** The longest error body kept in a message. */
    private static final int ERROR_BODY_LEN_MAX = 512;
    /** The longest wait taken from {@code Assignd-Routes-Waited-Ms}: the host never holds a query longer. */
    private static final long WAITED_MS_MAX = RouterConfig.WAIT_MAX.toMillis();

    private final HttpClient client;
    private final List<URI> routes;
    private final String authorization;
    private final Duration wait;
    private final Duration requestTimeout;

    /** What one request came back with. */
    sealed interface Answer {
        /** A table. */
        record Table(RouteTable table) implements Answer {
        }

        /** A refusal: reported, asked again slowly. */
        record Refused(RouterRefusedException refusal) implements Answer {
        }

        /** No answer, a host failure, or an unreadable answer: the next URL, after a backoff. */
        record Failed(String message, long retryAfterMs) implements Answer {
        }
    }

    RoutesClient(RouterConfig config) {
        this.routes = HeartbeatUrls.all(config.url(), config.group(), "routes");
        this.authorization = config.token() == null ? null : "Bearer " + config.token();
        this.wait = config.waitTime();
        this.requestTimeout = config.effectiveRequestTimeout();
        this.client = HttpClient.newBuilder()
                .version(HttpClient.Version.HTTP_1_1)
                .followRedirects(HttpClient.Redirect.NEVER)
                .connectTimeout(Duration.ofSeconds(10).compareTo(requestTimeout) < 0 ? Duration.ofSeconds(10)
                        : requestTimeout)
                .build();
    }

    int urls() {
        return routes.size();
    }

    /**
     * How long a blocking query past {@code held} may wait: the configured wait,
     * or half the table's bound when that is shorter (and the table promises
     * anything), so that the answer renews the bound before it runs out.
     */
    Duration waitPast(RouteTable held) {
        if (held == null || held.valid().isZero()) {
            return wait;
        }
        long halfMs = Math.max(held.valid().toMillis() / 2, 1);
        return halfMs < wait.toMillis() ? Duration.ofMillis(halfMs) : wait;
    }

    /**
     * Asks URL {@code at}: a blocking query past {@code afterEpoch} that waits at
     * most {@code waitTime}, or at once when {@code afterEpoch} is {@code null}.
     */
    Answer fetch(int at, Long afterEpoch, Duration waitTime) throws InterruptedException {
        URI base = routes.get(at);
        Duration timeout = requestTimeout;
        String query = "";
        if (afterEpoch != null) {
            query = "?after_epoch=" + afterEpoch + "&wait_ms=" + waitTime.toMillis();
        } else if (timeout.compareTo(RouterConfig.REQUEST_SLACK) > 0) {
            timeout = RouterConfig.REQUEST_SLACK;
        }
        URI to = URI.create(base + query);
        long sentAtNanos = System.nanoTime();
        for (int redirects = 0; ; redirects++) {
            HttpResponse<byte[]> answer;
            try {
                answer = client.send(get(to, timeout), HttpResponse.BodyHandlers.ofByteArray());
            } catch (IOException e) {
                return new Answer.Failed(to.getAuthority() + ": " + describe(e), 0);
            }
            int status = answer.statusCode();
            String location = answer.headers().firstValue("Location").orElse(null);
            if ((status == 307 || status == 308) && location != null && redirects < REDIRECTS_MAX) {
                try {
                    to = to.resolve(location.trim());
                } catch (IllegalArgumentException e) {
                    return new Answer.Failed("a redirect to " + location, 0);
                }
                continue;
            }
            return read(answer, sentAtNanos);
        }
    }

    private HttpRequest get(URI to, Duration timeout) {
        HttpRequest.Builder get = HttpRequest.newBuilder(to).timeout(timeout).header("Accept", "application/json")
                .GET();
        if (authorization != null) {
            get.header("Authorization", authorization);
        }
        return get.build();
    }

    private static Answer read(HttpResponse<byte[]> answer, long sentAtNanos) {
        int status = answer.statusCode();
        byte[] body = answer.body();
        if (status == 200) {
            try {
                return new Answer.Table(RouteTable.parse(body, sentAtNanos, waited(answer)));
            } catch (WireException e) {
                return new Answer.Failed("an unreadable routing table: " + e.getMessage(), 0);
            }
        }
        Wire.ErrorBody error = Wire.decodeError(body);
        String text = new String(body, StandardCharsets.UTF_8);
        String message = error != null ? error.message()
                : text.substring(0, Math.min(text.length(), ERROR_BODY_LEN_MAX));
        String code = error != null ? error.code() : null;
        if (status >= 400 && status < 500 && status != 429) {
            return new Answer.Refused(new RouterRefusedException(status, code, message));
        }
        return new Answer.Failed("HTTP " + status + " (" + code + "): " + message, retryAfterMs(answer));
    }

    /** How long the query waited at the host before the table was read; none, or unreadable, is no wait. */
    private static Duration waited(HttpResponse<byte[]> answer) {
        String value = answer.headers().firstValue("Assignd-Routes-Waited-Ms").orElse("").trim();
        if (!value.matches("[0-9]{1,18}")) {
            return Duration.ZERO;
        }
        return Duration.ofMillis(Math.min(Long.parseLong(value), WAITED_MS_MAX));
    }

    /** Seconds only (the host sends no HTTP dates), capped at a minute. */
    private static long retryAfterMs(HttpResponse<byte[]> answer) {
        String value = answer.headers().firstValue("Retry-After").orElse("").trim();
        if (!value.matches("[0-9]{1,9}")) {
            return 0;
        }
        return Math.min(Long.parseLong(value), Transport.RETRY_AFTER_S_MAX) * 1000;
    }

    private static String describe(Exception e) {
        StringBuilder text = new StringBuilder(e.getClass().getSimpleName());
        for (Throwable cause = e; cause != null; cause = cause.getCause()) {
            if (cause.getMessage() != null) {
                text.append(": ").append(cause.getMessage());
            }
        }
        return text.toString();
    }
}
