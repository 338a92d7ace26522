package assignd

import "fmt"

// The host's stable error codes the member acts on.
const (
	CodeUnknownGroup  = "unknown_group"
	CodeUnknownMember = "unknown_member"
	// CodeFenced: the member was removed (it left, expired, or held tasks
	// too long); rejoining is right.
	CodeFenced = "fenced"
	// CodeReplaced: another process took the member's name; rejoining would
	// take it back and fence the other one.
	CodeReplaced   = "replaced"
	CodeStaleEpoch = "stale_epoch"
)

// FailureKind is how a heartbeat failed, as far as the member's lease and
// retries are concerned.
type FailureKind string

const (
	// Unreached: no coordinator of the group can have handled it (every
	// attempt was refused a connection, redirected, or answered 503
	// shard_unavailable, or it never went out).
	Unreached FailureKind = "unreached"
	// NoAnswer: a timeout, or a connection lost after sending; the host
	// may have handled it.
	NoAnswer FailureKind = "no_answer"
	// Refused: a 4xx with an error body (or any status with code
	// not_coordinator).
	Refused FailureKind = "refused"
	// Server: a 5xx without such a code.
	Server FailureKind = "server"
	// Unreadable: an answer the client cannot read.
	Unreadable FailureKind = "unreadable"
)

// Failure is a failed heartbeat. It is an error.
type Failure struct {
	Kind FailureKind
	// Status is the HTTP status of a refused or server failure.
	Status int
	// Code is a refusal's error code.
	Code string
	// RetryAfterMs is the answer's Retry-After (at most 60 s), or nil.
	RetryAfterMs *int64
	// Message says what happened, for a person.
	Message string
}

func (f *Failure) Error() string {
	switch f.Kind {
	case Refused:
		return fmt.Sprintf("the host refused the heartbeat (%s, HTTP %d): %s", f.Code, f.Status, f.Message)
	case Server:
		return fmt.Sprintf("the host failed (HTTP %d): %s", f.Status, f.Message)
	case Unreached:
		return "no coordinator of the group got the heartbeat: " + f.Message
	case NoAnswer:
		return "no answer from the host: " + f.Message
	default:
		return "unreadable answer from the host: " + f.Message
	}
}

// transient tells a failure after which the same request may succeed: no
// answer, no coordinator reached, or a host failure.
func (f *Failure) transient() bool {
	return f.Kind == Unreached || f.Kind == NoAnswer || f.Kind == Server
}

// code is the refusal's code, or "" for any other failure.
func (f *Failure) code() string {
	if f.Kind == Refused {
		return f.Code
	}
	return ""
}
