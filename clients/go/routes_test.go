package assignd

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
)

// tableVectors is clients/conformance/routes/table.json.
type tableVectors struct {
	Table   json.RawMessage `json:"table"`
	Lookups []struct {
		Topic     string   `json:"topic"`
		Key       *string  `json:"key"`
		Partition uint32   `json:"partition"`
		Owner     *string  `json:"owner"`
		MovingTo  *string  `json:"moving_to"`
		Learners  []string `json:"learners"`
		Standbys  []string `json:"standbys"`
	} `json:"lookups"`
	Freshness []struct {
		SentAtMs int64 `json:"sent_at_ms"`
		NowMs    int64 `json:"now_ms"`
		Fresh    bool  `json:"fresh"`
	} `json:"freshness"`
	UnknownTopic        string             `json:"unknown_topic"`
	PartitionOutOfRange [2]json.RawMessage `json:"partition_out_of_range"`
}

func readTableVectors(t *testing.T) tableVectors {
	data, err := os.ReadFile(routesDir + "/table.json")
	if err != nil {
		t.Fatal(err)
	}
	var v tableVectors
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestTableLookupsMatchTheVectors replays every lookup of table.json
// through the table's index.
func TestTableLookupsMatchTheVectors(t *testing.T) {
	v := readTableVectors(t)
	table, err := ParseRouteTable(v.Table, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if table.Epoch != 42 || table.Group != "orders" || table.Valid != 2*time.Second {
		t.Fatalf("read %+v", table)
	}
	for _, want := range v.Lookups {
		var route Route
		if want.Key != nil {
			route, err = table.OwnerOfString(want.Topic, *want.Key)
		} else {
			route, err = table.OwnerOfPartition(want.Topic, want.Partition)
		}
		if err != nil {
			t.Fatalf("%+v: %v", want, err)
		}
		got := []interface{}{route.Partition, memberID(route.Owner), memberID(route.MovingTo),
			memberIDs(route.Learners), memberIDs(route.Standbys), route.Epoch}
		expected := []interface{}{want.Partition, deref(want.Owner), deref(want.MovingTo),
			nonNil(want.Learners), nonNil(want.Standbys), uint64(42)}
		if !reflect.DeepEqual(got, expected) {
			t.Fatalf("lookup %s/%v/%d: got %v, want %v", want.Topic, deref(want.Key), want.Partition, got, expected)
		}
	}
	owner, _ := table.OwnerOfPartition("orders", 0)
	if owner.Owner.Endpoint != "http://10.0.0.5:8080" || owner.Owner.MemberName != "worker-a" ||
		owner.Owner.Metadata["zone"] != "a" {
		t.Fatalf("owner %+v", owner.Owner)
	}
}

// TestTableFreshnessUnknownTopicAndRange: the freshness cases, a topic the
// table does not know and a partition past the count are refused.
func TestTableFreshnessUnknownTopicAndRange(t *testing.T) {
	v := readTableVectors(t)
	origin := time.Now()
	at := func(ms int64) time.Time { return origin.Add(time.Duration(ms) * time.Millisecond) }
	for _, c := range v.Freshness {
		table, err := ParseRouteTable(v.Table, at(c.SentAtMs))
		if err != nil {
			t.Fatal(err)
		}
		if got := table.freshAt(at(c.NowMs)); got != c.Fresh {
			t.Fatalf("sent at %d, now %d: fresh %v, want %v", c.SentAtMs, c.NowMs, got, c.Fresh)
		}
		route, _ := table.routeAt("orders", 0, at(c.NowMs))
		if route.Fresh != c.Fresh {
			t.Fatalf("a route sent at %d, now %d: fresh %v", c.SentAtMs, c.NowMs, route.Fresh)
		}
	}
	table, _ := ParseRouteTable(v.Table, origin)
	if _, err := table.OwnerOfString(v.UnknownTopic, "k"); !errors.Is(err, ErrUnknownTopic) {
		t.Fatalf("unknown topic: %v", err)
	}
	if _, err := table.OwnerOfPartition(v.UnknownTopic, 0); !errors.Is(err, ErrUnknownTopic) {
		t.Fatalf("unknown topic by partition: %v", err)
	}
	var topic string
	var partition uint32
	if json.Unmarshal(v.PartitionOutOfRange[0], &topic) != nil || json.Unmarshal(v.PartitionOutOfRange[1], &partition) != nil {
		t.Fatalf("partition_out_of_range: %s", v.PartitionOutOfRange)
	}
	if _, err := table.OwnerOfPartition(topic, partition); !errors.Is(err, ErrPartitionOutOfRange) {
		t.Fatalf("%s/%d: %v", topic, partition, err)
	}
}

// TestATableOfTooManyTasksIsRefused: the index is bounded by the host's
// limit on a group's tasks, whatever the body says.
func TestATableOfTooManyTasksIsRefused(t *testing.T) {
	body := `{"group":"g","epoch":1,"group_epoch":1,"valid_ms":0,"topics":{"a":4000000000},"members":{},"active":{}}`
	if _, err := ParseRouteTable([]byte(body), time.Now()); err == nil {
		t.Fatal("a table of 4e9 tasks was indexed")
	}
}

func memberID(m *RouteMember) string {
	if m == nil {
		return ""
	}
	return m.MemberID
}

func memberIDs(ms []RouteMember) []string {
	out := []string{}
	for _, m := range ms {
		out = append(out, m.MemberID)
	}
	return out
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// bigTableBody is a table of one topic of a million partitions, each of
// members members owning a run of them.
func bigTableBody(members int) []byte {
	const partitions = 1_000_000
	var b strings.Builder
	fmt.Fprintf(&b, `{"group":"g","epoch":1,"group_epoch":1,"valid_ms":2000,"topics":{"t":%d},"members":{`, partitions)
	for m := 0; m < members; m++ {
		if m > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"m-%d":{"member_name":null,"endpoint":"10.0.0.%d:80","metadata":{}}`, m, m)
	}
	b.WriteString(`},"active":{`)
	per := partitions / members
	for m := 0; m < members; m++ {
		if m > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"m-%d":[["t",%d,%d]]`, m, m*per, (m+1)*per-1)
	}
	b.WriteString(`}}`)
	return []byte(b.String())
}

func BenchmarkIndexAMillionTasks(b *testing.B) {
	body := bigTableBody(100)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := ParseRouteTable(body, time.Now()); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkOwnerOfAKey(b *testing.B) {
	table, err := ParseRouteTable(bigTableBody(100), time.Now())
	if err != nil {
		b.Fatal(err)
	}
	key := []byte("customer-42")
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := table.OwnerOf("t", key); err != nil {
				b.Fatal(err)
			}
		}
	})
}
