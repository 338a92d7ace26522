package assignd

import (
	"context"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

// TestEndpointsPastTheHostsLimitsAreRefused: a member's config and
// SetEndpoint refuse what the host would.
func TestEndpointsPastTheHostsLimitsAreRefused(t *testing.T) {
	if err := checkEndpoint("http://10.0.0.5:8080", map[string]string{"zone": "a", "version": ""}); err != nil {
		t.Fatal(err)
	}
	if err := checkEndpoint("", nil); err != nil {
		t.Fatalf("none at all: %v", err)
	}
	tooMany := map[string]string{}
	for n := 0; n <= MetadataPairsMax; n++ {
		tooMany[strings.Repeat("k", n+1)] = "v"
	}
	refused := []struct {
		endpoint string
		metadata map[string]string
	}{
		{"http://a b", nil},
		{strings.Repeat("x", EndpointBytesMax+1), nil},
		{"", map[string]string{"": "v"}},
		{"", map[string]string{strings.Repeat("k", MetadataKeyBytesMax+1): "v"}},
		{"", map[string]string{"k": strings.Repeat("v", MetadataValueBytesMax+1)}},
		{"", map[string]string{"k": "line\nbreak"}},
		{"", tooMany},
	}
	for _, c := range refused {
		if checkEndpoint(c.endpoint, c.metadata) == nil {
			t.Fatalf("%q %v passed", c.endpoint, c.metadata)
		}
	}
	config := quietConfig("http://127.0.0.1:1")
	config.Endpoint = "http://a b"
	if _, err := Start(context.Background(), config, ListenerFuncs{}); err == nil {
		t.Fatal("a member started with a bad endpoint")
	}
}

// TestAMemberPublishesItsEndpointOnJoinAndAChangeOnTheNextHeartbeat.
func TestAMemberPublishesItsEndpointOnJoinAndAChangeOnTheNextHeartbeat(t *testing.T) {
	node := newNode(t, func(w http.ResponseWriter, r *http.Request, n int) {
		answerJSON(w, 20, 5000, `,"active":[["orders",0]]`)
	})
	config := quietConfig(node.URL)
	config.Endpoint = "http://10.0.0.5:8080"
	config.Metadata = map[string]string{"zone": "a"}
	m, err := Start(context.Background(), config, ListenerFuncs{})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the join", func() bool { return node.count() >= 1 })
	if join := node.body(0); join["endpoint"] != "http://10.0.0.5:8080" || !reflect.DeepEqual(join["metadata"], map[string]interface{}{"zone": "a"}) {
		t.Fatalf("join %v", join)
	}
	if err := m.SetEndpoint("http://a b", nil); err == nil {
		t.Fatal("a bad endpoint was taken")
	}
	waitFor(t, "a heartbeat", func() bool { return node.count() >= 2 })
	if _, carried := node.body(1)["endpoint"]; carried {
		t.Fatalf("a heartbeat carried the unchanged endpoint: %v", node.body(1))
	}
	if err := m.SetEndpoint("", nil); err != nil {
		t.Fatal(err)
	}
	// The request in flight, if any, was built before the change.
	var change map[string]interface{}
	for i := 2; change == nil; i++ {
		waitFor(t, "the change", func() bool { return node.count() > i })
		if _, carried := node.body(i)["endpoint"]; carried {
			change = node.body(i)
		}
	}
	if change["endpoint"] != "" || !reflect.DeepEqual(change["metadata"], map[string]interface{}{}) {
		t.Fatalf("the change %v", change)
	}
	if err := m.Leave(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, carried := node.body(-1)["endpoint"]; carried {
		t.Fatalf("the leave carried the endpoint: %v", node.body(-1))
	}
}
