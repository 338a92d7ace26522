package assignd

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Why a member stopped, as Err reports it.
var (
	ErrReplaced = errors.New("assignd: another process joined with this member's name")
	ErrFenced   = errors.New("assignd: the member was fenced while leaving or draining")
	ErrRemoved  = errors.New("assignd: the host no longer knows the member")
)

// Member is a running member of a group: one goroutine drives its
// machine, sends its heartbeats in the background (so the lease is acted
// on while a request is in flight) and queues its events; another hands
// them to the Listener. Its methods are safe for concurrent use.
//
// It stops when it leaves (Leave), its drain finishes, it is replaced or
// fenced for good, or the context given to Start is done (then without
// leaving, as a crash would: a static member's slot waits for its
// registration timeout, a dynamic member's for its session timeout).
type Member struct {
	config    Config
	log       Logger
	listener  Listener
	transport *transport
	ctx       context.Context
	// origin is the machine's time 0; the monotonic clock counts from it.
	origin time.Time

	mu      sync.Mutex
	machine *Machine
	// queue holds events the listener has not been handed yet.
	queue []Event
	// ended: the loop stopped; reason and err say why.
	ended  bool
	reason StopReason
	err    error

	wake    chan struct{} // the machine got an input
	queued  chan struct{} // events wait in queue
	stopped chan struct{} // the loop ended: no more events are queued
	done    chan struct{} // every event was delivered too
}

// Start joins the group as config says and returns at once; listener is
// told what to process. The member runs until it stops (see Member) or
// ctx is done.
func Start(ctx context.Context, config Config, listener Listener) (*Member, error) {
	if listener == nil {
		return nil, errors.New("assignd: no listener")
	}
	if ctx == nil {
		ctx = context.Background()
	}
	config, err := config.withDefaults()
	if err != nil {
		return nil, err
	}
	t, err := newTransport(config.URLs, config.Group, config.MemberToken, config.RequestTimeout)
	if err != nil {
		return nil, fmt.Errorf("assignd: %w", err)
	}
	prefix, err := randomIDPrefix()
	if err != nil {
		return nil, err
	}
	m := &Member{
		config: config, log: config.Logger, listener: listener, transport: t, ctx: ctx,
		origin:  time.Now(),
		wake:    make(chan struct{}, 1),
		queued:  make(chan struct{}, 1),
		stopped: make(chan struct{}),
		done:    make(chan struct{}),
	}
	m.machine = NewMachine(MachineConfig{
		MemberName: config.MemberName, Topics: append([]string{}, config.Topics...),
		Rack: config.Rack, Capacity: config.Capacity, IDPrefix: prefix,
		Endpoint: config.Endpoint, Metadata: copyMetadata(config.Metadata),
		LoadThreshold: config.LoadThreshold,
	}, 0, config.Logger)
	if config.LoadCapacity != 0 {
		m.machine.SetLoadCapacity(&config.LoadCapacity)
	}
	go m.run()
	go m.dispatch()
	return m, nil
}

// randomIDPrefix is c- and 32 random hex digits (as many bits as a UUID):
// the member ids the machine chooses start with it.
func randomIDPrefix() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("assignd: no random bytes for a member id: %w", err)
	}
	return "c-" + hex.EncodeToString(b[:]), nil
}

// now is the machine's time: milliseconds on the monotonic clock.
func (m *Member) now() int64 { return time.Since(m.origin).Milliseconds() }

func (m *Member) at(ms int64) time.Time { return m.origin.Add(time.Duration(ms) * time.Millisecond) }

func poke(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// MayProcess tells whether the application may process (and commit the
// output of) task now: it is active here, or revoked and not yet
// acknowledged, and the lease has not run out. Checked before each
// commit, it keeps a stalled process (a long pause, a starved CPU, a
// suspended VM) from writing after the task went elsewhere, even before
// the member can tell it Lost. It is false from the sending of a leave
// on (a dynamic member's tasks go to others as soon as the host has it):
// the machine gives up every task as it builds the leave, under the same
// lock this reads with.
func (m *Member) MayProcess(task Task) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return !m.ended && m.machine.MayProcess(task, m.now())
}

// MemberID is the member id once joined, else "".
func (m *Member) MemberID() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.machine.MemberID()
}

// Epoch is the member epoch: a fencing token for what the application
// writes for its tasks (0 until joined). The host raises it whenever this
// member's assignment changes.
func (m *Member) Epoch() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.machine.MemberEpoch()
}

// Assignment is the assignment as the application has been told it, or is
// about to be (events may wait for the listener).
func (m *Member) Assignment() Assignment {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.machine.Assignment()
}

// LeaseUntil is when the lease in force ends: after it the member's tasks
// may be active elsewhere. False before any answer with a lease.
func (m *Member) LeaseUntil() (time.Time, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ms, ok := m.machine.LeaseUntil()
	return m.at(ms), ok
}

// SetEndpoint publishes where this member serves now ("" for nowhere) and
// its metadata, replacing both; the next heartbeat carries them, and every
// later one until the host has them. It fails, changing nothing, when they
// are past the host's limits.
func (m *Member) SetEndpoint(endpoint string, metadata map[string]string) error {
	if err := checkEndpoint(endpoint, metadata); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.machine.SetEndpoint(endpoint, metadata)
	return nil
}

// SetLoad sets the current load of an active task, in the group's load
// unit (records/s, bytes/s, …: whatever the group's load_unit names). It
// goes with a later heartbeat once the host asks for loads: all of them
// after a join or a coordinator change, else those that moved by more
// than the config's LoadThreshold. A task not active here is ignored, and
// a task's load is forgotten once it stops being active. It fails,
// changing nothing, for a load that is not a number from 0 to LoadMax.
func (m *Member) SetLoad(task Task, load float64) error {
	return m.SetLoads(map[Task]float64{task: load})
}

// SetLoads is SetLoad for many tasks at once (all or none).
func (m *Member) SetLoads(loads map[Task]float64) error {
	for task, load := range loads {
		if !ValidLoad(load) {
			return fmt.Errorf("assignd: the load %v of %s is not a number from 0 to 1e15", load, task)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for task, load := range loads {
		m.machine.SetLoad(task, load)
	}
	return nil
}

// SetUtilisation sets the member's measured use of its capacity (1.0:
// fully used, at most UtilisationMax); nil: unknown. Reported like loads.
func (m *Member) SetUtilisation(utilisation *float64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.machine.SetUtilisation(utilisation) {
		return fmt.Errorf("assignd: a utilisation must be a number from 0 to 10, not %v", *utilisation)
	}
	return nil
}

// SetLoadCapacity sets the load this member can carry, in the group's
// load unit (above 0, at most LoadMax); nil: unknown. Reported like loads.
func (m *Member) SetLoadCapacity(capacity *float64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.machine.SetLoadCapacity(capacity) {
		return fmt.Errorf("assignd: a load capacity must be above 0 and at most 1e15, not %v", *capacity)
	}
	return nil
}

// Drain asks the host to drain this member: its tasks move to other
// members as they warm up; then it is told drained, leaves and stops with
// StopDrained.
func (m *Member) Drain() {
	m.mu.Lock()
	m.machine.Drain(m.now())
	m.mu.Unlock()
	poke(m.wake)
}

// Leave leaves the group (once the request in flight, if any, is done)
// and waits until the member stopped or ctx is done. Stop processing
// first: a dynamic member's tasks go to others at once. It returns the
// failure that ended the leave, if the host never answered it, or why the
// member had stopped before.
func (m *Member) Leave(ctx context.Context) error {
	m.mu.Lock()
	m.machine.Leave(m.now())
	m.mu.Unlock()
	poke(m.wake)
	select {
	case <-m.stopped:
	case <-ctx.Done():
		return ctx.Err()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if f := m.machine.LeaveFailure(); f != nil {
		return f
	}
	return m.err
}

// Done is closed once the member stopped and the listener was handed its
// last event. Do not wait for it inside the listener.
func (m *Member) Done() <-chan struct{} { return m.done }

// Reason is why the member stopped: "" while it runs or if its context
// ended it.
func (m *Member) Reason() StopReason {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.reason
}

// Err is nil while the member runs and after it left or drained; else why
// it stopped: ErrReplaced, ErrFenced, ErrRemoved, or the context's error.
func (m *Member) Err() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.err
}
