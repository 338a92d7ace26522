"""Keys to partitions, exactly as Kafka's default partitioner maps a record
key: ``toPositive(murmur2(key bytes)) % partitions``. A Kafka producer, the
host's ``/routes/lookup`` and every assignd router agree on every key
(docs/routing.md, "Keys to tasks"). Strings are hashed as their UTF-8 bytes.
"""

from __future__ import annotations

from typing import Union

#: A key: its bytes, or a string hashed as its UTF-8 bytes.
Key = Union[bytes, bytearray, memoryview, str]

_SEED = 0x9747B28C
_M = 0x5BD1E995
_R = 24
_MASK = 0xFFFFFFFF


def key_bytes(key: Key) -> bytes:
    """The bytes a key is hashed as."""
    return key.encode("utf-8") if isinstance(key, str) else bytes(key)


def murmur2(key: Key) -> int:
    """Kafka's murmur2 of ``key`` (32-bit MurmurHash2, seed ``0x9747b28c``),
    a signed 32-bit integer as Kafka's ``Utils.murmur2`` returns it."""
    data = key_bytes(key)
    length = len(data)
    h = (_SEED ^ length) & _MASK
    whole = length - length % 4
    for i in range(0, whole, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * _M) & _MASK
        k ^= k >> _R
        k = (k * _M) & _MASK
        h = (h * _M) & _MASK
        h ^= k
    tail = length - whole
    if tail >= 3:
        h ^= data[whole + 2] << 16
    if tail >= 2:
        h ^= data[whole + 1] << 8
    if tail >= 1:
        h ^= data[whole]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for_key(key: Key, partitions: int) -> int:
    """The partition of ``key`` in a topic of ``partitions`` partitions (1 or
    more), as Kafka's default partitioner picks it for a keyed record."""
    if partitions < 1:
        raise ValueError("a topic has at least one partition")
    return (murmur2(key) & 0x7FFFFFFF) % partitions
