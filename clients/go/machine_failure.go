package assignd

// RetryBackoffMs is the wait before the attempt after failures failed
// requests in a row (from 1): exponential from RetryBackoffMinMs, at most
// RetryBackoffMaxMs and never longer than the heartbeat interval.
func RetryBackoffMs(failures int, intervalMs int64) int64 {
	shift := failures - 1
	if shift < 0 {
		shift = 0
	}
	if shift > 16 {
		shift = 16
	}
	return minInt64(minInt64(RetryBackoffMinMs<<shift, RetryBackoffMaxMs), intervalMs)
}

// heartbeatFailed is the policy for every failure of a heartbeat (a join
// included) sent at sent and failed at now.
func (m *Machine) heartbeatFailed(f *Failure, sent, now int64) {
	joined := m.memberID != ""
	leaving := m.drain || m.leaveAsked || m.tracker.draining
	errorEvent := Event{Type: EventError, Failure: f}
	switch code := f.code(); {
	case code == CodeReplaced:
		// Refused to a join too: a retried join whose first attempt
		// the host handled, after which another process took the name.
		m.log.Log(LevelError, "another process joined with this member name and took its tasks: stopping this member (two processes must not share a member name)",
			"member_id", m.memberID, "member_name", m.config.MemberName)
		m.loseEverything()
		m.events = append(m.events, Event{Type: EventReplaced, MemberName: m.config.MemberName})
		m.stop(StopReplaced)
	case code == CodeFenced && joined:
		m.loseEverything()
		m.events = append(m.events, Event{Type: EventFenced, Rejoining: !leaving})
		if leaving {
			m.stop(StopFenced)
		}
		m.due = sent
	case code == CodeFenced:
		// A join whose id the host has already removed (a retry that came
		// after the member was expired): join anew.
		m.events = append(m.events, errorEvent)
		m.chooseJoinID()
		m.retryLater(sent)
	case (code == CodeUnknownMember || code == CodeUnknownGroup) && joined:
		// The slot is gone (expired, or the group deleted): every task may
		// be elsewhere already. Start over as a new member.
		m.events = append(m.events, errorEvent)
		m.loseEverything()
		switch {
		case leaving:
			m.stop(StopRemoved)
		case code == CodeUnknownGroup:
			m.retryLater(sent)
		default:
			m.due = sent
		}
	case code == CodeStaleEpoch && joined:
		m.events = append(m.events, errorEvent)
		if m.config.MemberName != "" {
			// A new incarnation of the name takes the slot with its tasks
			// as they are: nothing is lost.
			m.forgetMemberID()
		} else {
			m.loseEverythingButID()
			// Free the old slot's tasks now rather than at its session
			// timeout.
			m.beginLeave("", now)
		}
		m.due = sent
	default:
		m.events = append(m.events, errorEvent)
		m.retryLater(sent)
		if f.RetryAfterMs != nil {
			m.pauseAsked(*f.RetryAfterMs, joined, sent, now)
		}
	}
}

// pauseAsked honours a Retry-After (backpressure: a join rate limit, a
// connection cap), counted from the answer at now. A joined member waits no
// longer than its interval, so its session holds.
func (m *Machine) pauseAsked(hintMs int64, joined bool, sent, now int64) {
	if joined {
		hintMs = minInt64(hintMs, m.intervalMs)
	}
	backoff := m.due - sent
	m.due = now + maxInt64(backoff, hintMs)
}

// retryLater schedules the next attempt after a failure, keeping the
// member id and epoch.
func (m *Machine) retryLater(sent int64) {
	m.failures++
	m.due = sent + RetryBackoffMs(m.failures, m.intervalMs)
}

func (m *Machine) beginLeave(then StopReason, now int64) {
	m.leaving = &leaving{then: then}
	m.leaveFailure = nil
	m.due = now
}

// afterHeartbeat: a leave, an ack, a drain or a loss that came while the
// heartbeat was in flight goes at once.
func (m *Machine) afterHeartbeat(now int64) {
	if m.leaving != nil || m.sendNow {
		m.due = minInt64(m.due, now)
	}
	m.settleLeave(now)
}

// hurry: the host must hear of a change at once (after the request in
// flight, if any).
func (m *Machine) hurry(now int64) {
	m.due = minInt64(m.due, now)
	m.sendNow = true
}

// settleLeave ends a leave that cannot be sent: nothing to leave, nothing
// in flight.
func (m *Machine) settleLeave(now int64) {
	if m.leaving != nil && m.inFlight == nil && m.memberID == "" {
		m.finishLeave(nil, now)
	}
}

func (m *Machine) leaveFailed(f *Failure, now int64) {
	attempts := LeaveAttemptsMax
	if m.leaving != nil {
		attempts = m.leaving.attempts
	}
	switch f.code() {
	case CodeFenced, CodeReplaced, CodeUnknownMember, CodeUnknownGroup:
		// Out of the group already: nothing to leave.
		m.finishLeave(nil, now)
		return
	}
	if !f.transient() || attempts >= LeaveAttemptsMax {
		m.finishLeave(f, now)
		return
	}
	m.due = now + RetryBackoffMinMs<<attempts
}

func (m *Machine) finishLeave(f *Failure, now int64) {
	var then StopReason
	if m.leaving != nil {
		then = m.leaving.then
		m.leaving = nil
	}
	if f != nil {
		m.log.Log(LevelWarn, "the leave failed", "member_id", m.memberID, "failure", f.Error())
	}
	m.leaveFailure = f
	m.forgetMemberID()
	if then != "" {
		m.stop(then)
	} else {
		m.due = now
	}
}

func (m *Machine) stop(reason StopReason) {
	if m.leaveAsked {
		reason = StopLeft
	}
	m.leaving = nil
	if m.stopped == "" {
		m.stopped = reason
	}
}
