package assignd

// One heartbeat over HTTP/1.1: encode, send within the request timeout,
// classify the outcome. In a cluster any node answers: one that does not
// coordinate the group answers 307 with the coordinator's URL, which the
// transport follows at once (up to redirectsMax hops) and remembers. When
// the remembered node stops answering, the transport asks the bootstrap
// URLs again, in turn. A shard between owners (503 shard_unavailable) is
// retried within the same request timeout after a short pause.
//
// It also tells whether a failed heartbeat may have reached the group's
// coordinator: one whose every attempt was refused a connection (never
// sent), redirected or answered 503 shard_unavailable certainly did not,
// and fails as Unreached, on which the machine keeps its tasks on the
// answer's unreached lease.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strings"
	"time"
)

const (
	// redirectsMax: a stale node may point at one that has just handed
	// the group on.
	redirectsMax = 5
	// retryAfterMaxS caps a host's Retry-After: its hint must not park a
	// member past its own lease.
	retryAfterMaxS = 60
	// errorBodyLenMax is the longest error body kept in a message.
	errorBodyLenMax = 512
	// connectionIdleMax: under the host's 10 s idle timeout, so a request
	// never goes out on a connection the host is closing.
	connectionIdleMax = 5 * time.Second
)

// The first pause before a heartbeat to a shard between owners is sent
// again; it doubles up to inTransitPauseMax, within the request timeout.
const (
	inTransitPauseMin = 25 * time.Millisecond
	inTransitPauseMax = 400 * time.Millisecond
)

// The host's codes the transport handles itself.
const (
	codeNotCoordinator         = "not_coordinator"
	codeShardUnavailable       = "shard_unavailable"
	codeCoordinatorUnreachable = "coordinator_unreachable"
)

// target is where heartbeats go: the coordinator a redirect named, or
// (coordinator nil) the bootstrap URL from. from is also the bootstrap URL
// to ask again when the coordinator stops answering: the one that led
// there.
type target struct {
	coordinator *url.URL
	from        int
}

// next is where to go when this target does not answer.
func (t target) next(bootstraps int) target {
	if t.coordinator != nil {
		return target{from: t.from}
	}
	return target{from: (t.from + 1) % bootstraps}
}

// transport sends one member's heartbeats, one at a time.
type transport struct {
	client        *http.Client
	bootstrap     []*url.URL
	target        target
	authorization string
	timeout       time.Duration
}

func newTransport(urls []string, group, token string, timeout time.Duration) (*transport, error) {
	t := &transport{timeout: timeout}
	for _, base := range urls {
		u, err := heartbeatURL(base, group)
		if err != nil {
			return nil, err
		}
		t.bootstrap = append(t.bootstrap, u)
	}
	if len(t.bootstrap) == 0 {
		return nil, errors.New("no host URL")
	}
	if token != "" {
		t.authorization = "Bearer " + token
	}
	t.client = &http.Client{
		Transport: &http.Transport{
			Proxy:               http.ProxyFromEnvironment,
			DialContext:         (&net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConnsPerHost: 1,
			IdleConnTimeout:     connectionIdleMax,
		},
		// Followed here: the classification depends on seeing them, and
		// the member token must go along to another host.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return t, nil
}

// close drops the idle connection.
func (t *transport) close() { t.client.CloseIdleConnections() }

// heartbeatURL is the heartbeat URL of group at the host whose base URL
// is base.
func heartbeatURL(base, group string) (*url.URL, error) {
	return groupURL(base, group, "heartbeat")
}

// groupURL is {base}/v1/groups/{group}/{tail} at the host whose base URL
// is base.
func groupURL(base, group, tail string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimSpace(base))
	if err != nil {
		return nil, fmt.Errorf("url %q: %w", base, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("url %q is not an http:// base URL", base)
	}
	path := strings.TrimSuffix(u.EscapedPath(), "/")
	joined := path + "/v1/groups/" + url.PathEscape(group) + "/" + tail
	decoded, err := url.PathUnescape(joined)
	if err != nil {
		return nil, fmt.Errorf("url %q: %w", base, err)
	}
	u.Path, u.RawPath = decoded, joined
	return u, nil
}

// heartbeat sends r to the group's coordinator, following redirects,
// trying the bootstrap URLs when the coordinator does not answer and
// waiting out a shard between owners, all within the request timeout.
func (t *transport) heartbeat(ctx context.Context, r *HeartbeatRequest) (*HeartbeatResponse, *Failure) {
	body, err := jsonBody(r)
	if err != nil {
		return nil, &Failure{Kind: Unreached, Message: err.Error()}
	}
	deadline := time.Now().Add(t.timeout)
	redirects, unreachableBootstraps := 0, 0
	pause := inTransitPauseMin
	// Over every attempt: one that may have reached the coordinator makes
	// a failure ambiguous.
	mayHaveReached := false
	for {
		current := t.target
		to := current.coordinator
		if to == nil {
			to = t.bootstrap[current.from]
		}
		left := time.Until(deadline)
		if left <= 0 {
			return nil, failed(&Failure{Kind: NoAnswer, Message: fmt.Sprintf("no answer within %v", t.timeout)}, mayHaveReached)
		}
		o := t.send(ctx, to, body, left)
		mayHaveReached = mayHaveReached || o.mayHaveReached()
		switch o.kind {
		case outcomeDone:
			return o.response, o.failure
		case outcomeNotReached:
			return nil, failed(o.failure, mayHaveReached)
		case outcomeRedirected:
			if redirects >= redirectsMax {
				f := &Failure{Kind: NoAnswer, Message: fmt.Sprintf("more than %d redirects, the last to %s", redirectsMax, o.location)}
				return nil, failed(f, mayHaveReached)
			}
			redirects++
			t.target = target{coordinator: o.location, from: current.from}
		case outcomeInTransit:
			if time.Until(deadline) <= pause {
				return nil, failed(o.failure, mayHaveReached)
			}
			if !sleepCtx(ctx, pause) {
				return nil, failed(&Failure{Kind: NoAnswer, Message: ctx.Err().Error()}, mayHaveReached)
			}
			pause *= 2
			if pause > inTransitPauseMax {
				pause = inTransitPauseMax
			}
		case outcomeRefused, outcomeUnanswered:
			// A coordinator that died or left: ask the bootstrap URL that
			// led to it again.
			if current.coordinator == nil {
				unreachableBootstraps++
			}
			t.target = current.next(len(t.bootstrap))
			if unreachableBootstraps >= len(t.bootstrap) {
				return nil, failed(o.failure, mayHaveReached)
			}
		}
	}
}

// failed is f, the last failure of a heartbeat whose attempts all failed:
// as it is if one of them may have reached the coordinator, else as
// Unreached.
func failed(f *Failure, mayHaveReached bool) *Failure {
	if mayHaveReached {
		return f
	}
	return &Failure{Kind: Unreached, Message: f.Error()}
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func jsonBody(r *HeartbeatRequest) ([]byte, error) {
	var buf bytes.Buffer
	if err := encodeJSON(&buf, r); err != nil {
		return nil, fmt.Errorf("encoding the heartbeat: %w", err)
	}
	return buf.Bytes(), nil
}

// send makes one request to u within timeout.
func (t *transport) send(ctx context.Context, u *url.URL, body []byte, timeout time.Duration) outcome {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// A request that got no connection was never sent: told apart from
	// one lost after it went out.
	connected := false
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn: func(httptrace.GotConnInfo) { connected = true },
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(body))
	if err != nil {
		return outcome{kind: outcomeNotReached, failure: &Failure{Kind: NoAnswer, Message: err.Error()}}
	}
	req.Header.Set("Content-Type", "application/json")
	if t.authorization != "" {
		req.Header.Set("Authorization", t.authorization)
	}
	answer, err := t.client.Do(req)
	if err != nil {
		return t.sendFailed(err, connected)
	}
	defer answer.Body.Close()
	return t.read(answer, u)
}

// sendFailed classifies a request that got no answer.
func (t *transport) sendFailed(err error, connected bool) outcome {
	f := &Failure{Kind: NoAnswer, Message: err.Error()}
	var netErr net.Error
	switch {
	case !connected:
		return outcome{kind: outcomeRefused, failure: f}
	case errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &netErr) && netErr.Timeout()):
		// A node that stopped answering (paused, cut off): the next
		// heartbeat asks the (next) bootstrap URL.
		t.target = t.target.next(len(t.bootstrap))
		return outcome{kind: outcomeDone, failure: f}
	default:
		return outcome{kind: outcomeUnanswered, failure: f}
	}
}
