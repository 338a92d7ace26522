package main

import (
	"encoding/json"
	"io"
	"sync"
	"time"

	assignd "github.com/assignd/assignd/clients/go"
)

// line is one JSON object of the worker's output.
type line struct {
	TsMs       int64          `json:"ts_ms"`
	Event      string         `json:"event"`
	MemberID   string         `json:"member_id,omitempty"`
	Tasks      []assignd.Task `json:"tasks,omitempty"`
	Rejoining  *bool          `json:"rejoining,omitempty"`
	MemberName *string        `json:"member_name,omitempty"`
	Message    string         `json:"message,omitempty"`
	Reason     string         `json:"reason,omitempty"`
}

// output writes one line per event, at once (stdout is read by the
// end-to-end suite as the worker runs).
type output struct {
	mu sync.Mutex
	w  io.Writer
}

func (o *output) write(l line) {
	l.TsMs = time.Now().UnixMilli()
	data, err := json.Marshal(l)
	if err != nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	_, _ = o.w.Write(append(data, '\n'))
}

// event writes the machine's event e.
func (o *output) event(e assignd.Event) {
	l := line{Event: string(e.Type), Tasks: e.Tasks}
	switch e.Type {
	case assignd.EventJoined:
		l.MemberID = e.MemberID
	case assignd.EventFenced:
		rejoining := e.Rejoining
		l.Rejoining = &rejoining
	case assignd.EventReplaced:
		name := e.MemberName
		l.MemberName = &name
	case assignd.EventError:
		l.Message = e.Failure.Error()
	}
	o.write(l)
}

func (o *output) stopped(reason string) { o.write(line{Event: "stopped", Reason: reason}) }
