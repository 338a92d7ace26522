package assignd

import (
	"reflect"
	"testing"
)

func answer(epoch int64, active, revoking, learner []uint32) *HeartbeatResponse {
	return &HeartbeatResponse{
		MemberID: "m", MemberEpoch: epoch, HeartbeatIntervalMs: 100,
		Active: orders(active...), Revoking: orders(revoking...), Learner: orders(learner...),
	}
}

func ps(p ...uint32) []uint32 { return p }

func ev(kind EventType, p ...uint32) Event { return Event{Type: kind, Tasks: orders(p...)} }

func expectEvents(t *testing.T, got []Event, want ...Event) {
	t.Helper()
	if len(got) == 0 && len(want) == 0 {
		return
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("events %+v, want %+v", got, want)
	}
}

func TestARevocationIsOwnedUntilAcknowledged(t *testing.T) {
	tr := newTracker()
	expectEvents(t, tr.onResponse(answer(1, ps(0, 1), nil, nil)), ev(EventAssigned, 0, 1))
	expectEvents(t, tr.onResponse(answer(1, ps(0), ps(1), nil)), Event{Type: EventRevoked, Tasks: orders(1), Ack: 0})
	if !reflect.DeepEqual(tr.owned(), orders(0, 1)) {
		t.Fatalf("owned %v", tr.owned())
	}
	expectEvents(t, tr.onResponse(answer(1, ps(0), ps(1), nil)))
	if known, events := tr.onAck(0); !known || len(events) != 0 {
		t.Fatalf("ack: %v %v", known, events)
	}
	if !reflect.DeepEqual(tr.owned(), orders(0)) {
		t.Fatalf("owned %v", tr.owned())
	}
	if known, _ := tr.onAck(0); known {
		t.Fatal("an ack twice is known")
	}
}

func TestACaughtUpLearnerWaitingForItsReleaseIsKeptThenPromoted(t *testing.T) {
	tr := newTracker()
	tr.onResponse(answer(1, ps(0), nil, ps(5)))
	expectEvents(t, tr.onResponse(answer(2, ps(0), nil, nil)))
	if !reflect.DeepEqual(tr.assignment().Learner, orders(5)) {
		t.Fatal("the learner is not kept")
	}
	expectEvents(t, tr.onResponse(answer(2, ps(0, 5, 6), nil, nil)), ev(EventPromoted, 5), ev(EventAssigned, 6))
	if len(tr.assignment().Learner) != 0 {
		t.Fatal("a promoted learner is still a learner")
	}
}

func TestADroppedLearnerStopsWhenTheEpochMovesOnOrTheWaitRunsOut(t *testing.T) {
	tr := newTracker()
	tr.onResponse(answer(1, ps(0), nil, ps(5, 6)))
	expectEvents(t, tr.onResponse(answer(2, ps(0), nil, ps(6))))
	expectEvents(t, tr.onResponse(answer(3, ps(0), nil, ps(6))), ev(EventLearnerStopped, 5))
	expectEvents(t, tr.onResponse(answer(3, ps(0), nil, nil)))
	for i := 1; i < awaitAnswersMax; i++ {
		expectEvents(t, tr.onResponse(answer(3, ps(0), nil, nil)))
	}
	expectEvents(t, tr.onResponse(answer(3, ps(0), nil, nil)), ev(EventLearnerStopped, 6))
}

func TestATaskGivenBackWhileReleasingWaitsForTheAcknowledgement(t *testing.T) {
	tr := newTracker()
	tr.onResponse(answer(1, ps(0, 1), nil, nil))
	tr.onResponse(answer(1, ps(0), ps(1), nil))
	expectEvents(t, tr.onResponse(answer(1, ps(0, 1), nil, nil)))
	_, events := tr.onAck(0)
	expectEvents(t, events, ev(EventAssigned, 1))
	if !reflect.DeepEqual(tr.owned(), orders(0, 1)) {
		t.Fatalf("owned %v", tr.owned())
	}
}

func TestATaskTheHostNoLongerHoldsIsLostAndNeverReported(t *testing.T) {
	tr := newTracker()
	tr.onResponse(answer(1, ps(0, 1, 2), nil, nil))
	tr.onResponse(answer(1, ps(0, 1), ps(2), nil))
	expectEvents(t, tr.onResponse(answer(1, ps(0), nil, nil)), ev(EventLost, 1))
	if !reflect.DeepEqual(tr.owned(), orders(0)) || !reflect.DeepEqual(tr.assignment().Revoking, orders(2)) {
		t.Fatalf("owned %v, assignment %+v", tr.owned(), tr.assignment())
	}
}

func TestResetReturnsEverythingHeldAndForgetsOldAcks(t *testing.T) {
	tr := newTracker()
	tr.onResponse(answer(1, ps(0, 1), nil, ps(3)))
	tr.onResponse(answer(1, ps(0), ps(1), ps(3)))
	if held := tr.reset(); !reflect.DeepEqual(held, orders(0, 1)) {
		t.Fatalf("held %v", held)
	}
	if known, _ := tr.onAck(0); known {
		t.Fatal("an ack from before a reset is known")
	}
	tr.onResponse(answer(1, ps(7), nil, nil))
	expectEvents(t, tr.onResponse(answer(1, nil, ps(7), nil)), Event{Type: EventRevoked, Tasks: orders(7), Ack: 1})
}

func TestDrainsAreReportedOnce(t *testing.T) {
	tr := newTracker()
	draining := answer(1, ps(0), nil, nil)
	draining.Draining = true
	expectEvents(t, tr.onResponse(draining), ev(EventAssigned, 0), Event{Type: EventDraining})
	expectEvents(t, tr.onResponse(draining))
	drained := answer(1, nil, nil, nil)
	drained.Draining, drained.Drained = true, true
	expectEvents(t, tr.onResponse(drained), ev(EventLost, 0), Event{Type: EventDrained})
}
