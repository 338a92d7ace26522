package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	assignd "github.com/assignd/assignd/clients/go"
)

func TestEventsAreWrittenAsJSONLines(t *testing.T) {
	var buf bytes.Buffer
	out := &output{w: &buf}
	tasks := []assignd.Task{{Topic: "orders", Partition: 0}, {Topic: "orders", Partition: 1}}
	out.event(assignd.Event{Type: assignd.EventJoined, MemberID: "c-1"})
	out.event(assignd.Event{Type: assignd.EventRevoked, Tasks: tasks, Ack: 3})
	out.event(assignd.Event{Type: assignd.EventFenced, Rejoining: false})
	out.event(assignd.Event{Type: assignd.EventReplaced, MemberName: "worker-a"})
	out.event(assignd.Event{Type: assignd.EventError, Failure: &assignd.Failure{Kind: assignd.NoAnswer, Message: "timeout"}})
	out.event(assignd.Event{Type: assignd.EventDraining})
	out.stopped("drained")
	want := []string{
		`"event":"joined","member_id":"c-1"}`,
		`"event":"revoked","tasks":[["orders",0],["orders",1]]}`,
		`"event":"fenced","rejoining":false}`,
		`"event":"replaced","member_name":"worker-a"}`,
		`"event":"error","message":"no answer from the host: timeout"}`,
		`"event":"draining"}`,
		`"event":"stopped","reason":"drained"}`,
	}
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != len(want) {
		t.Fatalf("%d lines: %s", len(lines), buf.String())
	}
	for i, l := range lines {
		var parsed map[string]interface{}
		if err := json.Unmarshal([]byte(l), &parsed); err != nil || parsed["ts_ms"] == nil {
			t.Fatalf("line %q: %v", l, err)
		}
		if !strings.HasPrefix(l, `{"ts_ms":`) || !strings.HasSuffix(l, want[i]) {
			t.Errorf("line %q, want it to end with %q", l, want[i])
		}
	}
}

func TestAnOwnerProcessesAndALearnerReplays(t *testing.T) {
	dir := t.TempDir()
	task := assignd.Task{Topic: "orders", Partition: 0}
	r := rates{replay: 400, process: 10}
	owner := newTasks(&dirStore{stateDir: dir, changelogLen: 1000, owner: "a"}, r)
	learner := newTasks(&dirStore{stateDir: dir, changelogLen: 1000, owner: "b"}, r)
	owner.set([]assignd.Task{task}, active)
	learner.set([]assignd.Task{task}, warming)
	always := func(assignd.Task) bool { return true }

	owner.tick(time.Second, always)
	learner.tick(2*time.Second, always)
	if end := readFile(t, filepath.Join(dir, "changelog", "orders-0")); end != "1010" {
		t.Fatalf("changelog end %q", end)
	}
	if cp := readFile(t, filepath.Join(dir, "a", "orders-0")); cp != "1010" {
		t.Fatalf("checkpoint %q", cp)
	}
	lags := learner.lags(assignd.Assignment{Learner: []assignd.Task{task}})
	if len(lags) != 1 || lags[0].Lag != 210 {
		t.Fatalf("learner lags %v", lags)
	}
	learner.tick(time.Second, always)
	if learner.lag(task) != 0 {
		t.Fatalf("the learner lags %d", learner.lag(task))
	}
	// Fractions carry over ticks; nothing is processed past the lease.
	for i := 0; i < 15; i++ {
		owner.tick(10*time.Millisecond, always)
	}
	owner.tick(time.Second, func(assignd.Task) bool { return false })
	if end := readFile(t, filepath.Join(dir, "changelog", "orders-0")); end != "1011" {
		t.Fatalf("changelog end %q", end)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestMetadataFlagsAreKeyValuePairs(t *testing.T) {
	m := metadataFlag{}
	for _, pair := range []string{"zone=a", "version=1.4=rc", "empty="} {
		if err := m.Set(pair); err != nil {
			t.Fatal(err)
		}
	}
	if m["zone"] != "a" || m["version"] != "1.4=rc" || m["empty"] != "" || len(m) != 3 {
		t.Fatalf("%v", m)
	}
	for _, bad := range []string{"zone", "=a"} {
		if m.Set(bad) == nil {
			t.Fatalf("%q was taken", bad)
		}
	}
}
