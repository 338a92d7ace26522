package assignd

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"testing"
)

// Loads set through the member go once the host asks: all of them (with
// the config's load capacity) after "full"; an invalid one is refused at
// the call, changing nothing.
func TestLoadsSetThroughTheMemberReachTheHostOnceItAsks(t *testing.T) {
	node := newNode(t, func(w http.ResponseWriter, r *http.Request, n int) {
		report := ""
		if n > 0 {
			report = `,"load_report":"full"`
		}
		answerJSON(w, 20, 5000, `,"active":[["orders",0,2]]`+report)
	})
	config := quietConfig(node.URL)
	config.LoadCapacity = 300
	m, err := Start(context.Background(), config, &recorder{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = m.Leave(context.Background()) }()
	waitFor(t, "the tasks", func() bool { return len(m.Assignment().Active) == 3 })
	if m.SetLoad(Task{"orders", 0}, math.NaN()) == nil || m.SetLoad(Task{"orders", 0}, -1) == nil {
		t.Fatal("an invalid load was taken")
	}
	tooBusy := 11.0
	if m.SetUtilisation(&tooBusy) == nil {
		t.Fatal("an invalid utilisation was taken")
	}
	busy := 0.25
	if err := m.SetUtilisation(&busy); err != nil {
		t.Fatal(err)
	}
	if err := m.SetLoads(map[Task]float64{{"orders", 0}: 7, {"orders", 1}: 7, {"orders", 2}: 2.5}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a heartbeat with the loads", func() bool {
		loads, _ := node.body(-1)["loads"].([]interface{})
		return len(loads) == 2
	})
	body := node.body(-1)
	got, _ := json.Marshal([]interface{}{body["loads"], body["utilisation"], body["load_capacity"]})
	if want := `[[["orders",0,1,7],["orders",2,2.5]],0.25,300]`; string(got) != want {
		t.Fatalf("sent %s, want %s", got, want)
	}
}

func TestALoadConfigTheHostWouldRefuseIsRefused(t *testing.T) {
	for _, config := range []Config{
		{URLs: []string{"http://127.0.0.1:1"}, Group: "g", Topics: []string{"t"}, LoadCapacity: -1},
		{URLs: []string{"http://127.0.0.1:1"}, Group: "g", Topics: []string{"t"}, LoadThreshold: math.Inf(1)},
	} {
		if _, err := config.withDefaults(); err == nil {
			t.Fatalf("%+v was taken", config)
		}
	}
}
