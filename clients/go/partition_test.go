package assignd

import (
	"encoding/hex"
	"encoding/json"
	"os"
	"strconv"
	"testing"
)

// routesDir holds the routing vectors every client replays.
const routesDir = "../conformance/routes"

// TestMurmur2AndPartitionsMatchKafka replays murmur2.json: every key's hash
// and its partition for every partition count listed.
func TestMurmur2AndPartitionsMatchKafka(t *testing.T) {
	data, err := os.ReadFile(routesDir + "/murmur2.json")
	if err != nil {
		t.Fatal(err)
	}
	var vectors struct {
		Cases []struct {
			Key        *string           `json:"key"`
			KeyHex     string            `json:"key_hex"`
			Murmur2    int32             `json:"murmur2"`
			Partitions map[string]uint32 `json:"partitions"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(data, &vectors); err != nil {
		t.Fatal(err)
	}
	if len(vectors.Cases) < 10 {
		t.Fatalf("only %d cases", len(vectors.Cases))
	}
	for _, c := range vectors.Cases {
		key, err := hex.DecodeString(c.KeyHex)
		if err != nil {
			t.Fatal(err)
		}
		if c.Key != nil && *c.Key != string(key) {
			t.Fatalf("key %q is not its key_hex %s", *c.Key, c.KeyHex)
		}
		if got := Murmur2(key); got != c.Murmur2 {
			t.Fatalf("murmur2(%s) = %d, want %d", c.KeyHex, got, c.Murmur2)
		}
		for count, want := range c.Partitions {
			partitions, err := strconv.ParseUint(count, 10, 32)
			if err != nil {
				t.Fatal(err)
			}
			if got := PartitionForKey(key, uint32(partitions)); got != want {
				t.Fatalf("partition of %s in %d = %d, want %d", c.KeyHex, partitions, got, want)
			}
		}
	}
}
