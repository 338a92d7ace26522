/**
 * Keys to partitions, exactly as Kafka's default partitioner maps a record
 * key: `toPositive(murmur2(key bytes)) % partitions`. A Kafka producer, the
 * host's `/routes/lookup` and every assignd router agree on every key
 * (docs/routing.md, "Keys to tasks"). Strings are hashed as their UTF-8
 * bytes.
 */

/** A key: its bytes, or a string hashed as its UTF-8 bytes. */
export type Key = string | Uint8Array;

const SEED = 0x9747b28c;
const M = 0x5bd1e995;
const R = 24;

const utf8 = new TextEncoder();

/** The bytes a key is hashed as. */
export function keyBytes(key: Key): Uint8Array {
  return typeof key === "string" ? utf8.encode(key) : key;
}

/**
 * Kafka's murmur2 of `key` (32-bit MurmurHash2, seed `0x9747b28c`), a
 * signed 32-bit integer as Kafka's `Utils.murmur2` returns it.
 */
export function murmur2(key: Key): number {
  const data = keyBytes(key);
  const length = data.length;
  let h = (SEED ^ length) | 0;
  const whole = length - (length % 4);
  for (let i = 0; i < whole; i += 4) {
    let k = data[i] | (data[i + 1] << 8) | (data[i + 2] << 16) | (data[i + 3] << 24);
    k = Math.imul(k, M);
    k ^= k >>> R;
    k = Math.imul(k, M);
    h = Math.imul(h, M);
    h ^= k;
  }
  const tail = length - whole;
  if (tail >= 3) h ^= data[whole + 2] << 16;
  if (tail >= 2) h ^= data[whole + 1] << 8;
  if (tail >= 1) {
    h ^= data[whole];
    h = Math.imul(h, M);
  }
  h ^= h >>> 13;
  h = Math.imul(h, M);
  h ^= h >>> 15;
  return h | 0;
}

/**
 * The partition of `key` in a topic of `partitions` partitions (1 or
 * more), as Kafka's default partitioner picks it for a keyed record.
 */
export function partitionForKey(key: Key, partitions: number): number {
  if (!Number.isInteger(partitions) || partitions < 1) throw new RangeError("a topic has at least one partition");
  return (murmur2(key) & 0x7fffffff) % partitions;
}
