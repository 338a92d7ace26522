package assignd

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// fakeNode is a host node whose answers a test scripts; n counts its
// requests from 0.
type fakeNode struct {
	*httptest.Server
	mu       sync.Mutex
	requests []*http.Request
	bodies   []map[string]interface{}
}

func newNode(t *testing.T, script func(w http.ResponseWriter, r *http.Request, n int)) *fakeNode {
	node := &fakeNode{}
	node.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]interface{}
		_ = json.NewDecoder(r.Body).Decode(&body)
		node.mu.Lock()
		n := len(node.requests)
		node.requests = append(node.requests, r)
		node.bodies = append(node.bodies, body)
		node.mu.Unlock()
		script(w, r, n)
	}))
	t.Cleanup(node.Close)
	return node
}

// body is the JSON body of request i (-1: the last).
func (n *fakeNode) body(i int) map[string]interface{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	if i < 0 {
		i += len(n.bodies)
	}
	return n.bodies[i]
}

func (n *fakeNode) request(i int) *http.Request {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.requests[i]
}

func (n *fakeNode) count() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.requests)
}

func writeAnswer(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"member_id":"m","member_epoch":1,"heartbeat_interval_ms":500,"active":[["orders",0,1]],"lease_ms":1500}`))
}

func writeError(w http.ResponseWriter, status int, code string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(`{"error":{"code":"` + code + `","message":"fake ` + code + `"}}`))
}

// refusedURL is a loopback URL nothing listens on.
func refusedURL(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + l.Addr().String()
	l.Close()
	return url
}

func beat(t *testing.T, tr *transport) (*HeartbeatResponse, *Failure) {
	t.Helper()
	return tr.heartbeat(context.Background(), &HeartbeatRequest{MemberID: "c-1", Capacity: 1, Owned: TaskRanges{}, Lags: []LagRow{}, TaskRanges: true})
}

func transportTo(t *testing.T, timeout time.Duration, urls ...string) *transport {
	tr, err := newTransport(urls, "g", "tok", timeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tr.close)
	return tr
}

func expectFailure(t *testing.T, f *Failure, want Failure) {
	t.Helper()
	if f == nil {
		t.Fatalf("no failure, want %+v", want)
	}
	same := f.Kind == want.Kind && f.Status == want.Status && f.Code == want.Code
	if want.RetryAfterMs == nil {
		same = same && f.RetryAfterMs == nil
	} else {
		same = same && f.RetryAfterMs != nil && *f.RetryAfterMs == *want.RetryAfterMs
	}
	if !same {
		t.Fatalf("failure %+v, want %+v", f, want)
	}
}

func ms(v int64) *int64 { return &v }

func TestAHeartbeatIsPostedWithTheTokenAndItsAnswerRead(t *testing.T) {
	node := newNode(t, func(w http.ResponseWriter, r *http.Request, n int) { writeAnswer(w) })
	r, f := beat(t, transportTo(t, time.Second, node.URL+"/"))
	if f != nil || r.MemberID != "m" || len(r.Active) != 2 {
		t.Fatalf("answer %+v, failure %v", r, f)
	}
	req := node.request(0)
	if req.Method != http.MethodPost || req.URL.Path != "/v1/groups/g/heartbeat" ||
		req.Header.Get("Authorization") != "Bearer tok" || req.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("request %s %s %v", req.Method, req.URL, req.Header)
	}
	if body := node.body(0); body["member_id"] != "c-1" || body["task_ranges"] != true {
		t.Fatalf("body %v", body)
	}
}

func TestARedirectIsFollowedAndRemembered(t *testing.T) {
	coordinator := newNode(t, func(w http.ResponseWriter, r *http.Request, n int) { writeAnswer(w) })
	other := newNode(t, func(w http.ResponseWriter, r *http.Request, n int) {
		w.Header().Set("Location", coordinator.URL+"/v1/groups/g/heartbeat")
		writeError(w, http.StatusTemporaryRedirect, "not_coordinator")
	})
	tr := transportTo(t, time.Second, other.URL)
	for i := 0; i < 2; i++ {
		if _, f := beat(t, tr); f != nil {
			t.Fatal(f)
		}
	}
	if other.count() != 1 || coordinator.count() != 2 {
		t.Fatalf("other got %d, the coordinator %d", other.count(), coordinator.count())
	}
	if coordinator.request(1).Header.Get("Authorization") != "Bearer tok" {
		t.Fatal("the token did not follow the redirect")
	}
}

func TestARelativeRedirectIsResolved(t *testing.T) {
	node := newNode(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if r.URL.Path == "/elsewhere/heartbeat" {
			writeAnswer(w)
			return
		}
		w.Header().Set("Location", "/elsewhere/heartbeat")
		w.WriteHeader(http.StatusPermanentRedirect)
	})
	if _, f := beat(t, transportTo(t, time.Second, node.URL)); f != nil {
		t.Fatal(f)
	}
}

func TestARefusedConnectionTriesTheNextBootstrapURL(t *testing.T) {
	node := newNode(t, func(w http.ResponseWriter, r *http.Request, n int) { writeAnswer(w) })
	if _, f := beat(t, transportTo(t, time.Second, refusedURL(t), node.URL)); f != nil {
		t.Fatal(f)
	}
	_, f := beat(t, transportTo(t, time.Second, refusedURL(t), refusedURL(t)))
	expectFailure(t, f, Failure{Kind: Unreached})
}

func TestAShardBetweenOwnersIsRetriedWithinTheRequestTimeout(t *testing.T) {
	node := newNode(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if n < 2 {
			writeError(w, http.StatusServiceUnavailable, "shard_unavailable")
			return
		}
		writeAnswer(w)
	})
	if _, f := beat(t, transportTo(t, time.Second, node.URL)); f != nil || node.count() != 3 {
		t.Fatalf("%v after %d requests", f, node.count())
	}
	unavailable := newNode(t, func(w http.ResponseWriter, r *http.Request, n int) {
		writeError(w, http.StatusServiceUnavailable, "shard_unavailable")
	})
	_, f := beat(t, transportTo(t, 300*time.Millisecond, unavailable.URL))
	expectFailure(t, f, Failure{Kind: Unreached})
	// The node that forwards to an unreachable coordinator may have
	// reached it.
	unreachable := newNode(t, func(w http.ResponseWriter, r *http.Request, n int) {
		writeError(w, http.StatusServiceUnavailable, "coordinator_unreachable")
	})
	_, f = beat(t, transportTo(t, 300*time.Millisecond, unreachable.URL))
	expectFailure(t, f, Failure{Kind: Server, Status: 503})
}

func TestRefusalsCarryTheirCodeAndRetryAfter(t *testing.T) {
	cases := []struct {
		status     int
		code       string
		retryAfter string
		want       Failure
	}{
		{409, "fenced", "", Failure{Kind: Refused, Status: 409, Code: "fenced"}},
		{429, "join_rate_limited", "3", Failure{Kind: Refused, Status: 429, Code: "join_rate_limited", RetryAfterMs: ms(3000)}},
		{503, "too_many_connections", "600", Failure{Kind: Server, Status: 503, RetryAfterMs: ms(60_000)}},
		{500, "internal", "soon", Failure{Kind: Server, Status: 500}},
	}
	for _, c := range cases {
		c := c
		node := newNode(t, func(w http.ResponseWriter, r *http.Request, n int) {
			if c.retryAfter != "" {
				w.Header().Set("Retry-After", c.retryAfter)
			}
			writeError(w, c.status, c.code)
		})
		_, f := beat(t, transportTo(t, time.Second, node.URL))
		expectFailure(t, f, c.want)
	}
}

func TestAnswersWithoutAnErrorBody(t *testing.T) {
	cases := []struct {
		status int
		body   string
		want   Failure
	}{
		{500, "boom", Failure{Kind: Server, Status: 500}},
		{400, "<html>", Failure{Kind: Unreadable}},
		{200, "{not json", Failure{Kind: Unreadable}},
	}
	for _, c := range cases {
		c := c
		node := newNode(t, func(w http.ResponseWriter, r *http.Request, n int) {
			w.WriteHeader(c.status)
			_, _ = w.Write([]byte(c.body))
		})
		_, f := beat(t, transportTo(t, time.Second, node.URL))
		expectFailure(t, f, c.want)
	}
}

func TestATimeoutIsNoAnswerAndTheNextHeartbeatAsksTheNextNode(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	slow := newNode(t, func(w http.ResponseWriter, r *http.Request, n int) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	other := newNode(t, func(w http.ResponseWriter, r *http.Request, n int) { writeAnswer(w) })
	tr := transportTo(t, 200*time.Millisecond, slow.URL, other.URL)
	_, f := beat(t, tr)
	expectFailure(t, f, Failure{Kind: NoAnswer})
	if _, f := beat(t, tr); f != nil || other.count() != 1 {
		t.Fatalf("%v; the other node got %d", f, other.count())
	}
}

func TestAConnectionLostAfterSendingIsNoAnswer(t *testing.T) {
	node := newNode(t, func(w http.ResponseWriter, r *http.Request, n int) {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
	})
	_, f := beat(t, transportTo(t, time.Second, node.URL))
	expectFailure(t, f, Failure{Kind: NoAnswer})
}

func TestRedirectsThatReachNoCoordinatorAreUnreached(t *testing.T) {
	var loop *fakeNode
	loop = newNode(t, func(w http.ResponseWriter, r *http.Request, n int) {
		w.Header().Set("Location", loop.URL+"/v1/groups/g/heartbeat")
		writeError(w, http.StatusTemporaryRedirect, "not_coordinator")
	})
	_, f := beat(t, transportTo(t, time.Second, loop.URL))
	expectFailure(t, f, Failure{Kind: Unreached})
	if loop.count() != redirectsMax+1 {
		t.Fatalf("%d requests", loop.count())
	}
	dead := refusedURL(t)
	toDead := newNode(t, func(w http.ResponseWriter, r *http.Request, n int) {
		w.Header().Set("Location", dead+"/v1/groups/g/heartbeat")
		w.WriteHeader(http.StatusTemporaryRedirect)
	})
	_, f = beat(t, transportTo(t, time.Second, toDead.URL))
	expectFailure(t, f, Failure{Kind: Unreached})
	// A redirect without a usable location still says the node does not
	// coordinate the group.
	nowhere := newNode(t, func(w http.ResponseWriter, r *http.Request, n int) {
		writeError(w, http.StatusTemporaryRedirect, "not_coordinator")
	})
	_, f = beat(t, transportTo(t, time.Second, nowhere.URL))
	expectFailure(t, f, Failure{Kind: Unreached})
}

func TestBadBaseURLsAreRefused(t *testing.T) {
	for _, bad := range []string{"ftp://h", "h:7070", "http://"} {
		if _, err := newTransport([]string{bad}, "g", "", time.Second); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	u, err := heartbeatURL("http://h:1/base/", "a b")
	if err != nil || u.String() != "http://h:1/base/v1/groups/a%20b/heartbeat" {
		t.Fatalf("%v %v", u, err)
	}
}
