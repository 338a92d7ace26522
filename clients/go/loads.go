package assignd

import (
	"encoding/json"
	"math"
	"sort"
)

// A member's load reports, without I/O: the load the application set for
// each of its active tasks, its utilisation and load capacity, what the
// host has acknowledged of them, and so which of them the next heartbeat
// carries. A port of the Rust client's client/src/loads.rs.
//
// Nothing is sent until an answer's load_report says "changes" or "full"
// (an older host refuses unknown fields). After "full" the next heartbeat
// carries every known load of an active task (an unknown one is left out:
// unknown is not zero), and the utilisation and load capacity when set;
// after "changes", the loads that moved by more than the threshold
// (relative to the acknowledged value) or were never acknowledged, the
// utilisation when it moved by more than UtilisationStep, and the load
// capacity when it changed. A value counts as acknowledged once the
// heartbeat that carried it got an answer.

const (
	// LoadThresholdDefault is how far a task's load may move, relative to
	// the value the host acknowledged, before it is sent again (10 %).
	LoadThresholdDefault = 0.1
	// UtilisationStep is how far the utilisation may move (absolute)
	// before it is sent again.
	UtilisationStep = 0.05
	// LoadMax is the largest load (and load capacity) the host accepts.
	LoadMax = 1e15
	// UtilisationMax is the largest utilisation the host accepts (1.0 is
	// fully used).
	UtilisationMax = 10.0
)

// LoadReport is what an answer asks of the next heartbeat's loads.
type LoadReport string

const (
	// LoadReportNone: send no load fields (also an absent or unknown value).
	LoadReportNone LoadReport = "none"
	// LoadReportChanges: send what moved past the threshold, and what was
	// never sent.
	LoadReportChanges LoadReport = "changes"
	// LoadReportFull: the host has none of this member's loads: send all.
	LoadReportFull LoadReport = "full"
)

func readLoadReport(value *string) LoadReport {
	if value != nil && (*value == string(LoadReportChanges) || *value == string(LoadReportFull)) {
		return LoadReport(*value)
	}
	return LoadReportNone
}

// ValidLoad tells whether load is one the host accepts.
func ValidLoad(load float64) bool {
	return !math.IsNaN(load) && load >= 0 && load <= LoadMax
}

// ValidUtilisation tells whether utilisation is one the host accepts.
func ValidUtilisation(utilisation float64) bool {
	return !math.IsNaN(utilisation) && utilisation >= 0 && utilisation <= UtilisationMax
}

// ValidLoadCapacity tells whether capacity is one the host accepts.
func ValidLoadCapacity(capacity float64) bool {
	return !math.IsNaN(capacity) && capacity > 0 && capacity <= LoadMax
}

// LoadItem is one item of a heartbeat's loads: every partition First to
// Last of Topic has Load. In JSON [topic, partition, load], or [topic,
// first, last, load] for a range.
type LoadItem struct {
	Topic       string
	First, Last uint32
	Load        float64
}

// MarshalJSON writes [topic, partition, load] or [topic, first, last, load].
func (i LoadItem) MarshalJSON() ([]byte, error) {
	if i.First == i.Last {
		return json.Marshal([]interface{}{i.Topic, i.First, i.Load})
	}
	return json.Marshal([]interface{}{i.Topic, i.First, i.Last, i.Load})
}

type taskLoad struct {
	task Task
	load float64
}

type loadsSent struct {
	full        bool
	loads       []taskLoad
	utilisation *float64
	capacity    *float64
}

// loadBook holds the known and the acknowledged values (see above).
type loadBook struct {
	threshold        float64
	report           LoadReport
	loads, acked     map[Task]float64
	utilisation      *float64
	ackedUtilisation *float64
	capacity         *float64
	ackedCapacity    *float64
	inFlight         *loadsSent
}

func newLoadBook(threshold float64) *loadBook {
	return &loadBook{threshold: threshold, report: LoadReportNone,
		loads: map[Task]float64{}, acked: map[Task]float64{}}
}

func optionalFloat(v *float64) *float64 {
	if v == nil {
		return nil
	}
	c := *v
	return &c
}

func (b *loadBook) retainActive(active func(Task) bool) {
	for t := range b.loads {
		if !active(t) {
			delete(b.loads, t)
		}
	}
	for t := range b.acked {
		if !active(t) {
			delete(b.acked, t)
		}
	}
}

func sortedLoads(loads map[Task]float64, keep func(Task, float64) bool) []taskLoad {
	out := make([]taskLoad, 0, len(loads))
	for t, l := range loads {
		if keep(t, l) {
			out = append(out, taskLoad{t, l})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].task.Less(out[j].task) })
	return out
}

// build sets the load fields of the heartbeat built now, in flight until
// answered or failed.
func (b *loadBook) build(r *HeartbeatRequest) {
	var sent *loadsSent
	switch b.report {
	case LoadReportFull:
		all := func(Task, float64) bool { return true }
		sent = &loadsSent{full: true, loads: sortedLoads(b.loads, all),
			utilisation: optionalFloat(b.utilisation), capacity: optionalFloat(b.capacity)}
	case LoadReportChanges:
		sent = b.changes()
	}
	b.inFlight = sent
	if sent == nil {
		return
	}
	if sent.full || len(sent.loads) > 0 {
		items := loadItems(sent.loads)
		r.Loads = &items
	}
	r.Utilisation, r.LoadCapacity = sent.utilisation, sent.capacity
}

func (b *loadBook) changes() *loadsSent {
	moved := func(t Task, load float64) bool {
		acked, ok := b.acked[t]
		return !ok || math.Abs(load-acked) > b.threshold*acked
	}
	sent := &loadsSent{loads: sortedLoads(b.loads, moved)}
	if b.utilisation != nil &&
		(b.ackedUtilisation == nil || math.Abs(*b.utilisation-*b.ackedUtilisation) > UtilisationStep) {
		sent.utilisation = optionalFloat(b.utilisation)
	}
	if b.capacity != nil && (b.ackedCapacity == nil || *b.ackedCapacity != *b.capacity) {
		sent.capacity = optionalFloat(b.capacity)
	}
	return sent
}

// answered: the heartbeat in flight got an answer asking report next.
func (b *loadBook) answered(report LoadReport) {
	sent := b.inFlight
	b.inFlight = nil
	if sent != nil {
		if sent.full {
			b.acked = map[Task]float64{}
			b.ackedUtilisation, b.ackedCapacity = sent.utilisation, sent.capacity
		}
		for _, tl := range sent.loads {
			b.acked[tl.task] = tl.load
		}
		if sent.utilisation != nil {
			b.ackedUtilisation = sent.utilisation
		}
		if sent.capacity != nil {
			b.ackedCapacity = sent.capacity
		}
	}
	b.report = report
	if report != LoadReportChanges {
		b.forgetAcked()
	}
}

// failed: the heartbeat in flight failed; the next carries its values again.
func (b *loadBook) failed() { b.inFlight = nil }

// reset: a new member (or a leave); nothing is sent until an answer asks.
func (b *loadBook) reset() {
	b.inFlight = nil
	b.report = LoadReportNone
	b.forgetAcked()
}

func (b *loadBook) forgetAcked() {
	b.acked = map[Task]float64{}
	b.ackedUtilisation, b.ackedCapacity = nil, nil
}

// loadItems writes loads (sorted by task) as items: each run of
// consecutive partitions of a topic with the same load as one range.
func loadItems(loads []taskLoad) []LoadItem {
	items := []LoadItem{}
	for _, tl := range loads {
		if n := len(items); n > 0 {
			last := &items[n-1]
			if last.Topic == tl.task.Topic && last.Load == tl.load && uint64(last.Last)+1 == uint64(tl.task.Partition) {
				last.Last = tl.task.Partition
				continue
			}
		}
		items = append(items, LoadItem{Topic: tl.task.Topic, First: tl.task.Partition, Last: tl.task.Partition, Load: tl.load})
	}
	return items
}
