package assignd

import "fmt"

// The machine's timing rules, in milliseconds.
const (
	// IntervalBeforeJoinMs is the heartbeat interval until the host names one.
	IntervalBeforeJoinMs int64 = 1_000
	// IntervalMinMs is the shortest interval followed, whatever the host says.
	IntervalMinMs int64 = 10
	// RetryBackoffMinMs is the first retry delay after a failure; it
	// doubles up to RetryBackoffMaxMs, and never past the interval.
	RetryBackoffMinMs int64 = 50
	// RetryBackoffMaxMs (Kafka's retry.backoff.max.ms default): after a
	// coordinator died, the member reaches the node that takes its shard
	// over within a second of it serving.
	RetryBackoffMaxMs int64 = 1_000
	// LeaveAttemptsMax is how many times a leave is sent when the host
	// does not answer.
	LeaveAttemptsMax = 3
)

// MachineConfig is who the member is and what it subscribes to.
type MachineConfig struct {
	// MemberName is a static member's name; "" joins as a dynamic member.
	MemberName string
	Topics     []string
	// Rack is "" for none.
	Rack     string
	Capacity uint32
	// Endpoint is where the member serves, for the group's routing table
	// ("" publishes none); sent on every join.
	Endpoint string
	// Metadata is published with the endpoint; sent on every join unless
	// empty.
	Metadata map[string]string
	// IDPrefix: the member ids the machine chooses are IDPrefix-n for n =
	// 1, 2, …, a fresh one for each new join and the same for every retry
	// of a join (so a retried join the host did handle is the same member).
	IDPrefix string
	// LoadThreshold is how far (relative) a task's load moves from the
	// value the host acknowledged before it is sent again; 0 means
	// LoadThresholdDefault (10 %).
	LoadThreshold float64
}

// StopReason tells why a machine stopped.
type StopReason string

const (
	// StopLeft: the application asked it to leave.
	StopLeft StopReason = "left"
	// StopDrained: a drain finished; the member held nothing and left.
	StopDrained StopReason = "drained"
	// StopReplaced: another process joined with its member name.
	StopReplaced StopReason = "replaced"
	// StopFenced: fenced while leaving or draining.
	StopFenced StopReason = "fenced"
	// StopRemoved: the host no longer knew it (unknown_member,
	// unknown_group) while it was leaving or draining.
	StopRemoved StopReason = "removed"
)

type inFlight struct {
	sent  int64
	leave bool
	// carriesEndpointChange: it carries an endpoint SetEndpoint changed;
	// should it fail, the next request carries it again.
	carriesEndpointChange bool
}

// leaving is a leave under way; then is the reason to stop after it, or
// "" to rejoin as a new member (a dynamic member whose epoch went stale
// frees its old slot first).
type leaving struct {
	then     StopReason
	attempts int
}

// Machine is one member's decisions without I/O: the member id and epoch,
// when the next request is due and what it carries, the lease, the policy
// for every failure, drains and leaves, and the order of the events. It
// never reads a clock: every input carries now, in milliseconds from an
// origin the caller picks. It is not safe for concurrent use.
type Machine struct {
	config  MachineConfig
	log     Logger
	tracker *tracker
	// memberID is empty until joined (and again before a rejoin).
	memberID   string
	joinID     string
	idsChosen  uint64
	epoch      int64
	intervalMs int64
	// failures counts failed requests in a row.
	failures   int
	drain      bool
	leaveAsked bool
	// sendNow: something the host must hear of at once (an ack, a drain
	// asked, tasks lost to the lease) happened after the request in
	// flight, if any, was built; the next request goes as soon as nothing
	// is in flight.
	sendNow bool
	lags    []LagRow
	// loads: what the application set, and what the host has of it.
	loads *loadBook
	// endpointChanged: the endpoint and metadata changed since the last
	// request that carried them was sent; the next one carries them.
	endpointChanged bool
	due             int64
	inFlight        *inFlight
	lease           lease
	leaving         *leaving
	// leaveFailure ended the last leave, if one did.
	leaveFailure *Failure
	stopped      StopReason
	events       []Event
}

// NewMachine makes a member that wants to join at now. A nil logger logs
// nothing.
func NewMachine(config MachineConfig, now int64, logger Logger) *Machine {
	if logger == nil {
		logger = nopLogger{}
	}
	threshold := config.LoadThreshold
	if threshold == 0 {
		threshold = LoadThresholdDefault
	}
	m := &Machine{
		config: config, log: logger, tracker: newTracker(), loads: newLoadBook(threshold),
		epoch: JoinEpoch, intervalMs: IntervalBeforeJoinMs, due: now, lags: []LagRow{},
	}
	m.chooseJoinID()
	return m
}

// MemberID is the member id once joined, else "".
func (m *Machine) MemberID() string { return m.memberID }

// MemberEpoch is a fencing token for writes the application makes on the
// tasks it holds (0 until joined).
func (m *Machine) MemberEpoch() int64 { return m.epoch }

// Assignment is what the application was told.
func (m *Machine) Assignment() Assignment { return m.tracker.assignment() }

// Stopped is why the machine stopped, or "" while it runs.
func (m *Machine) Stopped() StopReason { return m.stopped }

// LeaveFailure is the failure that ended the last leave (nil if it was
// answered, or the member was out of the group already).
func (m *Machine) LeaveFailure() *Failure { return m.leaveFailure }

// InFlight tells whether a request is in flight.
func (m *Machine) InFlight() bool { return m.inFlight != nil }

// RequestDue tells whether PollRequest would build a request at now (the
// shell asks its lag source first).
func (m *Machine) RequestDue(now int64) bool {
	return m.stopped == "" && m.inFlight == nil && now >= m.due
}

// ReportLags replaces the lag figures every later heartbeat carries.
func (m *Machine) ReportLags(lags []LagRow) {
	m.lags = append([]LagRow{}, lags...)
}

// SetLoad sets the application's current load of task, in the group's
// load unit; a task not active here is ignored (a task's load is forgotten
// once it stops being active). It returns whether the load is one the host
// accepts (0 to LoadMax); an invalid one changes nothing.
func (m *Machine) SetLoad(task Task, load float64) bool {
	if !ValidLoad(load) {
		return false
	}
	if m.tracker.active.has(task) {
		m.loads.loads[task] = load
	}
	return true
}

// SetUtilisation sets the member's measured utilisation (1.0: fully used;
// nil: unknown); it returns whether the host accepts it.
func (m *Machine) SetUtilisation(utilisation *float64) bool {
	if utilisation != nil && !ValidUtilisation(*utilisation) {
		return false
	}
	m.loads.utilisation = optionalFloat(utilisation)
	return true
}

// SetLoadCapacity sets the load the member can carry (nil: unknown); it
// returns whether the host accepts it.
func (m *Machine) SetLoadCapacity(capacity *float64) bool {
	if capacity != nil && !ValidLoadCapacity(*capacity) {
		return false
	}
	m.loads.capacity = optionalFloat(capacity)
	return true
}

// PollRequest returns the request to send now, if one is due; it is in
// flight from now until OnAnswer or OnFailure.
func (m *Machine) PollRequest(now int64) *HeartbeatRequest {
	if !m.RequestDue(now) {
		return nil
	}
	leave := m.leaving != nil
	m.inFlight = &inFlight{sent: now, leave: leave, carriesEndpointChange: !leave && m.endpointChanged}
	m.sendNow = false
	if leave {
		m.leaving.attempts++
		// Once the host has the leave, a dynamic member's tasks go to
		// others at once: nothing is processed from its sending on.
		m.loseEverythingButID()
		return m.leaveRequest()
	}
	r := m.heartbeatRequest()
	m.endpointChanged = false
	return r
}

// SetEndpoint: the member serves at endpoint now ("" for nowhere), with
// metadata; both replace the config's, and the next request (join or
// heartbeat) carries them, as does every later one until an answer to one
// that did. It makes no request due: the change goes with the next one.
func (m *Machine) SetEndpoint(endpoint string, metadata map[string]string) {
	m.config.Endpoint = endpoint
	m.config.Metadata = copyMetadata(metadata)
	m.endpointChanged = true
}

// endpointFields sets the endpoint and metadata a heartbeat carries: both,
// explicit ("" for none, {} for empty), after a change until an answer to
// a request that carried them; else on a join, those set; else neither
// (the host keeps what it has).
func (m *Machine) endpointFields(r *HeartbeatRequest, joining bool) {
	switch {
	case m.endpointChanged:
		endpoint, metadata := m.config.Endpoint, copyMetadata(m.config.Metadata)
		r.Endpoint, r.Metadata = &endpoint, &metadata
	case joining:
		if m.config.Endpoint != "" {
			endpoint := m.config.Endpoint
			r.Endpoint = &endpoint
		}
		if len(m.config.Metadata) > 0 {
			metadata := copyMetadata(m.config.Metadata)
			r.Metadata = &metadata
		}
	}
}

// copyMetadata copies pairs, never nil.
func copyMetadata(pairs map[string]string) map[string]string {
	out := make(map[string]string, len(pairs))
	for k, v := range pairs {
		out[k] = v
	}
	return out
}

func (m *Machine) heartbeatRequest() *HeartbeatRequest {
	r := m.baseRequest()
	if m.memberID == "" {
		r.MemberID = m.joinID
		r.Topics = append([]string{}, m.config.Topics...)
	}
	r.MemberEpoch = m.epoch
	r.Owned = m.tracker.owned()
	r.Lags = append([]LagRow{}, m.lags...)
	m.endpointFields(r, m.memberID == "")
	m.loads.build(r)
	return r
}

func (m *Machine) leaveRequest() *HeartbeatRequest {
	r := m.baseRequest()
	r.MemberEpoch = LeaveEpoch
	return r
}

func (m *Machine) baseRequest() *HeartbeatRequest {
	r := &HeartbeatRequest{
		MemberID: m.memberID, Capacity: m.config.Capacity,
		Owned: TaskRanges{}, Lags: []LagRow{}, Drain: m.drain, TaskRanges: true,
	}
	if m.config.MemberName != "" {
		name := m.config.MemberName
		r.MemberName = &name
	}
	if m.config.Rack != "" {
		rack := m.config.Rack
		r.Rack = &rack
	}
	return r
}

// OnAnswer applies the 200 answer to the request in flight, at now.
func (m *Machine) OnAnswer(r *HeartbeatResponse, now int64) {
	flight := m.inFlight
	if flight == nil {
		m.log.Log(LevelError, "an answer with no request in flight")
		return
	}
	m.inFlight = nil
	if flight.leave {
		m.finishLeave(nil, now)
		return
	}
	m.failures = 0
	m.takeLease(r, flight.sent)
	joined := m.memberID == ""
	m.memberID = r.MemberID
	m.epoch = r.MemberEpoch
	m.intervalMs = r.HeartbeatIntervalMs
	if m.intervalMs < IntervalMinMs {
		m.intervalMs = IntervalMinMs
	}
	changes := m.tracker.onResponse(r)
	m.loads.answered(r.LoadReport)
	m.forgetInactiveLoads()
	if joined {
		m.events = append(m.events, Event{Type: EventJoined, MemberID: r.MemberID})
	}
	drained := false
	for _, e := range changes {
		drained = drained || e.Type == EventDrained
	}
	m.events = append(m.events, changes...)
	m.due = flight.sent + m.intervalMs
	if drained && m.leaving == nil {
		m.beginLeave(StopDrained, now)
	}
	m.afterHeartbeat(now)
}

// OnFailure applies the failure of the request in flight, at now.
func (m *Machine) OnFailure(f *Failure, now int64) {
	flight := m.inFlight
	if flight == nil {
		m.log.Log(LevelError, "a failure with no request in flight")
		return
	}
	m.inFlight = nil
	// The host may not have it: the next request carries it again.
	m.endpointChanged = m.endpointChanged || flight.carriesEndpointChange
	if flight.leave {
		m.leaveFailed(f, now)
	} else {
		m.loads.failed()
		m.judgeLease(f)
		m.heartbeatFailed(f, flight.sent, now)
		m.afterHeartbeat(now)
	}
	m.settleLeave(now)
}

// Ack: the application stopped the tasks of the revoked event ack, at now;
// a heartbeat sent at once releases them. An unknown ack (from before a
// reset, or acknowledged twice) changes nothing.
func (m *Machine) Ack(ack uint64, now int64) {
	if known, changes := m.tracker.onAck(ack); known {
		m.events = append(m.events, changes...)
		m.hurry(now)
	}
}

// Drain asks the host to drain this member.
func (m *Machine) Drain(now int64) {
	if !m.drain && m.stopped == "" {
		m.drain = true
		m.hurry(now)
	}
}

// Leave leaves the group: a leave is sent next (once the request in
// flight, if any, is done), then the machine stops.
func (m *Machine) Leave(now int64) {
	if m.stopped != "" {
		return
	}
	m.leaveAsked = true
	if m.leaving != nil {
		m.leaving.then = StopLeft
	} else {
		m.beginLeave(StopLeft, now)
	}
	m.settleLeave(now)
}

// Tick: time passed. When the lease in force ran out with no newer answer
// the host may have given every task away (fenced or expired this member
// while it was stalled): every held task is lost. The id is kept, since
// the host may still count the member; then the next answer (the request
// is due at once) assigns them again.
func (m *Machine) Tick(now int64) {
	if m.stopped != "" || !m.tracker.holdsAny() {
		return
	}
	end, ok := m.LeaseUntil()
	if !ok || now < end {
		return
	}
	held := m.tracker.assignment()
	why := "the lease of the last answer ran out without a newer answer from the host: stopping every task"
	if m.lease.onUnreached {
		why = "the unreached lease ran out with no heartbeat reaching a coordinator of the group: stopping every task"
	}
	m.log.Log(LevelWarn, why, "member_id", m.memberID, "active", len(held.Active),
		"revoking", len(held.Revoking), "late_ms", now-end)
	m.loseEverythingButID()
	m.hurry(now)
}

// PollEvent returns the next event for the application, if any.
func (m *Machine) PollEvent() (Event, bool) {
	if len(m.events) == 0 {
		return Event{}, false
	}
	e := m.events[0]
	m.events = m.events[1:]
	return e, true
}

// PollTimeout is when the machine next wants an input if nothing else
// happens: the next request (unless one is in flight), or the end of the
// lease in force while it holds tasks; false once stopped.
func (m *Machine) PollTimeout() (int64, bool) {
	if m.stopped != "" {
		return 0, false
	}
	lease, leased := m.LeaseUntil()
	leased = leased && m.tracker.holdsAny()
	switch {
	case m.inFlight == nil && leased:
		return minInt64(m.due, lease), true
	case m.inFlight == nil:
		return m.due, true
	default:
		return lease, leased
	}
}

func (m *Machine) chooseJoinID() {
	m.idsChosen++
	m.joinID = fmt.Sprintf("%s-%d", m.config.IDPrefix, m.idsChosen)
}

// forgetMemberID: out of the group, the next join is a new member with a
// new id.
func (m *Machine) forgetMemberID() {
	m.memberID = ""
	m.chooseJoinID()
	m.epoch = JoinEpoch
	// A new member's host has none of its loads, and asks for them.
	m.loads.reset()
}

func (m *Machine) forgetInactiveLoads() {
	m.loads.retainActive(func(t Task) bool { return m.tracker.active.has(t) })
}

// loseEverything tells the application every held task is lost and
// forgets the member id.
func (m *Machine) loseEverything() {
	m.loseEverythingButID()
	m.forgetMemberID()
}

func (m *Machine) loseEverythingButID() {
	lost := m.tracker.reset()
	m.forgetInactiveLoads()
	if len(lost) > 0 {
		m.events = append(m.events, Event{Type: EventLost, Tasks: lost})
	}
}

func minInt64(a, b int64) int64 {
	if a < b {
		return a
	}
	return b
}

func maxInt64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}
