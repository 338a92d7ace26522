package assignd

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"
)

type outcomeKind int

const (
	// outcomeDone: an answer, or a failure after which no other node is
	// tried (a timeout, a host failure, an unreadable answer); any of them
	// may have reached the coordinator.
	outcomeDone outcomeKind = iota
	// outcomeNotReached: a failure after which no other node is tried and
	// which reached no coordinator (a redirect without a usable location).
	outcomeNotReached
	// outcomeRedirected: the node does not coordinate the group; location
	// is the coordinator's heartbeat URL.
	outcomeRedirected
	// outcomeInTransit: the group's shard is between owners; try again
	// shortly.
	outcomeInTransit
	// outcomeRefused: the node refused the connection; nothing was sent.
	outcomeRefused
	// outcomeUnanswered: the connection failed after the request may have
	// gone out (reset, closed before the answer).
	outcomeUnanswered
)

// outcome is what one request came back with.
type outcome struct {
	kind     outcomeKind
	response *HeartbeatResponse
	failure  *Failure
	location *url.URL
	// reached: for outcomeInTransit, false for 503 shard_unavailable (the
	// node does not serve the shard and handled nothing).
	reached bool
}

// mayHaveReached tells whether this request may have reached the group's
// coordinator.
func (o outcome) mayHaveReached() bool {
	switch o.kind {
	case outcomeDone, outcomeUnanswered:
		return true
	case outcomeInTransit:
		return o.reached
	default:
		return false
	}
}

// read classifies an HTTP answer to a request sent to u.
func (t *transport) read(answer *http.Response, u *url.URL) outcome {
	status := answer.StatusCode
	redirected := status == http.StatusTemporaryRedirect || status == http.StatusPermanentRedirect
	if redirected {
		if to := redirectTarget(u, answer.Header.Get("Location")); to != nil {
			return outcome{kind: outcomeRedirected, location: to}
		}
	}
	retryAfter := retryAfterMs(answer.Header.Get("Retry-After"))
	body, err := io.ReadAll(answer.Body)
	if err != nil {
		return outcome{kind: outcomeDone, failure: &Failure{Kind: NoAnswer, Message: err.Error()}}
	}
	if status >= 200 && status < 300 {
		response, err := ParseResponse(body)
		if err != nil {
			return outcome{kind: outcomeDone, failure: &Failure{Kind: Unreadable, Message: err.Error()}}
		}
		return outcome{kind: outcomeDone, response: response}
	}
	errorBody := parseErrorBody(body)
	message := cut(string(body), errorBodyLenMax)
	code := ""
	if errorBody != nil {
		message, code = errorBody.Error.Message, errorBody.Error.Code
	}
	if status == http.StatusServiceUnavailable && (code == codeShardUnavailable || code == codeCoordinatorUnreachable) {
		return outcome{
			kind:    outcomeInTransit,
			reached: code != codeShardUnavailable,
			failure: &Failure{Kind: Server, Status: status, RetryAfterMs: retryAfter, Message: message},
		}
	}
	var f *Failure
	switch {
	case errorBody != nil && (status >= 400 && status < 500 || code == codeNotCoordinator):
		f = &Failure{Kind: Refused, Status: status, Code: code, RetryAfterMs: retryAfter, Message: message}
	case status >= 500 && status < 600:
		f = &Failure{Kind: Server, Status: status, RetryAfterMs: retryAfter, Message: message}
	default:
		f = &Failure{Kind: Unreadable, Message: fmt.Sprintf("HTTP %d without an error body: %s", status, message)}
	}
	if redirected {
		// A redirect the transport cannot follow still says the node does
		// not coordinate the group.
		return outcome{kind: outcomeNotReached, failure: f}
	}
	return outcome{kind: outcomeDone, failure: f}
}

// redirectTarget resolves a Location (relative or absolute) against the
// request's URL; nil if it is not a usable http(s) URL.
func redirectTarget(from *url.URL, location string) *url.URL {
	if location == "" {
		return nil
	}
	ref, err := url.Parse(location)
	if err != nil {
		return nil
	}
	to := from.ResolveReference(ref)
	if (to.Scheme != "http" && to.Scheme != "https") || to.Host == "" {
		return nil
	}
	return to
}

// retryAfterMs reads Retry-After in seconds (the host sends no HTTP
// dates), capped at retryAfterMaxS; nil without one.
func retryAfterMs(header string) *int64 {
	seconds, err := strconv.ParseUint(strings.TrimSpace(header), 10, 64)
	if err != nil {
		return nil
	}
	if seconds > retryAfterMaxS {
		seconds = retryAfterMaxS
	}
	ms := int64(seconds) * 1000
	return &ms
}

// cut keeps at most n bytes of s, on a character boundary.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// encodeJSON writes v without HTML escaping (topics may hold '<' or '&').
func encodeJSON(w io.Writer, v interface{}) error {
	encoder := json.NewEncoder(w)
	encoder.SetEscapeHTML(false)
	return encoder.Encode(v)
}
