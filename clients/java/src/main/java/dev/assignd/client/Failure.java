package dev.assignd.client;

/**
 * Why a heartbeat failed, as the member machine tells failures apart: the
 * machine's lease and retry rules depend on whether the heartbeat may have
 * reached the group's coordinator. The {@code message} is for people (logs,
 * error events) and takes no part in any decision.
 */
public sealed interface Failure {

    /** The failure's kind as the conformance vectors name it. */
    String kind();

    String message();

    /** The answer's {@code Retry-After}, in ms (at most 60 s), or {@code null}. */
    default Long retryAfterMs() {
        return null;
    }

    /** The host's error code, for a refusal; else {@code null}. */
    default String code() {
        return null;
    }

    /** Whether the same request may succeed if sent again later. */
    default boolean isTransient() {
        return this instanceof Unreached || this instanceof NoAnswer || this instanceof Server;
    }

    /**
     * No coordinator of the group can have handled the heartbeat: every attempt
     * was refused a connection, redirected, or answered 503
     * {@code shard_unavailable}, or it never went out.
     */
    record Unreached(String message) implements Failure {
        @Override
        public String kind() {
            return "unreached";
        }
    }

    /** No answer (a timeout, a connection lost after sending): it may have been handled. */
    record NoAnswer(String message) implements Failure {
        @Override
        public String kind() {
            return "no_answer";
        }
    }

    /** The host refused the heartbeat: a 4xx with an error body, or code {@code not_coordinator}. */
    record Refused(int status, String code, Long retryAfterMs, String message) implements Failure {
        @Override
        public String kind() {
            return "refused";
        }
    }

    /** The host failed: a 5xx without a code the client handles. */
    record Server(int status, Long retryAfterMs, String message) implements Failure {
        @Override
        public String kind() {
            return "server";
        }
    }

    /** An answer the client cannot read. */
    record Unreadable(String message) implements Failure {
        @Override
        public String kind() {
            return "unreadable";
        }
    }
}
