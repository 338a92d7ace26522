package assignd

// The tracker is what the application has been told, and what it must be
// told next: the member's side of incremental cooperative rebalancing.
// Its rules:
//   - a task the host moves to revoking is reported owned until the
//     application acknowledges releasing it, and never after;
//   - a task the host gives (back) while the application still releases
//     it is granted only after that release is acknowledged;
//   - the owned report never names a task the host's last answer does not
//     hold for this member (the host refuses such a report).

// Assignment is a member's assignment as the application was told it.
// Every list is sorted.
type Assignment struct {
	// Active tasks the application may process.
	Active []Task `json:"active"`
	// Revoking tasks it was asked to release and has not acknowledged
	// yet; still reported owned.
	Revoking []Task `json:"revoking"`
	// Learner tasks to warm up. A learner the host stopped listing stays
	// while it may be on its way to becoming active.
	Learner []Task `json:"learner"`
	// Standby: hot copies to keep.
	Standby  []Task `json:"standby"`
	Draining bool   `json:"draining"`
}

type tracker struct {
	active taskSet
	// revoking maps a task being released to the ack that releases it.
	revoking map[Task]uint64
	learner  copies
	standby  copies
	draining bool
	// hostHeld: what the host's last answer holds for this member (active
	// and revoking); hostActive: what it gives as active.
	hostHeld   taskSet
	hostActive taskSet
	// nextAck is never reset, so an ack from before a reset matches
	// nothing.
	nextAck uint64
}

func newTracker() *tracker {
	return &tracker{
		active: taskSet{}, revoking: map[Task]uint64{},
		learner: newCopies(), standby: newCopies(),
		hostHeld: taskSet{}, hostActive: taskSet{},
	}
}

func (t *tracker) assignment() Assignment {
	return Assignment{
		Active:   t.active.list(),
		Revoking: t.revokingSet().list(),
		Learner:  t.learner.told.list(),
		Standby:  t.standby.told.list(),
		Draining: t.draining,
	}
}

func (t *tracker) revokingSet() taskSet {
	s := taskSet{}
	for task := range t.revoking {
		s.add(task)
	}
	return s
}

// held is every task active or being released here.
func (t *tracker) held() taskSet {
	s := t.revokingSet()
	s.addAll(t.active)
	return s
}

// isHeld tells whether task is active or being released here.
func (t *tracker) isHeld(task Task) bool {
	_, releasing := t.revoking[task]
	return releasing || t.active.has(task)
}

// owned is the owned report: held tasks the host still counts as this
// member's.
func (t *tracker) owned() []Task {
	return t.held().filter(t.hostHeld.has).list()
}

func (t *tracker) holdsAny() bool    { return len(t.active) > 0 || len(t.revoking) > 0 }
func (t *tracker) isReleasing() bool { return len(t.revoking) > 0 }

// onResponse applies an answer and returns the events it makes, in the
// order the application must learn them.
func (t *tracker) onResponse(r *HeartbeatResponse) []Event {
	var events []Event
	t.hostActive = newTaskSet(r.Active...)
	revoking := newTaskSet(r.Revoking...)
	t.hostHeld = t.hostActive.clone()
	t.hostHeld.addAll(revoking)

	if lost := t.active.filter(func(x Task) bool { return !t.hostHeld.has(x) }); len(lost) > 0 {
		t.active.removeAll(lost)
		events = append(events, tasksEvent(EventLost, lost))
	}
	if revoked := t.active.filter(revoking.has); len(revoked) > 0 {
		ack := t.nextAck
		t.nextAck++
		t.active.removeAll(revoked)
		for task := range revoked {
			t.revoking[task] = ack
		}
		e := tasksEvent(EventRevoked, revoked)
		e.Ack = ack
		events = append(events, e)
	}

	granted := t.grantable()
	promoted, assigned := t.splitWarm(granted)
	learnerStarted, learnerStopped := t.learner.update(newTaskSet(r.Learner...), granted, r.MemberEpoch)
	standbyStarted, standbyStopped := t.standby.update(newTaskSet(r.Standby...), granted, r.MemberEpoch)
	t.active.addAll(granted)

	for _, step := range []struct {
		kind  EventType
		tasks taskSet
	}{
		{EventLearnerStopped, learnerStopped},
		{EventStandbyStopped, standbyStopped},
		{EventPromoted, promoted},
		{EventAssigned, assigned},
		{EventLearnerStarted, learnerStarted},
		{EventStandbyStarted, standbyStarted},
	} {
		if len(step.tasks) > 0 {
			events = append(events, tasksEvent(step.kind, step.tasks))
		}
	}
	if r.Draining && !t.draining {
		events = append(events, Event{Type: EventDraining})
	}
	t.draining = r.Draining
	if r.Drained {
		events = append(events, Event{Type: EventDrained})
	}
	return events
}

// splitWarm splits newly granted tasks into promoted copies and cold
// assignments, and forgets the copies.
func (t *tracker) splitWarm(granted taskSet) (promoted, assigned taskSet) {
	promoted = granted.filter(func(x Task) bool { return t.learner.told.has(x) || t.standby.told.has(x) })
	assigned = granted.filter(func(x Task) bool { return !promoted.has(x) })
	t.learner.promote(granted)
	t.standby.promote(granted)
	return promoted, assigned
}

// grantable: tasks the host gives as active that the application does not
// have yet and is not still releasing.
func (t *tracker) grantable() taskSet {
	return t.hostActive.filter(func(x Task) bool { return !t.isHeld(x) })
}

// onAck applies the application's release of ack. It reports whether the
// ack was known, and the events of the tasks it unblocks (given back
// meanwhile). An unknown ack (from before a reset, or twice) changes
// nothing.
func (t *tracker) onAck(ack uint64) (bool, []Event) {
	known := false
	for task, a := range t.revoking {
		if a == ack {
			delete(t.revoking, task)
			known = true
		}
	}
	if !known {
		return false, nil
	}
	granted := t.grantable()
	promoted, assigned := t.splitWarm(granted)
	t.active.addAll(granted)
	var events []Event
	if len(promoted) > 0 {
		events = append(events, tasksEvent(EventPromoted, promoted))
	}
	if len(assigned) > 0 {
		events = append(events, tasksEvent(EventAssigned, assigned))
	}
	return true, events
}

// reset forgets everything (fenced, removed, the lease ran out, or a
// rejoin as a new member) and returns every task held, sorted.
func (t *tracker) reset() []Task {
	held := t.held().list()
	next := t.nextAck
	*t = *newTracker()
	t.nextAck = next
	return held
}
