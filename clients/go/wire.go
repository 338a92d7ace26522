package assignd

import (
	"encoding/json"
	"errors"
	"fmt"
)

// The member epochs a request sends to join and to leave.
const (
	JoinEpoch  int64 = 0
	LeaveEpoch int64 = -1
)

// HeartbeatRequest is the body of POST /v1/groups/{group}/heartbeat: a
// join (epoch 0, with the id the member chose), a heartbeat (the member's
// id and epoch) or a leave (epoch -1).
type HeartbeatRequest struct {
	MemberID    string  `json:"member_id"`
	MemberName  *string `json:"member_name,omitempty"`
	MemberEpoch int64   `json:"member_epoch"`
	// Topics is sent on a join only.
	Topics   []string `json:"topics,omitempty"`
	Rack     *string  `json:"rack"`
	Capacity uint32   `json:"capacity"`
	// Owned is always sent as ranges, so a member of a million tasks
	// reports them in a few bytes.
	Owned TaskRanges `json:"owned"`
	Lags  []LagRow   `json:"lags"`
	Drain bool       `json:"drain"`
	// TaskRanges asks for the answer's task lists as ranges too.
	TaskRanges bool `json:"task_ranges"`
	// Endpoint is where the member serves ("" for none), sent on a join
	// when set and after Machine.SetEndpoint; nil leaves it out (the host
	// keeps what it has).
	Endpoint *string `json:"endpoint,omitempty"`
	// Metadata goes with Endpoint; a pointer, since an empty map ({}:
	// none now) differs from none sent.
	Metadata *map[string]string `json:"metadata,omitempty"`
	// Loads, Utilisation and LoadCapacity are sent only after an answer
	// asked for loads (LoadReport).
	Loads        *[]LoadItem `json:"loads,omitempty"`
	Utilisation  *float64    `json:"utilisation,omitempty"`
	LoadCapacity *float64    `json:"load_capacity,omitempty"`
}

// LagRow is how many records a member's state of a task is behind its
// changelog: [topic, partition, lag] in JSON.
type LagRow struct {
	Task Task
	Lag  uint64
}

// MarshalJSON writes [topic, partition, lag].
func (r LagRow) MarshalJSON() ([]byte, error) {
	return json.Marshal([]interface{}{r.Task.Topic, r.Task.Partition, r.Lag})
}

// UnmarshalJSON reads [topic, partition, lag].
func (r *LagRow) UnmarshalJSON(data []byte) error {
	var parts []json.RawMessage
	if err := json.Unmarshal(data, &parts); err != nil || len(parts) != 3 {
		return fmt.Errorf("a lag row is [topic, partition, lag]")
	}
	if err := json.Unmarshal(parts[0], &r.Task.Topic); err != nil {
		return fmt.Errorf("a lag row's topic: %w", err)
	}
	if err := json.Unmarshal(parts[1], &r.Task.Partition); err != nil {
		return fmt.Errorf("a lag row's partition: %w", err)
	}
	if err := json.Unmarshal(parts[2], &r.Lag); err != nil {
		return fmt.Errorf("a lag row's lag: %w", err)
	}
	return nil
}

// HeartbeatResponse is the 200 answer to a heartbeat. A list, a flag or a
// lease the host leaves out reads as empty, false or unknown (nil).
type HeartbeatResponse struct {
	MemberID            string
	MemberEpoch         int64
	HeartbeatIntervalMs int64
	Active              []Task
	Revoking            []Task
	Learner             []Task
	Standby             []Task
	Draining            bool
	Drained             bool
	// LeaseMs: the host gives nobody else this member's tasks until this
	// long after the heartbeat was sent.
	LeaseMs *int64
	// UnreachedLeaseMs: the longer lease that holds while no later
	// heartbeat reaches a coordinator of the group.
	UnreachedLeaseMs *int64
	// UnreachedFlightMs bounds the unreached lease while a heartbeat is in
	// flight: its send time plus this.
	UnreachedFlightMs *int64
	// LoadReport is what the next heartbeat reports of the member's loads.
	LoadReport LoadReport
}

// responseBody is the answer as JSON; the pointers tell a missing field.
type responseBody struct {
	MemberID            *string    `json:"member_id"`
	MemberEpoch         *int64     `json:"member_epoch"`
	HeartbeatIntervalMs *int64     `json:"heartbeat_interval_ms"`
	Active              TaskRanges `json:"active"`
	Revoking            TaskRanges `json:"revoking"`
	Learner             TaskRanges `json:"learner"`
	Standby             TaskRanges `json:"standby"`
	Draining            bool       `json:"draining"`
	Drained             bool       `json:"drained"`
	LeaseMs             *int64     `json:"lease_ms"`
	UnreachedLeaseMs    *int64     `json:"unreached_lease_ms"`
	UnreachedFlightMs   *int64     `json:"unreached_flight_ms"`
	LoadReport          *string    `json:"load_report"`
}

// ParseResponse reads a heartbeat's 200 answer.
func ParseResponse(data []byte) (*HeartbeatResponse, error) {
	var body responseBody
	if err := json.Unmarshal(data, &body); err != nil {
		return nil, fmt.Errorf("heartbeat answer: %w", err)
	}
	switch {
	case body.MemberID == nil:
		return nil, errors.New("heartbeat answer: no member_id")
	case body.MemberEpoch == nil:
		return nil, errors.New("heartbeat answer: no member_epoch")
	case *body.MemberEpoch < 0:
		return nil, fmt.Errorf("heartbeat answer: member_epoch %d is negative", *body.MemberEpoch)
	case body.HeartbeatIntervalMs == nil:
		return nil, errors.New("heartbeat answer: no heartbeat_interval_ms")
	}
	for _, ms := range []*int64{body.HeartbeatIntervalMs, body.LeaseMs, body.UnreachedLeaseMs, body.UnreachedFlightMs} {
		if ms != nil && *ms < 0 {
			return nil, fmt.Errorf("heartbeat answer: a negative duration %d", *ms)
		}
	}
	return &HeartbeatResponse{
		MemberID:            *body.MemberID,
		MemberEpoch:         *body.MemberEpoch,
		HeartbeatIntervalMs: *body.HeartbeatIntervalMs,
		Active:              body.Active,
		Revoking:            body.Revoking,
		Learner:             body.Learner,
		Standby:             body.Standby,
		Draining:            body.Draining,
		Drained:             body.Drained,
		LeaseMs:             body.LeaseMs,
		UnreachedLeaseMs:    body.UnreachedLeaseMs,
		UnreachedFlightMs:   body.UnreachedFlightMs,
		LoadReport:          readLoadReport(body.LoadReport),
	}, nil
}

// ErrorBody is the body of every failed answer (4xx and 5xx).
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is a refusal's stable code and a message for a person.
type ErrorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// Location is where a not_coordinator answer (307) points.
	Location string `json:"location,omitempty"`
}

// parseErrorBody reads {"error": {"code", "message"}}; nil if the body is
// not one.
func parseErrorBody(data []byte) *ErrorBody {
	var body struct {
		Error *struct {
			Code     *string `json:"code"`
			Message  *string `json:"message"`
			Location string  `json:"location"`
		} `json:"error"`
	}
	if json.Unmarshal(data, &body) != nil || body.Error == nil || body.Error.Code == nil || body.Error.Message == nil {
		return nil
	}
	return &ErrorBody{Error: ErrorDetail{Code: *body.Error.Code, Message: *body.Error.Message, Location: body.Error.Location}}
}
