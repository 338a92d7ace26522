package assignd

// Listener is told what to process. The member calls it from one
// goroutine, one event at a time, in the machine's order; the heartbeats
// go on meanwhile.
type Listener interface {
	// Assigned: start processing tasks. promoted says they were learners
	// or standbys here, their state warm.
	Assigned(tasks []Task, promoted bool)
	// Revoked: stop processing tasks, then return. The member acknowledges
	// the revocation once Revoked returns; until then it reports the tasks
	// owned and the host gives them to nobody else (a member that takes
	// longer than the group's expansion timeout is fenced).
	Revoked(tasks []Task)
	// Lost: these tasks may be active elsewhere already; stop at once.
	Lost(tasks []Task)
}

// EventListener may also be implemented by a Listener: it then sees every
// event first (joined, learners, standbys, drains, fencing, errors…),
// before the Assigned, Revoked or Lost call the event makes.
type EventListener interface {
	Event(e Event)
}

// ListenerFuncs is a Listener made of functions; nil ones are skipped.
type ListenerFuncs struct {
	OnAssigned func(tasks []Task, promoted bool)
	OnRevoked  func(tasks []Task)
	OnLost     func(tasks []Task)
	// OnEvent sees every event, as EventListener.Event.
	OnEvent func(e Event)
}

func (l ListenerFuncs) Assigned(tasks []Task, promoted bool) {
	if l.OnAssigned != nil {
		l.OnAssigned(tasks, promoted)
	}
}

func (l ListenerFuncs) Revoked(tasks []Task) {
	if l.OnRevoked != nil {
		l.OnRevoked(tasks)
	}
}

func (l ListenerFuncs) Lost(tasks []Task) {
	if l.OnLost != nil {
		l.OnLost(tasks)
	}
}

func (l ListenerFuncs) Event(e Event) {
	if l.OnEvent != nil {
		l.OnEvent(e)
	}
}

// deliver hands one event to l and reports the ack to send, if the event
// was a revocation.
func deliver(l Listener, e Event) (ack uint64, acked bool) {
	if observer, ok := l.(EventListener); ok {
		observer.Event(e)
	}
	switch e.Type {
	case EventAssigned:
		l.Assigned(e.Tasks, false)
	case EventPromoted:
		l.Assigned(e.Tasks, true)
	case EventRevoked:
		l.Revoked(e.Tasks)
		return e.Ack, true
	case EventLost:
		l.Lost(e.Tasks)
	}
	return 0, false
}
