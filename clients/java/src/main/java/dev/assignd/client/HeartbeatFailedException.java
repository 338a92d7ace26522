package dev.assignd.client;

import java.util.Objects;

/** A heartbeat that got no 200 answer, classified for the {@link MemberMachine}. */
public final class HeartbeatFailedException extends Exception {
    private static final long serialVersionUID = 1L;

    private final transient Failure failure;

    public HeartbeatFailedException(Failure failure) {
        super(failure.kind() + ": " + failure.message());
        this.failure = Objects.requireNonNull(failure);
    }

    public Failure failure() {
        return failure;
    }
}
