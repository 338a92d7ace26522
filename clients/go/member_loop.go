package assignd

import "time"

// run drives the machine: it acts on the lease, sends what is due and
// sleeps until the machine's timeout or its next input.
func (m *Member) run() {
	defer close(m.stopped)
	for {
		m.step()
		m.mu.Lock()
		reason := m.machine.Stopped()
		timeout, timed := m.machine.PollTimeout()
		m.mu.Unlock()
		if reason != "" {
			m.finish(reason, nil)
			return
		}
		var timer *time.Timer
		var fire <-chan time.Time
		if timed {
			timer = time.NewTimer(time.Until(m.at(timeout)))
			fire = timer.C
		}
		select {
		case <-m.wake:
		case <-fire:
		case <-m.ctx.Done():
			m.finish("", m.ctx.Err())
			return
		}
		if timer != nil {
			timer.Stop()
		}
	}
}

// step gives the machine the time, asks the lag source before a request
// and sends the request that is due, if any.
func (m *Member) step() {
	m.mu.Lock()
	now := m.now()
	m.machine.Tick(now)
	due := m.machine.RequestDue(now)
	assignment := m.machine.Assignment()
	m.collect()
	m.mu.Unlock()
	// Outside the lock: the lag source may ask the member for anything.
	var lags []LagRow
	report := due && m.config.Lags != nil
	if report {
		lags = m.config.Lags(assignment)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if report {
		m.machine.ReportLags(lags)
	}
	if r := m.machine.PollRequest(m.now()); r != nil {
		go m.send(r)
	}
}

// send makes one heartbeat and gives the machine its outcome.
func (m *Member) send(r *HeartbeatRequest) {
	sent := time.Now()
	response, failure := m.transport.heartbeat(m.ctx, r)
	if m.config.OnHeartbeat != nil {
		m.config.OnHeartbeat(time.Since(sent), failure)
	}
	m.mu.Lock()
	now := m.now()
	if failure != nil {
		m.machine.OnFailure(failure, now)
	} else {
		m.machine.OnAnswer(response, now)
	}
	m.collect()
	m.mu.Unlock()
	poke(m.wake)
}

// ack acknowledges a revocation the listener returned from; once the
// member stopped there is nothing to release.
func (m *Member) ack(id uint64) {
	m.mu.Lock()
	if m.ended {
		m.mu.Unlock()
		return
	}
	m.machine.Ack(id, m.now())
	m.collect()
	m.mu.Unlock()
	poke(m.wake)
}

// collect moves the machine's events to the listener's queue, logging
// the ones worth a line; once the member ended (its context was done with
// a request in flight) they are dropped. Called with mu held.
func (m *Member) collect() {
	n := len(m.queue)
	for e, ok := m.machine.PollEvent(); ok; e, ok = m.machine.PollEvent() {
		if !m.ended {
			m.logEvent(e)
			m.queue = append(m.queue, e)
		}
	}
	if len(m.queue) > n {
		poke(m.queued)
	}
}

func (m *Member) logEvent(e Event) {
	id := m.machine.MemberID()
	switch e.Type {
	case EventJoined:
		m.log.Log(LevelInfo, "joined", "group", m.config.Group, "member_id", e.MemberID)
	case EventLost:
		m.log.Log(LevelWarn, "tasks lost", "member_id", id, "tasks", len(e.Tasks))
	case EventFenced:
		m.log.Log(LevelWarn, "fenced by the host", "member_id", id, "rejoining", e.Rejoining)
	case EventError:
		level := LevelDebug
		if e.Failure.Kind == Refused {
			level = LevelWarn
		}
		m.log.Log(level, "heartbeat failed", "member_id", id, "epoch", m.machine.MemberEpoch(), "error", e.Failure.Error())
	}
}

// finish records why the loop ended and queues the last events.
func (m *Member) finish(reason StopReason, err error) {
	m.mu.Lock()
	m.collect()
	m.ended = true
	m.reason = reason
	switch {
	case err != nil:
		m.err = err
	case reason == StopReplaced:
		m.err = ErrReplaced
	case reason == StopFenced:
		m.err = ErrFenced
	case reason == StopRemoved:
		m.err = ErrRemoved
	}
	m.mu.Unlock()
	m.transport.close()
	if err != nil {
		m.log.Log(LevelInfo, "member stopped", "group", m.config.Group, "error", err)
	} else {
		m.log.Log(LevelInfo, "member stopped", "group", m.config.Group, "reason", reason)
	}
}

// dispatch hands the queued events to the listener, one at a time, and
// acknowledges each revocation once the listener returned from it.
func (m *Member) dispatch() {
	defer close(m.done)
	for {
		select {
		case <-m.queued:
		case <-m.stopped:
		}
		m.deliverQueued()
		select {
		case <-m.stopped:
			// Nothing is queued after the loop ended.
			m.deliverQueued()
			return
		default:
		}
	}
}

func (m *Member) deliverQueued() {
	for {
		m.mu.Lock()
		batch := m.queue
		m.queue = nil
		m.mu.Unlock()
		if len(batch) == 0 {
			return
		}
		for _, e := range batch {
			if ack, revoked := deliver(m.listener, e); revoked {
				m.ack(ack)
			}
		}
	}
}
