package assignd

// The router's loop: one blocking query at a time, each answer's epoch the
// next query's after_epoch, each waiting at most half the held table's
// bound (so that a quiet group's table is renewed before it runs out); on
// a failure, the next URL after a backoff; a refusal is reported and
// retried slowly.

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// The router's pauses after a failure.
const (
	// routerBackoffMin doubles up to routerBackoffMax while the hosts do
	// not answer.
	routerBackoffMin = 100 * time.Millisecond
	routerBackoffMax = 2 * time.Second
	// routerRefusedPause: a refusal (a wrong token, no such group) is not
	// over soon; asking every few seconds notices when it is.
	routerRefusedPause = 5 * time.Second
	// routesBodyBytesMax bounds a table's body: a million tasks, each
	// in its own range, fit.
	routesBodyBytesMax = 64 << 20
	// routesWaitedMsMax bounds the wait taken from an answer's
	// Assignd-Routes-Waited-Ms: the host never holds a query longer.
	routesWaitedMsMax = uint64(RouterWaitMax / time.Millisecond)
)

// RouterRefusal is the host's refusal of the router's requests (401, 403,
// 404, or another 4xx): its error body's code and message.
type RouterRefusal struct {
	Status  int
	Code    string
	Message string
}

func (e *RouterRefusal) Error() string {
	return fmt.Sprintf("assignd: the host refused the routes request (%s, HTTP %d): %s", e.Code, e.Status, e.Message)
}

// routesAnswer is one request's outcome: a table, or a failure and how
// long the host asked to be left alone.
type routesAnswer struct {
	table      *RouteTable
	err        error
	refused    bool
	retryAfter time.Duration
}

func (r *Router) run() {
	defer r.workers.Done()
	backoff := routerBackoffMin
	for r.ctx.Err() == nil {
		var after *uint64
		held := r.table.Load()
		if held != nil {
			epoch := held.Epoch
			after = &epoch
		}
		at := r.at.Load()
		answer := r.fetch(at, after, r.waitFor(held))
		if r.ctx.Err() != nil {
			return
		}
		if answer.table != nil {
			r.offer(answer.table, after)
		}
		r.ended(answer.err)
		var pause time.Duration
		switch {
		case answer.table != nil:
			backoff = routerBackoffMin
			continue
		case answer.refused:
			r.log.Log(LevelWarn, "routes refused", "group", r.config.Group, "error", answer.err)
			pause = routerRefusedPause
		default:
			r.log.Log(LevelDebug, "routes failed", "group", r.config.Group, "url", r.routes[at].Host, "error", answer.err)
			r.at.Store((at + 1) % int64(len(r.routes)))
			pause = backoff
			if answer.retryAfter > pause {
				pause = answer.retryAfter
			}
			backoff *= 2
			if backoff > routerBackoffMax {
				backoff = routerBackoffMax
			}
		}
		if !sleepCtx(r.ctx, pause) {
			return
		}
	}
}

// waitFor is how long a watch past held may wait: the configured wait, or
// half the table's bound when that is shorter (and the table promises
// anything), so that the answer renews the bound before it runs out.
func (r *Router) waitFor(held *RouteTable) time.Duration {
	if held == nil || held.Valid <= 0 {
		return r.config.Wait
	}
	wait := held.Valid / 2
	if wait < time.Millisecond {
		wait = time.Millisecond
	}
	if wait > r.config.Wait {
		wait = r.config.Wait
	}
	return wait
}

// fetch asks the URL at index at for the table: a blocking query past
// after, waiting at most wait, when after is set, else at once. It follows
// redirects (the token goes along).
func (r *Router) fetch(at int64, after *uint64, wait time.Duration) routesAnswer {
	to := *r.routes[at]
	query := url.Values{}
	timeout := r.config.RequestTimeout
	if after != nil {
		query.Set("after_epoch", strconv.FormatUint(*after, 10))
		query.Set("wait_ms", strconv.FormatInt(wait.Milliseconds(), 10))
	} else if timeout > routerRequestSlack {
		timeout = routerRequestSlack
	}
	to.RawQuery = query.Encode()
	ctx, cancel := context.WithTimeout(r.ctx, timeout)
	defer cancel()
	sent := time.Now()
	for redirects := 0; ; redirects++ {
		answer, err := r.get(ctx, to.String())
		if err != nil {
			return routesAnswer{err: fmt.Errorf("assignd: routes from %s: %w", to.Host, err)}
		}
		location := answer.Header.Get("Location")
		redirected := answer.StatusCode == http.StatusTemporaryRedirect || answer.StatusCode == http.StatusPermanentRedirect
		if redirected && location != "" && redirects < redirectsMax {
			answer.Body.Close()
			next := redirectTarget(&to, location)
			if next == nil {
				return routesAnswer{err: fmt.Errorf("assignd: routes from %s: a redirect to %q", to.Host, location)}
			}
			to = *next
			continue
		}
		defer answer.Body.Close()
		return readRoutes(answer, sent)
	}
}

func (r *Router) get(ctx context.Context, to string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, to, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	if r.config.Token != "" {
		req.Header.Set("Authorization", "Bearer "+r.config.Token)
	}
	return r.client.Do(req)
}

// readRoutes reads an answer to a request sent at sent.
func readRoutes(answer *http.Response, sent time.Time) routesAnswer {
	body, err := io.ReadAll(io.LimitReader(answer.Body, routesBodyBytesMax+1))
	switch {
	case err != nil:
		return routesAnswer{err: fmt.Errorf("assignd: reading the routes answer: %w", err)}
	case len(body) > routesBodyBytesMax:
		return routesAnswer{err: fmt.Errorf("assignd: a routes answer over %d bytes", routesBodyBytesMax)}
	}
	status := answer.StatusCode
	if status == http.StatusOK {
		table, err := ParseRouteTable(body, sent)
		if err != nil {
			return routesAnswer{err: fmt.Errorf("assignd: %w", err)}
		}
		table.Waited = waited(answer.Header.Get("Assignd-Routes-Waited-Ms"))
		return routesAnswer{table: table}
	}
	message, code := cut(string(body), errorBodyLenMax), ""
	if e := parseErrorBody(body); e != nil {
		message, code = e.Error.Message, e.Error.Code
	}
	if status >= 400 && status < 500 && status != http.StatusTooManyRequests {
		return routesAnswer{refused: true, err: &RouterRefusal{Status: status, Code: code, Message: message}}
	}
	var retryAfter time.Duration
	if ms := retryAfterMs(answer.Header.Get("Retry-After")); ms != nil {
		retryAfter = time.Duration(*ms) * time.Millisecond
	}
	return routesAnswer{
		retryAfter: retryAfter,
		err:        fmt.Errorf("assignd: routes answered HTTP %d (%s): %s", status, code, message),
	}
}

// waited reads an answer's Assignd-Routes-Waited-Ms: none, or one that is
// not a count of milliseconds, is no wait.
func waited(header string) time.Duration {
	ms, err := strconv.ParseUint(strings.TrimSpace(header), 10, 64)
	if err != nil {
		return 0
	}
	if ms > routesWaitedMsMax {
		ms = routesWaitedMsMax
	}
	return time.Duration(ms) * time.Millisecond
}
