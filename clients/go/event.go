package assignd

// EventType names what an Event tells the application.
type EventType string

// The events, in the machine's words (their JSON names in the vectors).
const (
	// EventJoined: the member joined (or rejoined) with MemberID.
	EventJoined EventType = "joined"
	// EventAssigned: newly active Tasks, without warm state here.
	EventAssigned EventType = "assigned"
	// EventRevoked: stop processing Tasks, then acknowledge Ack. Until
	// then the member reports them owned and nobody else gets them.
	EventRevoked EventType = "revoked"
	// EventLearnerStarted: warm these Tasks up and report their lag.
	EventLearnerStarted EventType = "learner_started"
	// EventLearnerStopped: stop warming these Tasks; they went elsewhere.
	EventLearnerStopped EventType = "learner_stopped"
	// EventPromoted: learner or standby Tasks that became active here,
	// their state warm. No learner_stopped comes for them.
	EventPromoted       EventType = "promoted"
	EventStandbyStarted EventType = "standby_started"
	EventStandbyStopped EventType = "standby_stopped"
	// EventDraining: the member is draining; its tasks are revoked as
	// their new owners warm up.
	EventDraining EventType = "draining"
	// EventDrained: the drain finished; the member leaves and stops.
	EventDrained EventType = "drained"
	// EventLost: Tasks no longer this member's, perhaps active elsewhere
	// already: stop at once, no acknowledgement.
	EventLost EventType = "lost"
	// EventFenced: the host removed this member; it rejoins if Rejoining.
	EventFenced EventType = "fenced"
	// EventReplaced: another process joined with MemberName; this member
	// stops.
	EventReplaced EventType = "replaced"
	// EventError: a failed heartbeat (Failure); the machine retries as
	// its rules say.
	EventError EventType = "error"
)

// Event is one thing the application must learn, in order. Which fields
// are set depends on Type.
type Event struct {
	Type EventType
	// Tasks, sorted, for the task events.
	Tasks []Task
	// Ack is the acknowledgement id of a revoked event.
	Ack        uint64
	MemberID   string
	Rejoining  bool
	MemberName string
	Failure    *Failure
}

func tasksEvent(t EventType, tasks taskSet) Event {
	return Event{Type: t, Tasks: tasks.list()}
}
