package dev.assignd.client;

import java.nio.charset.StandardCharsets;

/**
 * Keys to partitions, exactly as Kafka's default partitioner maps a record key
 * ({@code docs/routing.md}, "Keys to tasks"), so a Kafka producer, the host and
 * every router agree on every key. Strings are hashed as their UTF-8 bytes.
 */
public final class Partitioner {

    private static final int SEED = 0x9747b28c;
    private static final int M = 0x5bd1e995;
    private static final int R = 24;

    private Partitioner() {
    }

    /**
     * Kafka's murmur2: the 32-bit MurmurHash2 of {@code key} with seed
     * {@code 0x9747b28c}, as {@code org.apache.kafka.common.utils.Utils.murmur2}.
     */
    public static int murmur2(byte[] key) {
        int length = key.length;
        int h = SEED ^ length;
        int whole = length & ~3;
        for (int i = 0; i < whole; i += 4) {
            int k = (key[i] & 0xff) | (key[i + 1] & 0xff) << 8 | (key[i + 2] & 0xff) << 16 | (key[i + 3] & 0xff) << 24;
            k *= M;
            k ^= k >>> R;
            k *= M;
            h *= M;
            h ^= k;
        }
        int tail = length - whole;
        if (tail >= 3) {
            h ^= (key[whole + 2] & 0xff) << 16;
        }
        if (tail >= 2) {
            h ^= (key[whole + 1] & 0xff) << 8;
        }
        if (tail >= 1) {
            h ^= key[whole] & 0xff;
            h *= M;
        }
        h ^= h >>> 13;
        h *= M;
        h ^= h >>> 15;
        return h;
    }

    /**
     * The partition of {@code key} in a topic of {@code partitions} partitions, as
     * Kafka's default partitioner picks it for a keyed record:
     * {@code toPositive(murmur2(key)) % partitions}.
     *
     * @throws IllegalArgumentException if {@code partitions} is below 1
     */
    public static int partitionForKey(byte[] key, int partitions) {
        if (partitions < 1) {
            throw new IllegalArgumentException("a topic has at least one partition, not " + partitions);
        }
        return (murmur2(key) & 0x7fffffff) % partitions;
    }

    /** {@link #partitionForKey(byte[], int)} of {@code key}'s UTF-8 bytes. */
    public static int partitionForKey(String key, int partitions) {
        return partitionForKey(key.getBytes(StandardCharsets.UTF_8), partitions);
    }
}
