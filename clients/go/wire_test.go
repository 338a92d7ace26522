package assignd

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
)

func orders(ps ...uint32) []Task {
	out := make([]Task, len(ps))
	for i, p := range ps {
		out[i] = Task{Topic: "orders", Partition: p}
	}
	return out
}

func TestRangesWriteRunsAsRangesAndLoneTasksAsPairs(t *testing.T) {
	tasks := append(orders(0, 1, 2, 5, 7, 8), Task{"payments", 3}, Task{"payments", 4})
	got, err := json.Marshal(TaskRanges(tasks))
	if err != nil {
		t.Fatal(err)
	}
	want := `[["orders",0,2],["orders",5],["orders",7,8],["payments",3,4]]`
	if string(got) != want {
		t.Fatalf("got %s, want %s", got, want)
	}
	empty, _ := json.Marshal(TaskRanges(nil))
	if string(empty) != "[]" {
		t.Fatalf("an empty list is %s", empty)
	}
	// No run wraps past the largest partition.
	edge, _ := json.Marshal(TaskRanges{{"t", math.MaxUint32}, {"t", 0}})
	if string(edge) != `[["t",4294967295],["t",0]]` {
		t.Fatalf("got %s", edge)
	}
}

func TestRangesAndPairsReadAlike(t *testing.T) {
	var ranged, pairs TaskRanges
	if err := json.Unmarshal([]byte(`[["orders",0,2],["orders",7]]`), &ranged); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(`[["orders",0],["orders",1],["orders",2],["orders",7]]`), &pairs); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(ranged, pairs) || !reflect.DeepEqual([]Task(ranged), orders(0, 1, 2, 7)) {
		t.Fatalf("ranged %v, pairs %v", ranged, pairs)
	}
}

func TestAMillionTasksGoInAFewBytes(t *testing.T) {
	var tasks []Task
	for topic := 0; topic < 10; topic++ {
		for p := uint32(0); p < 100_000; p++ {
			tasks = append(tasks, Task{fmt.Sprintf("topic-%d", topic), p})
		}
	}
	body, _ := json.Marshal(&HeartbeatRequest{MemberID: "m", Owned: tasks, Lags: []LagRow{}})
	if len(body) > 1000 {
		t.Fatalf("%d bytes", len(body))
	}
	var back TaskRanges
	if err := json.Unmarshal([]byte(`[["a",0,999999]]`), &back); err != nil || len(back) != 1_000_000 {
		t.Fatalf("a million tasks read as %d: %v", len(back), err)
	}
}

func TestBadTaskListsAreRefused(t *testing.T) {
	for _, bad := range []string{
		`[["orders",3,1]]`,         // ends before it starts
		`[["a",0,999999],["b",0]]`, // past the list limit
		`[["orders"]]`,             // no partition
		`[["orders",1,2,3]]`,       // too long
		`[["orders",-1]]`,          // negative
		`[["orders",4294967296]]`,  // past u32
		`[[1,2]]`,                  // topic not a string
		`{"orders":1}`,             // not a list
	} {
		var r TaskRanges
		if err := json.Unmarshal([]byte(bad), &r); err == nil {
			t.Errorf("%s read as %v", bad, r)
		}
	}
}

func TestARequestIsWrittenAsTheHostReadsIt(t *testing.T) {
	name := "worker-a"
	body, _ := json.Marshal(&HeartbeatRequest{
		MemberID: "m", MemberName: &name, MemberEpoch: 3, Capacity: 1,
		Owned: orders(0, 1), Lags: []LagRow{{Task{"orders", 5}, 42}}, TaskRanges: true,
	})
	want := `{"member_id":"m","member_name":"worker-a","member_epoch":3,"rack":null,"capacity":1,` +
		`"owned":[["orders",0,1]],"lags":[["orders",5,42]],"drain":false,"task_ranges":true}`
	if string(body) != want {
		t.Fatalf("got  %s\nwant %s", body, want)
	}
}

func TestAnAnswerReadsWithAndWithoutTheUnreachedLease(t *testing.T) {
	r, err := ParseResponse([]byte(`{"member_id":"m","member_epoch":4,"heartbeat_interval_ms":3000,
		"active":[["orders",0,2]],"revoking":null,"standby":[["orders",9]],"lease_ms":6000,
		"unreached_lease_ms":11000,"unreached_flight_ms":6000,"newer_field":true}`))
	if err != nil {
		t.Fatal(err)
	}
	if r.MemberEpoch != 4 || len(r.Active) != 3 || len(r.Revoking) != 0 || len(r.Standby) != 1 ||
		*r.LeaseMs != 6000 || *r.UnreachedLeaseMs != 11000 || *r.UnreachedFlightMs != 6000 {
		t.Fatalf("read %+v", r)
	}
	older, err := ParseResponse([]byte(`{"member_id":"m","member_epoch":1,"heartbeat_interval_ms":3000,"lease_ms":6000,"unreached_lease_ms":null}`))
	if err != nil || older.UnreachedLeaseMs != nil || older.UnreachedFlightMs != nil || *older.LeaseMs != 6000 {
		t.Fatalf("read %+v: %v", older, err)
	}
}

func TestAnUnusableAnswerIsRefused(t *testing.T) {
	for _, bad := range []string{
		`{"member_id":"m","member_epoch":18446744073709551615,"heartbeat_interval_ms":1}`,
		`{"member_id":"m","member_epoch":-2,"heartbeat_interval_ms":1}`,
		`{"member_id":"m","heartbeat_interval_ms":1}`,
		`{"member_epoch":1,"heartbeat_interval_ms":1}`,
		`{"member_id":"m","member_epoch":1}`,
		`not json`,
	} {
		if r, err := ParseResponse([]byte(bad)); err == nil {
			t.Errorf("%s read as %+v", bad, r)
		}
	}
}

func TestErrorBodies(t *testing.T) {
	body := parseErrorBody([]byte(`{"error":{"code":"fenced","message":"gone"}}`))
	if body == nil || body.Error.Code != "fenced" || body.Error.Message != "gone" {
		t.Fatalf("read %+v", body)
	}
	for _, bad := range []string{`{}`, `{"error":{"code":"x"}}`, `<html>`, `{"error":"x"}`} {
		if parseErrorBody([]byte(bad)) != nil {
			t.Errorf("%s read as an error body", bad)
		}
	}
	if got := cut(strings.Repeat("é", 300), 511); len(got) != 510 {
		t.Fatalf("cut to %d bytes", len(got))
	}
}
