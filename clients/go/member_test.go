package assignd

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// recorder is a listener that keeps every event, in order.
type recorder struct {
	mu     sync.Mutex
	events []Event
	// onRevoked runs inside Revoked, before the member acknowledges.
	onRevoked func()
}

func (r *recorder) Event(e Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

func (r *recorder) Assigned([]Task, bool) {}
func (r *recorder) Lost([]Task)           {}
func (r *recorder) Revoked([]Task) {
	if r.onRevoked != nil {
		r.onRevoked()
	}
}

func (r *recorder) types() []EventType {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []EventType
	for _, e := range r.events {
		out = append(out, e.Type)
	}
	return out
}

func (r *recorder) has(t EventType) bool {
	for _, got := range r.types() {
		if got == t {
			return true
		}
	}
	return false
}

// answerJSON is a 200 answer for member m at epoch 1.
func answerJSON(w http.ResponseWriter, intervalMs, leaseMs int, extra string) {
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"member_id":"m","member_epoch":1,"heartbeat_interval_ms":%d,"lease_ms":%d,"unreached_lease_ms":%d,"unreached_flight_ms":%d%s}`,
		intervalMs, leaseMs, leaseMs, leaseMs, extra)
}

func quietConfig(url string) Config {
	return Config{URLs: []string{url}, Group: "g", Topics: []string{"orders"}, Logger: nopLogger{}, RequestTimeout: 2 * time.Second}
}

func waitStopped(t *testing.T, m *Member) {
	t.Helper()
	select {
	case <-m.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the member did not stop")
	}
}

func TestARevocationIsAcknowledgedOnceTheListenerReturnsThenTheMemberLeaves(t *testing.T) {
	var released sync.WaitGroup
	released.Add(1)
	node := newNode(t, func(w http.ResponseWriter, r *http.Request, n int) {
		switch n {
		case 0:
			answerJSON(w, 50, 5000, `,"active":[["orders",0,1]]`)
		case 1:
			answerJSON(w, 50, 5000, `,"active":[["orders",0]],"revoking":[["orders",1]]`)
		default:
			answerJSON(w, 50, 5000, `,"active":[["orders",0]]`)
		}
	})
	// The member, for the listener: set once Start returned.
	var member atomic.Pointer[Member]
	started := make(chan struct{})
	listener := &recorder{onRevoked: func() {
		<-started
		// Still processing: the task is held and reported owned.
		if !member.Load().MayProcess(Task{"orders", 1}) {
			t.Error("a task being released may not be processed")
		}
		released.Done()
	}}
	m, err := Start(context.Background(), quietConfig(node.URL), listener)
	if err != nil {
		t.Fatal(err)
	}
	member.Store(m)
	close(started)
	released.Wait()
	waitFor(t, "a heartbeat without the released task", func() bool {
		owned, _ := node.body(-1)["owned"].([]interface{})
		return node.count() > 2 && len(owned) == 1
	})
	if m.MayProcess(Task{"orders", 1}) || !m.MayProcess(Task{"orders", 0}) {
		t.Fatal("may process the wrong tasks")
	}
	if err := m.Leave(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitStopped(t, m)
	last := node.body(-1)
	if last["member_epoch"] != float64(-1) || m.Reason() != StopLeft || m.Err() != nil {
		t.Fatalf("last request %v, stopped %q: %v", last, m.Reason(), m.Err())
	}
	// The leave gives up the task still held: Lost, before the member stops.
	want := []EventType{EventJoined, EventAssigned, EventRevoked, EventLost}
	if got := listener.types(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("events %v, want %v", got, want)
	}
}

func TestADrainEndsInALeave(t *testing.T) {
	node := newNode(t, func(w http.ResponseWriter, r *http.Request, n int) {
		answerJSON(w, 50, 5000, `,"draining":true,"drained":true`)
	})
	listener := &recorder{}
	m, err := Start(context.Background(), quietConfig(node.URL), listener)
	if err != nil {
		t.Fatal(err)
	}
	m.Drain()
	waitStopped(t, m)
	if m.Reason() != StopDrained || m.Err() != nil || !listener.has(EventDrained) {
		t.Fatalf("stopped %q (%v) after %v", m.Reason(), m.Err(), listener.types())
	}
	if node.body(0)["drain"] != true || node.body(-1)["member_epoch"] != float64(-1) {
		t.Fatalf("requests %v, %v", node.body(0), node.body(-1))
	}
}

func TestAReplacedMemberStopsWithErrReplaced(t *testing.T) {
	node := newNode(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if n == 0 {
			answerJSON(w, 50, 5000, `,"active":[["orders",0]]`)
			return
		}
		writeError(w, http.StatusConflict, CodeReplaced)
	})
	listener := &recorder{}
	config := quietConfig(node.URL)
	config.MemberName = "worker-a"
	m, err := Start(context.Background(), config, listener)
	if err != nil {
		t.Fatal(err)
	}
	waitStopped(t, m)
	want := []EventType{EventJoined, EventAssigned, EventLost, EventReplaced}
	if got := listener.types(); fmt.Sprint(got) != fmt.Sprint(want) || m.Err() != ErrReplaced || m.Reason() != StopReplaced {
		t.Fatalf("events %v, stopped %q: %v", got, m.Reason(), m.Err())
	}
}

// The lease is acted on while a heartbeat hangs: the tasks are lost when
// it runs out, not when the request times out.
func TestTheLeaseRunsOutWhileAHeartbeatIsInFlight(t *testing.T) {
	hang := make(chan struct{})
	t.Cleanup(func() { close(hang) })
	node := newNode(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if n == 0 {
			answerJSON(w, 50, 300, `,"active":[["orders",0]]`)
			return
		}
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	})
	listener := &recorder{}
	config := quietConfig(node.URL)
	config.RequestTimeout = 5 * time.Second
	ctx, cancel := context.WithCancel(context.Background())
	m, err := Start(ctx, config, listener)
	if err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	waitFor(t, "the tasks are lost", func() bool { return listener.has(EventLost) })
	if elapsed := time.Since(started); elapsed > 2*time.Second {
		t.Fatalf("lost after %v", elapsed)
	}
	if m.MayProcess(Task{"orders", 0}) {
		t.Fatal("may process past the lease")
	}
	cancel()
	waitStopped(t, m)
	if m.Err() != context.Canceled || m.Reason() != "" {
		t.Fatalf("stopped %q: %v", m.Reason(), m.Err())
	}
}

func TestOnHeartbeatSeesEveryRoundTripAndItsFailure(t *testing.T) {
	node := newNode(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if n == 1 {
			http.Error(w, `{"error":{"code":"internal","message":"boom"}}`, http.StatusInternalServerError)
			return
		}
		answerJSON(w, 20, 5000, `,"active":[["orders",0]]`)
	})
	var mu sync.Mutex
	var seen []*Failure
	config := quietConfig(node.URL)
	config.OnHeartbeat = func(latency time.Duration, failure *Failure) {
		if latency <= 0 {
			t.Errorf("latency %v", latency)
		}
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, failure)
	}
	m, err := Start(context.Background(), config, &recorder{})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "three heartbeats", func() bool { return node.count() >= 3 })
	if err := m.Leave(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitStopped(t, m)
	mu.Lock()
	defer mu.Unlock()
	// Every request, the leave included, was seen once, in order.
	if len(seen) != node.count() {
		t.Fatalf("observed %d heartbeats of %d", len(seen), node.count())
	}
	if seen[0] != nil || seen[1] == nil || seen[1].Kind != Server || seen[1].Status != 500 || seen[2] != nil {
		t.Fatalf("observed %v", seen)
	}
}
