package dev.assignd.client;

import java.io.IOException;
import java.lang.System.Logger.Level;
import java.net.ConnectException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpConnectTimeoutException;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.net.http.HttpTimeoutException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;

/**
 * One heartbeat over HTTP/1.1: encode, send within the request timeout,
 * classify the outcome. It owns where the heartbeat goes (a cluster's
 * redirects and bootstrap URLs) and the mapping of HTTP outcomes to
 * {@link Failure}s; it holds no member state.
 *
 * <p>In a cluster any node answers: one that does not coordinate the group
 * answers 307 with the coordinator's URL, which the transport follows at once
 * (up to {@link #REDIRECTS_MAX} hops) and remembers. When the remembered node
 * stops answering, the transport asks the bootstrap URL that led to it again,
 * then the others in turn, each at most once per heartbeat. A shard between
 * owners (503 {@code shard_unavailable} or {@code coordinator_unreachable}) is
 * retried within the same request timeout after 25 ms, doubling to 400 ms.
 *
 * <p>A heartbeat fails {@code unreached} when no attempt can have reached a
 * coordinator of the group: each was refused a connection (never sent),
 * redirected, or answered 503 {@code shard_unavailable}. The JDK client never
 * follows redirects itself here: the classification depends on seeing them.
 */
public final class Transport {

    private static final System.Logger LOG = System.getLogger(Transport.class.getName());

    /** The most redirects one heartbeat follows. */
    public static final int REDIRECTS_MAX = 5;
    /** The longest {@code Retry-After} taken from the host, in seconds. */
    public static final long RETRY_AFTER_S_MAX = 60;
    /** The longest error body kept in a message. */
    private static final int ERROR_BODY_LEN_MAX = 512;
    private static final long IN_TRANSIT_PAUSE_MIN_MS = 25;
    private static final long IN_TRANSIT_PAUSE_MAX_MS = 400;

    static {
        // A kept-alive connection idle past the host's idle timeout (10 s) may
        // be closing as a request goes out on it; the JDK keeps one 1200 s by
        // default. Read once, when the JDK's connection pool loads; an
        // application's own setting wins.
        if (System.getProperty("jdk.httpclient.keepalive.timeout") == null) {
            System.setProperty("jdk.httpclient.keepalive.timeout", "5");
        }
    }

    private final HttpClient client;
    private final List<URI> bootstrap;
    private final Duration requestTimeout;
    private final String authorization;
    /** Where heartbeats go now: the coordinator a redirect named, or a bootstrap URL. */
    private Target target = new Target(null, 0);

    /**
     * Where heartbeats go: {@code coordinator} if a redirect named one (else the
     * bootstrap URL {@code bootstrap}), and the bootstrap URL that led there.
     */
    private record Target(URI coordinator, int bootstrap) {
        Target next(int bootstraps) {
            return coordinator != null ? new Target(null, bootstrap) : new Target(null, (bootstrap + 1) % bootstraps);
        }
    }

    /**
     * @param urls           comma-separated base URLs of the host or a cluster's nodes
     * @param group          the group's name
     * @param memberToken    the group's member token, or {@code null}
     * @param requestTimeout how long one heartbeat may take, all attempts included
     */
    public Transport(String urls, String group, String memberToken, Duration requestTimeout) {
        this.bootstrap = HeartbeatUrls.all(urls, group);
        this.requestTimeout = requestTimeout;
        this.authorization = memberToken == null ? null : "Bearer " + memberToken;
        this.client = HttpClient.newBuilder()
                .version(HttpClient.Version.HTTP_1_1)
                .followRedirects(HttpClient.Redirect.NEVER)
                .connectTimeout(requestTimeout)
                .build();
    }

    /**
     * Sends {@code request} to the group's coordinator, following redirects,
     * trying the bootstrap URLs when the coordinator does not answer and waiting
     * out a shard between owners, all within the request timeout.
     *
     * @throws HeartbeatFailedException with the failure as the machine classifies it
     */
    public HeartbeatResponse heartbeat(HeartbeatRequest request) throws HeartbeatFailedException {
        byte[] body = Wire.encodeBytes(request);
        long deadline = System.nanoTime() + requestTimeout.toNanos();
        int redirects = 0;
        int unreachableBootstraps = 0;
        long pauseMs = IN_TRANSIT_PAUSE_MIN_MS;
        // Over every attempt: one that may have reached the coordinator makes a
        // failure ambiguous.
        boolean mayHaveReached = false;
        while (true) {
            Target at = target();
            URI url = at.coordinator() != null ? at.coordinator() : bootstrap.get(at.bootstrap());
            long leftNanos = deadline - System.nanoTime();
            if (leftNanos <= 0) {
                throw failed(new Failure.NoAnswer("no answer within " + requestTimeout.toMillis() + " ms"),
                        mayHaveReached);
            }
            Attempt attempt = send(url, body, Duration.ofNanos(leftNanos));
            mayHaveReached |= attempt.mayHaveReached();
            LOG.log(Level.TRACE, "heartbeat attempt to {0}: {1}", url, attempt);
            if (attempt instanceof Attempt.Answered answered) {
                return answered.response();
            } else if (attempt instanceof Attempt.Done done) {
                throw failed(done.failure(), mayHaveReached);
            } else if (attempt instanceof Attempt.Redirected redirected) {
                if (redirects >= REDIRECTS_MAX) {
                    throw failed(new Failure.NoAnswer("more than " + REDIRECTS_MAX + " redirects, the last to "
                            + redirected.to()), mayHaveReached);
                }
                redirects++;
                setTarget(new Target(redirected.to(), at.bootstrap()));
            } else if (attempt instanceof Attempt.InTransit inTransit) {
                long leftMs = (deadline - System.nanoTime()) / 1_000_000;
                if (leftMs <= pauseMs) {
                    throw failed(inTransit.failure(), mayHaveReached);
                }
                sleep(pauseMs);
                pauseMs = Math.min(pauseMs * 2, IN_TRANSIT_PAUSE_MAX_MS);
            } else {
                // Refused a connection, or lost it: a coordinator that died or
                // left. Ask the bootstrap URL that led to it again.
                if (at.coordinator() == null) {
                    unreachableBootstraps++;
                }
                setTarget(at.next(bootstrap.size()));
                if (unreachableBootstraps >= bootstrap.size()) {
                    Failure failure = attempt instanceof Attempt.Refused refused
                            ? new Failure.NoAnswer(refused.message())
                            : ((Attempt.Unanswered) attempt).failure();
                    throw failed(failure, mayHaveReached);
                }
            }
        }
    }

    /** What one attempt came back with. */
    private sealed interface Attempt {
        /** Whether this attempt may have reached the group's coordinator. */
        boolean mayHaveReached();

        /** A 200 answer. */
        record Answered(HeartbeatResponse response) implements Attempt {
            public boolean mayHaveReached() {
                return true;
            }
        }

        /** A failure after which no other node is tried. */
        record Done(Failure failure, boolean mayHaveReached) implements Attempt {
        }

        /** The node does not coordinate the group: here is the coordinator's heartbeat URL. */
        record Redirected(URI to) implements Attempt {
            public boolean mayHaveReached() {
                return false;
            }
        }

        /** The group's shard is between owners: try again shortly. */
        record InTransit(Failure failure, boolean mayHaveReached) implements Attempt {
        }

        /** The node refused the connection: the request was never sent. */
        record Refused(String message) implements Attempt {
            public boolean mayHaveReached() {
                return false;
            }
        }

        /** The connection failed after the request may have gone out. */
        record Unanswered(Failure failure) implements Attempt {
            public boolean mayHaveReached() {
                return true;
            }
        }
    }

    /** One request to {@code url}, within {@code timeout}. */
    private Attempt send(URI url, byte[] body, Duration timeout) throws HeartbeatFailedException {
        HttpRequest.Builder post = HttpRequest.newBuilder(url)
                .timeout(timeout)
                .header("Content-Type", "application/json")
                .POST(HttpRequest.BodyPublishers.ofByteArray(body));
        if (authorization != null) {
            post.header("Authorization", authorization);
        }
        HttpResponse<byte[]> answer;
        try {
            answer = client.send(post.build(), HttpResponse.BodyHandlers.ofByteArray());
        } catch (HttpConnectTimeoutException | ConnectException e) {
            // Checked first: a connect timeout is a timeout too, but the
            // request never went out.
            return new Attempt.Refused(describe(url, e));
        } catch (HttpTimeoutException e) {
            // A node that stopped answering (paused, cut off): the next
            // heartbeat asks the (next) bootstrap URL.
            setTarget(target().next(bootstrap.size()));
            return new Attempt.Done(new Failure.NoAnswer(describe(url, e)), true);
        } catch (IOException e) {
            return new Attempt.Unanswered(new Failure.NoAnswer(describe(url, e)));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new HeartbeatFailedException(new Failure.NoAnswer("interrupted while waiting for " + url));
        }
        return Answers.classify(url, answer);
    }

    /**
     * The failure of a heartbeat whose attempts all failed: as it is if one may
     * have reached the coordinator, else {@code unreached}.
     */
    private static HeartbeatFailedException failed(Failure failure, boolean mayHaveReached) {
        return new HeartbeatFailedException(mayHaveReached ? failure : new Failure.Unreached(failure.message()));
    }

    private synchronized Target target() {
        return target;
    }

    private synchronized void setTarget(Target target) {
        this.target = target;
    }

    private static void sleep(long ms) throws HeartbeatFailedException {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new HeartbeatFailedException(new Failure.NoAnswer("interrupted"));
        }
    }

    private static String describe(URI url, Exception e) {
        StringBuilder text = new StringBuilder(url.toString()).append(": ").append(e.getClass().getSimpleName());
        for (Throwable cause = e; cause != null; cause = cause.getCause()) {
            if (cause.getMessage() != null) {
                text.append(": ").append(cause.getMessage());
            }
        }
        return text.toString();
    }

    /** How an HTTP answer reads: the answer, a refusal, a redirect, a shard in transit. */
    private static final class Answers {

        static Attempt classify(URI url, HttpResponse<byte[]> answer) {
            int status = answer.statusCode();
            boolean redirected = status == 307 || status == 308;
            if (redirected) {
                URI to = location(url, answer);
                if (to != null) {
                    return new Attempt.Redirected(to);
                }
            }
            Long retryAfterMs = retryAfterMs(answer);
            byte[] body = answer.body();
            if (status >= 200 && status < 300) {
                try {
                    return new Attempt.Answered(Wire.decodeResponse(body));
                } catch (WireException e) {
                    return new Attempt.Done(new Failure.Unreadable("heartbeat answer: " + e.getMessage()), true);
                }
            }
            Wire.ErrorBody error = Wire.decodeError(body);
            String message = error != null ? error.message() : cut(body);
            String code = error != null ? error.code() : null;
            if (status == 503 && (ErrorCodes.SHARD_UNAVAILABLE.equals(code)
                    || ErrorCodes.COORDINATOR_UNREACHABLE.equals(code))) {
                return new Attempt.InTransit(new Failure.Server(status, retryAfterMs, message),
                        !ErrorCodes.SHARD_UNAVAILABLE.equals(code));
            }
            Failure failure;
            if (error != null && ((status >= 400 && status < 500) || ErrorCodes.NOT_COORDINATOR.equals(code))) {
                failure = new Failure.Refused(status, code, retryAfterMs, message);
            } else if (status >= 500 && status < 600) {
                failure = new Failure.Server(status, retryAfterMs, message);
            } else {
                failure = new Failure.Unreadable("HTTP " + status + " without an error body: " + message);
            }
            // A redirect the transport cannot follow still says the node does
            // not coordinate the group.
            return new Attempt.Done(failure, !redirected);
        }

        /** The redirect's target, resolved against {@code url}, if it is an http(s) URL. */
        private static URI location(URI url, HttpResponse<byte[]> answer) {
            String location = answer.headers().firstValue("Location").orElse(null);
            if (location == null) {
                return null;
            }
            try {
                URI to = url.resolve(location.trim());
                String scheme = to.getScheme();
                return "http".equalsIgnoreCase(scheme) || "https".equalsIgnoreCase(scheme) ? to : null;
            } catch (IllegalArgumentException e) {
                return null;
            }
        }

        /** Seconds only (the host sends no HTTP dates), capped: a hint must not park a member past its lease. */
        private static Long retryAfterMs(HttpResponse<byte[]> answer) {
            String value = answer.headers().firstValue("Retry-After").orElse(null);
            if (value == null || !value.trim().matches("[0-9]+")) {
                return null;
            }
            String digits = value.trim();
            long seconds = digits.length() > 18 ? RETRY_AFTER_S_MAX : Math.min(Long.parseLong(digits), RETRY_AFTER_S_MAX);
            return seconds * 1000;
        }

        private static String cut(byte[] body) {
            String text = new String(body, StandardCharsets.UTF_8);
            return text.length() <= ERROR_BODY_LEN_MAX ? text : text.substring(0, ERROR_BODY_LEN_MAX);
        }
    }
}
