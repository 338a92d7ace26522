package assignd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"testing"
	"time"
)

// routerSmokeReaderToken is the group's reader token in the router's smoke
// test.
const routerSmokeReaderToken = "reader-reader-reader-1"

// TestRouterSmokeAgainstTheRealHost, when ASSIGND_BIN names the binary: a
// group with a reader token, a member publishing its endpoint, a router
// reading the owner of a key; a second member joins, the router is told,
// and once the group is stable every partition's owner is one of the two
// endpoints. The admin token reads routes too; a wrong token is refused.
func TestRouterSmokeAgainstTheRealHost(t *testing.T) {
	bin := os.Getenv("ASSIGND_BIN")
	if bin == "" {
		t.Skip("ASSIGND_BIN is not set: no smoke test against the real host")
	}
	base := startServer(t, bin)
	createGroup(t, base, "g", `{"topics":[{"name":"orders","partitions":4}],"learners":"off",
		"heartbeat_interval_ms":200,"expansion_timeout_ms":200,"reader_token":"`+routerSmokeReaderToken+`"}`)
	endpoints := map[string]string{"a": "http://10.0.0.1:8080", "b": "http://10.0.0.2:8080"}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logger := &StdLogger{Logger: testLogger(t), Min: LevelInfo}
	join := func(name string) *Member {
		m, err := Start(ctx, Config{URLs: []string{base}, Group: "g", Topics: []string{"orders"}, MemberName: name,
			Endpoint: endpoints[name], Metadata: map[string]string{"zone": name}, Logger: logger}, ListenerFuncs{})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	changes := make(chan *RouteTable, 64)
	router := startSmokeRouter(t, base, routerSmokeReaderToken, func(table *RouteTable) { changes <- table })
	a := join("a")
	waitFor(t, "a owns customer-42", func() bool {
		route, err := router.OwnerOfString("orders", "customer-42")
		return err == nil && route.Owner != nil
	})
	route, _ := router.OwnerOfString("orders", "customer-42")
	if owner := route.Owner; owner.Endpoint != endpoints["a"] || owner.MemberName != "a" || owner.Metadata["zone"] != "a" {
		t.Fatalf("owner %+v", owner)
	}
	for len(changes) > 0 {
		<-changes
	}
	b := join("b")
	select {
	case <-changes:
	case <-time.After(30 * time.Second):
		t.Fatal("the router was not told of b's join")
	}
	waitFor(t, "every partition's owner is a or b, and both own some", func() bool {
		seen := map[string]bool{}
		for p := uint32(0); p < 4; p++ {
			route, err := router.OwnerOfPartition("orders", p)
			if err != nil || route.Owner == nil {
				return false
			}
			seen[route.Owner.Endpoint] = true
		}
		return len(seen) == 2 && seen[endpoints["a"]] && seen[endpoints["b"]]
	})
	checkLookupsAgree(t, base, router)
	admin := startSmokeRouter(t, base, smokeToken, nil)
	if admin.Table().Epoch < 1 {
		t.Fatalf("the admin's table epoch %d", admin.Table().Epoch)
	}
	wrong, err := StartRouter(ctx, RouterConfig{URLs: []string{base}, Group: "g", Token: "not-the-reader-token", Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	defer wrong.Close()
	var refusal *RouterRefusal
	if err := wrong.Ready(readyContext(t)); !errors.As(err, &refusal) || refusal.Status != 403 {
		t.Fatalf("a wrong token: %v", err)
	}
	checkAQuietWatchRenewsTheBound(t, router)
	for _, m := range []*Member{b, a} {
		leaveCtx, done := context.WithTimeout(ctx, 10*time.Second)
		if err := m.Leave(leaveCtx); err != nil {
			t.Fatal(err)
		}
		done()
	}
}

// checkAQuietWatchRenewsTheBound: a quiet watch runs out after half the
// host's default promise, and its answer says how long it waited; the
// table's bound counts from the send time plus that wait.
func checkAQuietWatchRenewsTheBound(t *testing.T, router *Router) {
	waitFor(t, "a watch says how long it waited", func() bool { return router.Table().Waited > 0 })
	renewed := router.Table()
	if renewed.Valid != 2*time.Second {
		t.Fatalf("the host's default promise is %v", renewed.Valid)
	}
	if got := renewed.FreshUntil().Sub(renewed.SentAt); got != renewed.Waited+renewed.Valid {
		t.Fatalf("fresh for %v from the send, having waited %v", got, renewed.Waited)
	}
}

// checkLookupsAgree: the host's /routes/lookup and the router put keys on
// the same partitions (one partitioner on both sides).
func checkLookupsAgree(t *testing.T, base string, router *Router) {
	t.Helper()
	for n := 0; n < 20; n++ {
		key := fmt.Sprintf("key-%d", n)
		req, _ := http.NewRequest(http.MethodGet, base+"/v1/groups/g/routes/lookup?topic=orders&key="+url.QueryEscape(key), nil)
		req.Header.Set("Authorization", "Bearer "+routerSmokeReaderToken)
		answer, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var lookup struct {
			Partition uint32 `json:"partition"`
		}
		err = json.NewDecoder(answer.Body).Decode(&lookup)
		answer.Body.Close()
		if err != nil || answer.StatusCode != http.StatusOK {
			t.Fatalf("lookup of %s: %d %v", key, answer.StatusCode, err)
		}
		route, err := router.OwnerOfString("orders", key)
		if err != nil || route.Partition != lookup.Partition {
			t.Fatalf("%s: the host says partition %d, the router %d (%v)", key, lookup.Partition, route.Partition, err)
		}
	}
}

func startSmokeRouter(t *testing.T, base, token string, onChange func(*RouteTable)) *Router {
	t.Helper()
	r, err := StartRouter(context.Background(), RouterConfig{URLs: []string{base}, Group: "g", Token: token,
		Wait: 2 * time.Second, OnChange: onChange, Logger: &StdLogger{Logger: testLogger(t), Min: LevelInfo}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	if err := r.Ready(readyContext(t)); err != nil {
		t.Fatal(err)
	}
	return r
}

func readyContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}
