package assignd

// optMs is a time in milliseconds that may be unknown. Unknown orders
// before every known time, so min with an unknown is unknown and max with
// one is the other.
type optMs struct {
	v  int64
	ok bool
}

func someMs(v int64) optMs { return optMs{v: v, ok: true} }

func (a optMs) min(b optMs) optMs {
	if !a.ok || !b.ok {
		return optMs{}
	}
	return someMs(minInt64(a.v, b.v))
}

func (a optMs) max(b optMs) optMs {
	switch {
	case !a.ok:
		return b
	case !b.ok:
		return a
	}
	return someMs(maxInt64(a.v, b.v))
}

// plus is a send time plus an answer's optional figure.
func plus(sent int64, ms *int64) optMs {
	if ms == nil {
		return optMs{}
	}
	return someMs(sent + *ms)
}

// lease holds the last answer's lease figures, counted from the send time
// of its request.
type lease struct {
	until          optMs
	unreachedUntil optMs
	// flightMs (the answer's unreached_flight_ms): while a request is in
	// flight, the unreached lease counts only until its send time plus
	// this, since the host, should that request reach it, keeps the tasks
	// that long after handling it. nil from a host before it: no
	// unreached lease while a request is in flight.
	flightMs *int64
	// reachedSinceAnswer: a request since the last answer failed in a way
	// that may have reached the coordinator; the unreached lease no longer
	// holds.
	reachedSinceAnswer bool
	// onUnreached: every request since the last answer certainly reached no
	// coordinator, and the unreached lease holds.
	onUnreached bool
}

func (m *Machine) takeLease(r *HeartbeatResponse, sent int64) {
	if m.lease.onUnreached {
		m.log.Log(LevelInfo, "a coordinator of the group answers again: off the unreached lease",
			"member_id", m.memberID)
	}
	m.lease = lease{
		until:          plus(sent, r.LeaseMs),
		unreachedUntil: plus(sent, r.UnreachedLeaseMs),
		flightMs:       r.UnreachedFlightMs,
	}
}

// judgeLease decides which lease holds after a failed heartbeat. While
// every heartbeat since the last answer certainly reached no coordinator,
// the answer's unreached lease (if later): the host takes tasks early only
// through a heartbeat it got. Any other failure may have reached it, and
// the plain lease holds again until the next answer.
func (m *Machine) judgeLease(f *Failure) {
	l := &m.lease
	unreached := f.Kind == Unreached && !l.reachedSinceAnswer
	l.reachedSinceAnswer = l.reachedSinceAnswer || !unreached
	// The host never answers an unreached lease past the plain one while
	// tasks are to be released (their fence may come first); checked here
	// too. Without the flight bound (a host before it), no extension: the
	// next heartbeat may reach a coordinator.
	extends := unreached && !m.tracker.isReleasing() && l.flightMs != nil &&
		l.until.ok && l.unreachedUntil.ok && l.unreachedUntil.v > l.until.v
	if extends == l.onUnreached {
		return
	}
	l.onUnreached = extends
	if extends {
		m.log.Log(LevelInfo, "no heartbeat reaches a coordinator of the group: keeping the tasks on the unreached lease",
			"member_id", m.memberID, "lease_until_ms", l.until.v, "unreached_until_ms", l.unreachedUntil.v)
	} else {
		m.log.Log(LevelInfo, "a heartbeat may have reached the coordinator: back on the last answer's lease",
			"member_id", m.memberID)
	}
}

// LeaseUntil is the end of the lease in force: the unreached lease while
// the member is on it, else the last answer's; false before any answer
// with a lease. While a request is in flight on the unreached lease, that
// lease ends no later than the request's send time plus the last answer's
// flight bound (the plain lease from an answer without one).
func (m *Machine) LeaseUntil() (int64, bool) {
	end := m.leaseEnd()
	return end.v, end.ok
}

func (m *Machine) leaseEnd() optMs {
	l := m.lease
	if !l.onUnreached {
		return l.until
	}
	var inFlightBound optMs
	switch {
	case m.inFlight != nil && l.flightMs != nil:
		inFlightBound = someMs(m.inFlight.sent + *l.flightMs)
	case m.inFlight != nil:
		inFlightBound = l.until
	default:
		inFlightBound = l.unreachedUntil
	}
	return l.until.max(l.unreachedUntil.min(inFlightBound))
}

// MayProcess tells whether the application may process (and commit the
// output of) task at now: it is active here, or being released and not yet
// acknowledged, and the lease in force has not run out.
func (m *Machine) MayProcess(task Task, now int64) bool {
	if !m.tracker.isHeld(task) {
		return false
	}
	end := m.leaseEnd()
	return !end.ok || now < end.v
}

// UnreachedLeaseUntil is the end of the last answer's unreached lease (its
// request's send time plus unreached_lease_ms), whether or not it is in
// force; false before an answer with one.
func (m *Machine) UnreachedLeaseUntil() (int64, bool) {
	return m.lease.unreachedUntil.v, m.lease.unreachedUntil.ok
}

// OnUnreachedLease tells whether the member is on the unreached lease:
// every heartbeat since the last answer certainly reached no coordinator,
// and that answer's unreached lease outlasts its plain one.
func (m *Machine) OnUnreachedLease() bool { return m.lease.onUnreached }
