package assignd

// Keys to partitions, exactly as Kafka's default partitioner maps a record
// key (docs/routing.md, "Keys to tasks"), so a Kafka producer, the host and
// every router agree on every key.

// murmur2Seed and the mixing constants of Kafka's Utils.murmur2.
const (
	murmur2Seed uint32 = 0x9747b28c
	murmur2M    uint32 = 0x5bd1e995
	murmur2R           = 24
)

// Murmur2 is Kafka's murmur2: the 32-bit MurmurHash2 of key with seed
// 0x9747b28c, as org.apache.kafka.common.utils.Utils.murmur2.
func Murmur2(key []byte) int32 {
	h := murmur2Seed ^ uint32(len(key))
	n := len(key) &^ 3
	for i := 0; i < n; i += 4 {
		k := uint32(key[i]) | uint32(key[i+1])<<8 | uint32(key[i+2])<<16 | uint32(key[i+3])<<24
		k *= murmur2M
		k ^= k >> murmur2R
		k *= murmur2M
		h *= murmur2M
		h ^= k
	}
	switch tail := key[n:]; len(tail) {
	case 3:
		h ^= uint32(tail[2]) << 16
		fallthrough
	case 2:
		h ^= uint32(tail[1]) << 8
		fallthrough
	case 1:
		h ^= uint32(tail[0])
		h *= murmur2M
	}
	h ^= h >> 13
	h *= murmur2M
	h ^= h >> 15
	return int32(h)
}

// PartitionForKey is the partition of key in a topic of partitions
// partitions, as Kafka's default partitioner picks it for a keyed record:
// toPositive(murmur2(key)) % partitions. It panics if partitions is 0 (a
// topic has at least one partition).
func PartitionForKey(key []byte, partitions uint32) uint32 {
	if partitions == 0 {
		panic("assignd: a topic has at least one partition")
	}
	return (uint32(Murmur2(key)) & 0x7fffffff) % partitions
}
