package dev.assignd.client;

import java.util.Objects;

/**
 * A task: one partition of one topic, {@code [topic, partition]} on the wire.
 *
 * <p>Tasks sort by topic in UTF-8 byte order, then by partition, as every
 * assignd client lists them. (Java's {@link String#compareTo} compares UTF-16
 * units, which differs from byte order for characters past U+FFFF; comparing
 * code points gives byte order.)
 */
public record Task(String topic, int partition) implements Comparable<Task> {

    public Task {
        Objects.requireNonNull(topic, "topic");
        if (partition < 0) {
            throw new IllegalArgumentException("a partition is 0 or more, not " + partition);
        }
    }

    public static Task of(String topic, int partition) {
        return new Task(topic, partition);
    }

    @Override
    public int compareTo(Task other) {
        int byTopic = compareTopics(topic, other.topic);
        return byTopic != 0 ? byTopic : Integer.compare(partition, other.partition);
    }

    /** Compares two topics in UTF-8 byte order (code point order). */
    static int compareTopics(String a, String b) {
        int i = 0;
        int j = 0;
        while (i < a.length() && j < b.length()) {
            int ca = a.codePointAt(i);
            int cb = b.codePointAt(j);
            if (ca != cb) {
                return Integer.compare(ca, cb);
            }
            i += Character.charCount(ca);
            j += Character.charCount(cb);
        }
        return Integer.compare(a.length() - i, b.length() - j);
    }

    @Override
    public String toString() {
        return topic + "/" + partition;
    }
}
