package assignd

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"
)

// fakeRoutes answers GET .../routes as the host does: at once without
// after_epoch or when the table is past it, else when it changes or after
// wait_ms. Before holds scripted answers for the first requests. Its
// tables promise 60 s unless validMs says otherwise: a watch then waits
// the configured wait (under half the promise).
type fakeRoutes struct {
	mu      sync.Mutex
	epoch   uint64
	owner   string
	validMs uint64
	// waitedMs, if set, is every table answer's Assignd-Routes-Waited-Ms.
	waitedMs string
	changed  chan struct{}
	// before: the n-th request (from 0) gets before[n] if set.
	before map[int]func(http.ResponseWriter)
	seen   []*http.Request
	times  []time.Time
}

func newFakeRoutes(epoch uint64, owner string) *fakeRoutes {
	return &fakeRoutes{epoch: epoch, owner: owner, validMs: 60_000, changed: make(chan struct{}),
		before: map[int]func(http.ResponseWriter){}}
}

// set changes the table and wakes the waiting queries.
func (f *fakeRoutes) set(epoch uint64, owner string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.epoch, f.owner = epoch, owner
	close(f.changed)
	f.changed = make(chan struct{})
}

func (f *fakeRoutes) requests() []*http.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*http.Request{}, f.seen...)
}

func (f *fakeRoutes) body() string {
	return fmt.Sprintf(`{"group":"g","epoch":%d,"group_epoch":1,"valid_ms":%d,"topics":{"orders":4},
		"members":{%q:{"member_name":null,"endpoint":"http://%s:80","metadata":{"zone":"a"}}},
		"active":{%q:[["orders",0,3]]},"learner":{},"standby":{},"moving":[],"unowned":[]}`,
		f.epoch, f.validMs, f.owner, f.owner, f.owner)
}

func (f *fakeRoutes) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	f.mu.Lock()
	n := len(f.seen)
	f.seen = append(f.seen, req)
	f.times = append(f.times, time.Now())
	scripted := f.before[n]
	epoch, changed := f.epoch, f.changed
	f.mu.Unlock()
	if scripted != nil {
		scripted(w)
		return
	}
	if after := req.URL.Query().Get("after_epoch"); after != "" {
		asked, _ := strconv.ParseUint(after, 10, 64)
		wait, _ := strconv.Atoi(req.URL.Query().Get("wait_ms"))
		if asked == epoch {
			select {
			case <-changed:
			case <-time.After(time.Duration(wait) * time.Millisecond):
			case <-req.Context().Done():
				return
			}
		}
	}
	f.mu.Lock()
	body, waitedMs := f.body(), f.waitedMs
	f.mu.Unlock()
	if waitedMs != "" {
		w.Header().Set("Assignd-Routes-Waited-Ms", waitedMs)
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(body))
}

// serve runs handler until the test ends, after the routers it started
// stopped (cleanups run last first), so no watch holds it open.
func serve(t *testing.T, handler http.Handler) *httptest.Server {
	server := httptest.NewServer(handler)
	t.Cleanup(server.Close)
	return server
}

func errorReply(status int, code string, headers ...string) func(http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		for i := 0; i+1 < len(headers); i += 2 {
			w.Header().Set(headers[i], headers[i+1])
		}
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"error":{"code":%q,"message":"%s here"}}`, code, code)
	}
}

func startTestRouter(t *testing.T, config RouterConfig) *Router {
	t.Helper()
	config.Group = "g"
	if config.Logger == nil {
		config.Logger = &StdLogger{Logger: testLogger(t), Min: LevelDebug}
	}
	r, err := StartRouter(context.Background(), config)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r
}

func ready(t *testing.T, r *Router) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.Ready(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestTheRouterWatchesAndIsToldOfAChange: the first query asks at once,
// the next ones wait past the held epoch with the token; a change is taken
// and announced.
func TestTheRouterWatchesAndIsToldOfAChange(t *testing.T) {
	host := newFakeRoutes(5, "m-1")
	server := serve(t, host)
	changes := make(chan *RouteTable, 4)
	r := startTestRouter(t, RouterConfig{URLs: []string{server.URL}, Token: "reader-token-0123",
		Wait: 5 * time.Second, OnChange: func(t *RouteTable) { changes <- t }})
	ready(t, r)
	route, err := r.OwnerOfString("orders", "customer-42")
	if err != nil || route.Owner.Endpoint != "http://m-1:80" || route.Epoch != 5 || !route.Fresh {
		t.Fatalf("%+v %v", route, err)
	}
	if first := <-changes; first.Epoch != 5 {
		t.Fatalf("first change %d", first.Epoch)
	}
	waitFor(t, "a watch is waiting", func() bool { return len(host.requests()) >= 2 })
	host.set(6, "m-2")
	if next := <-changes; next.Epoch != 6 {
		t.Fatalf("next change %d", next.Epoch)
	}
	route, _ = r.OwnerOfPartition("orders", 3)
	if route.Owner.MemberID != "m-2" || r.Table().Epoch != 6 {
		t.Fatalf("after the change: %+v", route)
	}
	seen := host.requests()
	if q := seen[0].URL.Query(); q.Has("after_epoch") || seen[0].URL.Path != "/v1/groups/g/routes" {
		t.Fatalf("first query %s", seen[0].URL)
	}
	if q := seen[1].URL.Query(); q.Get("after_epoch") != "5" || q.Get("wait_ms") != "5000" {
		t.Fatalf("second query %s", seen[1].URL)
	}
	for _, req := range seen {
		if req.Header.Get("Authorization") != "Bearer reader-token-0123" {
			t.Fatalf("authorization %q", req.Header.Get("Authorization"))
		}
	}
}

// TestA503WithRetryAfterIsWaitedOutThenTheRouterRecovers: a host past its
// watcher cap is left alone as long as it asked.
func TestA503WithRetryAfterIsWaitedOutThenTheRouterRecovers(t *testing.T) {
	host := newFakeRoutes(1, "m-1")
	host.before[0] = errorReply(http.StatusServiceUnavailable, "too_many_watchers", "Retry-After", "1")
	server := serve(t, host)
	r := startTestRouter(t, RouterConfig{URLs: []string{server.URL}})
	ready(t, r)
	host.mu.Lock()
	gap := host.times[1].Sub(host.times[0])
	host.mu.Unlock()
	// A lower bound only: the router may not ask again before the host's
	// Retry-After, however slow the machine.
	if gap < time.Second {
		t.Fatalf("asked again %v after a Retry-After of 1 s", gap)
	}
	if r.Err() != nil {
		t.Fatalf("after recovery: %v", r.Err())
	}
}

// TestTheRouterFailsOverToTheNextURL: a node that refuses connections is
// skipped for the next.
func TestTheRouterFailsOverToTheNextURL(t *testing.T) {
	host := newFakeRoutes(3, "m-1")
	server := serve(t, host)
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	r := startTestRouter(t, RouterConfig{URLs: []string{dead.URL + "," + server.URL}})
	ready(t, r)
	if r.Table().Epoch != 3 {
		t.Fatalf("epoch %d", r.Table().Epoch)
	}
}

// TestARefusalFailsReady: a 403 is reported at once, with the host's code.
func TestARefusalFailsReady(t *testing.T) {
	host := newFakeRoutes(1, "m-1")
	for i := 0; i < 3; i++ {
		host.before[i] = errorReply(http.StatusForbidden, "forbidden")
	}
	server := serve(t, host)
	r := startTestRouter(t, RouterConfig{URLs: []string{server.URL}, Token: "wrong-token-0123456"})
	err := r.Ready(context.Background())
	var refusal *RouterRefusal
	if !errors.As(err, &refusal) || refusal.Status != 403 || refusal.Code != "forbidden" {
		t.Fatalf("ready: %v", err)
	}
	if _, err := r.OwnerOfString("orders", "k"); !errors.Is(err, ErrNoTable) {
		t.Fatalf("owner before a table: %v", err)
	}
}

// TestARedirectIsFollowedWithTheToken: a 307 to the coordinator keeps the
// bearer token.
func TestARedirectIsFollowedWithTheToken(t *testing.T) {
	host := newFakeRoutes(2, "m-1")
	coordinator := serve(t, host)
	node := serve(t, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		http.Redirect(w, req, coordinator.URL+req.URL.RequestURI(), http.StatusTemporaryRedirect)
	}))
	r := startTestRouter(t, RouterConfig{URLs: []string{node.URL}, Token: "reader-token-0123"})
	ready(t, r)
	if got := host.requests()[0].Header.Get("Authorization"); got != "Bearer reader-token-0123" {
		t.Fatalf("authorization after the redirect %q", got)
	}
}

// TestAMisrouteAsksForANewerTableAtOnce: besides the watch, a plain query
// goes out, and the counter counts.
func TestAMisrouteAsksForANewerTableAtOnce(t *testing.T) {
	host := newFakeRoutes(7, "m-1")
	server := serve(t, host)
	r := startTestRouter(t, RouterConfig{URLs: []string{server.URL}})
	ready(t, r)
	waitFor(t, "a watch is waiting", func() bool { return len(host.requests()) >= 2 })
	route, _ := r.OwnerOfString("orders", "k")
	r.Misrouted(route)
	waitFor(t, "a plain query", func() bool { return len(host.requests()) >= 3 })
	if q := host.requests()[2].URL.Query(); q.Has("after_epoch") {
		t.Fatalf("the refresh waits: %s", q.Encode())
	}
	stale := route
	stale.Epoch = 6
	r.Misrouted(stale)
	if r.Misroutes() != 2 {
		t.Fatalf("misroutes %d", r.Misroutes())
	}
}

// TestALowerEpochAnsweringAWatchReplacesTheTable: the host answers a watch
// with a lower epoch only when the router's came from elsewhere.
func TestALowerEpochAnsweringAWatchReplacesTheTable(t *testing.T) {
	host := newFakeRoutes(9, "m-1")
	server := serve(t, host)
	r := startTestRouter(t, RouterConfig{URLs: []string{server.URL}})
	ready(t, r)
	waitFor(t, "a watch is waiting", func() bool { return len(host.requests()) >= 2 })
	host.set(4, "m-2")
	waitFor(t, "the lower table is taken", func() bool { return r.Table().Epoch == 4 })
	// A plain query's lower answer is not taken.
	r.offer(&RouteTable{Epoch: 3, SentAt: time.Now()}, nil)
	if r.Table().Epoch != 4 {
		t.Fatalf("epoch %d", r.Table().Epoch)
	}
}

// TestTheSameEpochAgainMovesTheBoundOn: a watch that ran out answers the
// table as it is; its later send time renews the bound without a change.
func TestTheSameEpochAgainMovesTheBoundOn(t *testing.T) {
	changes := 0
	r := &Router{config: RouterConfig{OnChange: func(*RouteTable) { changes++ }}}
	origin := time.Now()
	r.offer(&RouteTable{Epoch: 3, SentAt: origin, Valid: time.Second}, nil)
	three := uint64(3)
	r.offer(&RouteTable{Epoch: 3, SentAt: origin.Add(5 * time.Second), Valid: time.Second}, &three)
	if got := r.Table().SentAt; !got.Equal(origin.Add(5*time.Second)) || changes != 1 {
		t.Fatalf("sent at %v, %d changes", got.Sub(origin), changes)
	}
	r.offer(&RouteTable{Epoch: 3, SentAt: origin.Add(time.Second)}, nil)
	if got := r.Table().SentAt; !got.Equal(origin.Add(5 * time.Second)) {
		t.Fatalf("an older answer moved the bound back to %v", got.Sub(origin))
	}
	// Sent later but read sooner (it waited less) moves nothing; read
	// later, it moves the bound on.
	r.offer(&RouteTable{Epoch: 3, SentAt: origin.Add(4 * time.Second), Waited: 500 * time.Millisecond}, nil)
	if got := r.Table().FreshUntil(); !got.Equal(origin.Add(6 * time.Second)) {
		t.Fatalf("the bound ends %v after the origin", got.Sub(origin))
	}
	r.offer(&RouteTable{Epoch: 3, SentAt: origin.Add(5 * time.Second), Waited: 2 * time.Second}, nil)
	if got := r.Table(); got.Waited != 2*time.Second || !got.FreshUntil().Equal(origin.Add(8*time.Second)) {
		t.Fatalf("waited %v, the bound ends %v after the origin", got.Waited, got.FreshUntil().Sub(origin))
	}
}

// TestTheBoundCountsFromTheSendTimePlusTheHostsWait: an answer that came at
// once but says the query waited 1.5 s before the table was read is fresh
// for 2 s from then, 3.5 s from the send; without the header, 2 s.
func TestTheBoundCountsFromTheSendTimePlusTheHostsWait(t *testing.T) {
	for _, c := range []struct {
		header string
		bound  time.Duration
	}{{"1500", 3500 * time.Millisecond}, {"", 2 * time.Second}, {"soon", 2 * time.Second}} {
		host := newFakeRoutes(1, "m-1")
		host.validMs, host.waitedMs = 2000, c.header
		server := serve(t, host)
		r := startTestRouter(t, RouterConfig{URLs: []string{server.URL}})
		ready(t, r)
		held := r.Table()
		if got := held.FreshUntil().Sub(held.SentAt); got != c.bound {
			t.Fatalf("waited %q: fresh for %v from the send, want %v", c.header, got, c.bound)
		}
		if !held.freshAt(held.SentAt.Add(c.bound-time.Millisecond)) || held.freshAt(held.SentAt.Add(c.bound)) {
			t.Fatalf("waited %q: the bound's edge is not at %v", c.header, c.bound)
		}
		r.Close()
	}
}

// TestAWatchWaitsAtMostHalfThePromise: past a table that promises 2 s, a
// watch asks for 1 s (the next answer renews the bound before it runs
// out); past one that promises nothing, the configured wait; a configured
// wait under half the promise is kept.
func TestAWatchWaitsAtMostHalfThePromise(t *testing.T) {
	host := newFakeRoutes(1, "m-1")
	host.validMs = 2000
	server := serve(t, host)
	r := startTestRouter(t, RouterConfig{URLs: []string{server.URL}, Wait: 20 * time.Second})
	ready(t, r)
	waitFor(t, "a watch", func() bool { return len(host.requests()) >= 2 })
	if q := host.requests()[1].URL.Query(); q.Get("after_epoch") != "1" || q.Get("wait_ms") != "1000" {
		t.Fatalf("the watch past a 2 s promise: %s", host.requests()[1].URL)
	}
	host.mu.Lock()
	host.validMs = 0
	host.mu.Unlock()
	host.set(2, "m-1")
	waitFor(t, "a watch past epoch 2", func() bool { return watchPast(host, "2") != nil })
	if wait := watchPast(host, "2").URL.Query().Get("wait_ms"); wait != "20000" {
		t.Fatalf("the watch past no promise waits %s ms", wait)
	}

	short := newFakeRoutes(1, "m-1")
	short.validMs = 2000
	shortServer := serve(t, short)
	r = startTestRouter(t, RouterConfig{URLs: []string{shortServer.URL}, Wait: 300 * time.Millisecond})
	ready(t, r)
	waitFor(t, "a watch", func() bool { return len(short.requests()) >= 2 })
	if wait := short.requests()[1].URL.Query().Get("wait_ms"); wait != "300" {
		t.Fatalf("a configured 300 ms became %s", wait)
	}
}

// watchPast is the first request host saw past epoch, if any.
func watchPast(host *fakeRoutes, epoch string) *http.Request {
	for _, req := range host.requests() {
		if req.URL.Query().Get("after_epoch") == epoch {
			return req
		}
	}
	return nil
}
