package dev.assignd.client;

import java.util.Objects;

/**
 * How many records the local state of {@code task} is behind its changelog's
 * end: a lag row, {@code [topic, partition, lag]} on the wire.
 */
public record Lag(Task task, long lag) {

    public Lag {
        Objects.requireNonNull(task, "task");
        if (lag < 0) {
            throw new IllegalArgumentException("a lag is 0 or more, not " + lag);
        }
    }
}
