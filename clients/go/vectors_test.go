package assignd

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
)

// vectorsDir holds the conformance vectors the Rust machine generates.
const vectorsDir = "../conformance/vectors"

type vector struct {
	Name   string `json:"name"`
	About  string `json:"about"`
	Config struct {
		MemberName *string           `json:"member_name"`
		Topics     []string          `json:"topics"`
		Rack       *string           `json:"rack"`
		Capacity   uint32            `json:"capacity"`
		Endpoint   *string           `json:"endpoint"`
		Metadata   map[string]string `json:"metadata"`
		IDPrefix   string            `json:"id_prefix"`
		// LoadThreshold: absent is the default.
		LoadThreshold float64 `json:"load_threshold"`
	} `json:"config"`
	Steps []vectorStep `json:"steps"`
}

type vectorStep struct {
	At     int64                      `json:"at"`
	Input  map[string]json.RawMessage `json:"input"`
	Expect map[string]json.RawMessage `json:"expect"`
}

// TestVectors replays every vector of the conformance directory and
// compares every output each step lists.
func TestVectors(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(vectorsDir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no vectors in %s", vectorsDir)
	}
	sort.Strings(files)
	checkIndex(t, files)
	for _, file := range files {
		file := file
		t.Run(filepath.Base(file), func(t *testing.T) { replayVector(t, file) })
	}
}

// checkIndex: the INDEX, once written, lists exactly the vector files.
func checkIndex(t *testing.T, files []string) {
	index, err := os.ReadFile(filepath.Join(vectorsDir, "INDEX"))
	if os.IsNotExist(err) {
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	var listed, found []string
	for _, name := range strings.Fields(string(index)) {
		listed = append(listed, name)
	}
	for _, file := range files {
		found = append(found, filepath.Base(file))
	}
	sort.Strings(listed)
	if !reflect.DeepEqual(listed, found) {
		t.Fatalf("INDEX lists %v, the directory holds %v", listed, found)
	}
}

func replayVector(t *testing.T, file string) {
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var v vector
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("reading %s: %v", file, err)
	}
	config := MachineConfig{Topics: v.Config.Topics, Capacity: v.Config.Capacity, IDPrefix: v.Config.IDPrefix}
	if v.Config.MemberName != nil {
		config.MemberName = *v.Config.MemberName
	}
	if v.Config.Rack != nil {
		config.Rack = *v.Config.Rack
	}
	if v.Config.Endpoint != nil {
		config.Endpoint = *v.Config.Endpoint
	}
	config.Metadata = v.Config.Metadata
	config.LoadThreshold = v.Config.LoadThreshold
	// A vector's machine is made at time 0.
	m := NewMachine(config, 0, nil)
	for i, step := range v.Steps {
		outputs := applyStep(t, m, step)
		for key, want := range step.Expect {
			got, known := outputs[key]
			if !known {
				t.Fatalf("step %d (%s): unknown expected output %q", i, inputType(step), key)
			}
			if !sameJSON(t, want, got) {
				t.Fatalf("%s: %s\nstep %d at %d (%s): %s\n  want %s\n  got  %s",
					v.Name, v.About, i, step.At, inputType(step), key, want, mustJSON(t, got))
			}
		}
	}
}

func inputType(step vectorStep) string {
	var kind string
	_ = json.Unmarshal(step.Input["type"], &kind)
	return kind
}

// applyStep feeds one input and returns every output it can compare.
func applyStep(t *testing.T, m *Machine, step vectorStep) map[string]interface{} {
	now := step.At
	outputs := map[string]interface{}{}
	field := func(name string, into interface{}) {
		if err := json.Unmarshal(step.Input[name], into); err != nil {
			t.Fatalf("input %s: %v", name, err)
		}
	}
	switch kind := inputType(step); kind {
	case "poll_request":
		if r := m.PollRequest(now); r != nil {
			outputs["request"] = r
		} else {
			outputs["request"] = nil
		}
	case "answer":
		r, err := ParseResponse(step.Input["body"])
		if err != nil {
			t.Fatalf("answer body: %v", err)
		}
		m.OnAnswer(r, now)
	case "failure":
		var f vectorFailure
		field("failure", &f)
		m.OnFailure(f.failure(), now)
	case "ack":
		var ack uint64
		field("ack", &ack)
		m.Ack(ack, now)
	case "report_lags":
		var lags []LagRow
		field("lags", &lags)
		m.ReportLags(lags)
	case "drain":
		m.Drain(now)
	case "leave":
		m.Leave(now)
	case "tick":
		m.Tick(now)
	case "set_endpoint":
		var endpoint *string
		var metadata map[string]string
		field("endpoint", &endpoint)
		field("metadata", &metadata)
		if endpoint == nil {
			endpoint = new(string)
		}
		m.SetEndpoint(*endpoint, metadata)
	case "set_loads":
		var rows [][]json.RawMessage
		field("loads", &rows)
		for _, row := range rows {
			var task Task
			var load float64
			if json.Unmarshal(row[0], &task.Topic) != nil || json.Unmarshal(row[1], &task.Partition) != nil ||
				json.Unmarshal(row[2], &load) != nil || !m.SetLoad(task, load) {
				t.Fatalf("set_loads row %s", row)
			}
		}
	case "set_utilisation":
		var utilisation *float64
		field("utilisation", &utilisation)
		if !m.SetUtilisation(utilisation) {
			t.Fatalf("set_utilisation %v", utilisation)
		}
	case "set_load_capacity":
		var capacity *float64
		field("load_capacity", &capacity)
		if !m.SetLoadCapacity(capacity) {
			t.Fatalf("set_load_capacity %v", capacity)
		}
	case "check":
		var tasks []Task
		field("may_process", &tasks)
		answers := make([]bool, len(tasks))
		for i, task := range tasks {
			answers[i] = m.MayProcess(task, now)
		}
		outputs["may_process"] = answers
	default:
		t.Fatalf("unknown input %q", kind)
	}
	events := []interface{}{}
	for e, ok := m.PollEvent(); ok; e, ok = m.PollEvent() {
		events = append(events, eventJSON(e))
	}
	outputs["events"] = events
	outputs["timeout"] = optional(m.PollTimeout())
	outputs["lease_until"] = optional(m.LeaseUntil())
	outputs["member_id"] = nonEmpty(m.MemberID())
	outputs["member_epoch"] = m.MemberEpoch()
	outputs["assignment"] = m.Assignment()
	outputs["stopped"] = nonEmpty(string(m.Stopped()))
	return outputs
}

type vectorFailure struct {
	Kind         FailureKind `json:"kind"`
	Status       int         `json:"status"`
	Code         string      `json:"code"`
	RetryAfterMs *int64      `json:"retry_after_ms"`
}

func (f vectorFailure) failure() *Failure {
	return &Failure{Kind: f.Kind, Status: f.Status, Code: f.Code, RetryAfterMs: f.RetryAfterMs}
}

// failureJSON is a failure as the Rust machine writes it.
func failureJSON(f *Failure) map[string]interface{} {
	out := map[string]interface{}{"kind": f.Kind}
	switch f.Kind {
	case Refused:
		out["code"] = f.Code
		fallthrough
	case Server:
		out["status"] = f.Status
		out["retry_after_ms"] = f.RetryAfterMs
	}
	return out
}

// eventJSON is an event as the Rust machine writes it.
func eventJSON(e Event) map[string]interface{} {
	out := map[string]interface{}{"type": e.Type}
	switch e.Type {
	case EventJoined:
		out["member_id"] = e.MemberID
	case EventRevoked:
		out["ack"] = e.Ack
		out["tasks"] = e.Tasks
	case EventFenced:
		out["rejoining"] = e.Rejoining
	case EventReplaced:
		out["member_name"] = e.MemberName
	case EventError:
		out["failure"] = failureJSON(e.Failure)
	case EventDraining, EventDrained:
	default:
		out["tasks"] = e.Tasks
	}
	return out
}

func optional(v int64, ok bool) interface{} {
	if !ok {
		return nil
	}
	return v
}

func nonEmpty(s string) interface{} {
	if s == "" {
		return nil
	}
	return s
}

func mustJSON(t *testing.T, v interface{}) []byte {
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// sameJSON compares want with got's JSON, with null object members
// dropped on both sides.
func sameJSON(t *testing.T, want json.RawMessage, got interface{}) bool {
	return reflect.DeepEqual(normalized(t, want), normalized(t, mustJSON(t, got)))
}

func normalized(t *testing.T, data []byte) interface{} {
	decoder := json.NewDecoder(bytes.NewReader(data))
	decoder.UseNumber()
	var v interface{}
	if err := decoder.Decode(&v); err != nil {
		t.Fatalf("JSON %s: %v", data, err)
	}
	return dropNulls(v)
}

func dropNulls(v interface{}) interface{} {
	switch v := v.(type) {
	case map[string]interface{}:
		for k, x := range v {
			if x == nil {
				delete(v, k)
			} else {
				v[k] = dropNulls(x)
			}
		}
	case []interface{}:
		for i, x := range v {
			v[i] = dropNulls(x)
		}
	case json.Number:
		return sameNumber(v)
	}
	return v
}

// sameNumber reads a number so that 100 and 100.0 compare equal (a load
// the Rust machine writes as 100.0, Go as 100); integers stay exact.
func sameNumber(n json.Number) interface{} {
	if i, err := n.Int64(); err == nil {
		return i
	}
	f, err := n.Float64()
	if err == nil && f == math.Trunc(f) && math.Abs(f) < 1<<53 {
		return int64(f)
	}
	if err != nil {
		return n.String()
	}
	return f
}
