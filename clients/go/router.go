package assignd

// The router: for everyone outside a group (a gateway, a producer, a
// scheduler), which member owns a key right now and at what address. It
// keeps the newest routing table by a blocking query to the host
// (docs/routing.md, "Watching") and answers lookups from its index without
// a round trip.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"
)

// RouterWaitDefault is how long the host holds a watch open while nothing
// changes, unless RouterConfig says otherwise; RouterWaitMax is the most
// the host accepts.
const (
	RouterWaitDefault = 20 * time.Second
	RouterWaitMax     = 20 * time.Second
)

// routerRequestSlack: a watch may take its wait plus this before it counts
// as lost.
const routerRequestSlack = 10 * time.Second

// ErrNoTable: no routing table yet (Ready has not returned nil).
var ErrNoTable = errors.New("assignd: no routing table yet")

// RouterConfig says where a router asks and what it is told.
type RouterConfig struct {
	// URLs are the host's base URLs; for a cluster, any nodes' (tried in
	// turn while none answers). An entry may hold several separated by
	// commas.
	URLs  []string
	Group string
	// Token is the group's reader token or the admin token, sent as a
	// bearer token.
	Token string
	// Wait is how long the host may hold a watch while nothing changes; 0
	// means RouterWaitDefault, at most RouterWaitMax. While the table held
	// promises an ownership bound, a watch waits at most half its Valid,
	// so that the next answer renews the bound before it runs out.
	Wait time.Duration
	// RequestTimeout bounds one request; 0 means Wait + 10 s.
	RequestTimeout time.Duration
	// OnChange, if set, is called with each new table after its epoch
	// changed, one call at a time in the order the tables were taken, on a
	// goroutine of the router: it must return quickly.
	OnChange func(*RouteTable)
	// Logger takes the router's logs; nil logs at info and above to stderr.
	Logger Logger
}

func (c RouterConfig) withDefaults() (RouterConfig, error) {
	if c.Wait == 0 {
		c.Wait = RouterWaitDefault
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = c.Wait + routerRequestSlack
	}
	if c.Logger == nil {
		c.Logger = NewStdLogger()
	}
	c.URLs = SplitURLs(c.URLs...)
	switch {
	case len(c.URLs) == 0:
		return c, errors.New("assignd: no host URL")
	case c.Group == "":
		return c, errors.New("assignd: the group name is empty")
	case c.Wait < 0 || c.RequestTimeout < 0:
		return c, errors.New("assignd: the wait and the request timeout must be above zero")
	case c.Wait > RouterWaitMax:
		return c, fmt.Errorf("assignd: the host holds a watch at most %v, not %v", RouterWaitMax, c.Wait)
	case c.Token != "" && !visibleASCII(c.Token):
		return c, errors.New("assignd: a token must be visible ASCII characters")
	}
	return c, nil
}

// Router keeps a group's newest routing table and answers who owns a key.
// Lookups read the table in force without a lock; its methods are safe for
// concurrent use. It runs until Close or until the context given to
// StartRouter is done.
type Router struct {
	config RouterConfig
	log    Logger
	client *http.Client
	routes []*url.URL
	// at is the index in routes of the URL asked now.
	at atomic.Int64

	table     atomic.Pointer[RouteTable]
	misroutes atomic.Uint64
	// refreshing: a refresh asked by Misrouted is under way.
	refreshing atomic.Bool

	// offerMu orders the tables taken and the OnChange calls.
	offerMu sync.Mutex

	mu sync.Mutex
	// closed: Close was called; no refresh starts after it.
	closed bool
	// lastErr is the last request's failure, nil after an answer.
	lastErr error
	// outcome is closed (and replaced) whenever a request ends.
	outcome chan struct{}

	ctx     context.Context
	cancel  context.CancelFunc
	workers sync.WaitGroup
}

// StartRouter starts watching config.Group's routing table and returns at
// once; Ready waits for the first table.
func StartRouter(ctx context.Context, config RouterConfig) (*Router, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	config, err := config.withDefaults()
	if err != nil {
		return nil, err
	}
	r := &Router{config: config, log: config.Logger, outcome: make(chan struct{})}
	for _, base := range config.URLs {
		u, err := groupURL(base, config.Group, "routes")
		if err != nil {
			return nil, fmt.Errorf("assignd: %w", err)
		}
		r.routes = append(r.routes, u)
	}
	r.client = &http.Client{
		// Followed here, so the token goes along to another node.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	r.ctx, r.cancel = context.WithCancel(ctx)
	r.workers.Add(1)
	go r.run()
	return r, nil
}

// Ready waits for the first table. It fails at once when the host refused
// the router (a wrong token, an unknown group: 401, 403, 404), and when ctx
// is done first, with the last failure if there was one.
func (r *Router) Ready(ctx context.Context) error {
	for {
		r.mu.Lock()
		outcome, lastErr := r.outcome, r.lastErr
		r.mu.Unlock()
		if r.table.Load() != nil {
			return nil
		}
		var refusal *RouterRefusal
		if errors.As(lastErr, &refusal) {
			return refusal
		}
		select {
		case <-outcome:
		case <-r.ctx.Done():
			return fmt.Errorf("assignd: the router stopped before its first table: %w", r.ctx.Err())
		case <-ctx.Done():
			if lastErr != nil {
				return fmt.Errorf("assignd: no routing table yet (%v): %w", lastErr, ctx.Err())
			}
			return fmt.Errorf("assignd: no routing table yet: %w", ctx.Err())
		}
	}
}

// Table is the table in force, or nil before the first.
func (r *Router) Table() *RouteTable { return r.table.Load() }

// OwnerOf is the route of key in topic by the table in force.
func (r *Router) OwnerOf(topic string, key []byte) (Route, error) {
	t := r.table.Load()
	if t == nil {
		return Route{}, ErrNoTable
	}
	return t.OwnerOf(topic, key)
}

// OwnerOfString is OwnerOf with key's UTF-8 bytes.
func (r *Router) OwnerOfString(topic, key string) (Route, error) {
	return r.OwnerOf(topic, []byte(key))
}

// OwnerOfPartition is the route of one task by the table in force.
func (r *Router) OwnerOfPartition(topic string, partition uint32) (Route, error) {
	t := r.table.Load()
	if t == nil {
		return Route{}, ErrNoTable
	}
	return t.OwnerOfPartition(topic, partition)
}

// Misrouted: the owner of route answered "not mine". It is counted and,
// when route came from the newest table held, a newer one is asked for at
// once (besides the watch).
func (r *Router) Misrouted(route Route) {
	r.misroutes.Add(1)
	held := r.table.Load()
	if held == nil || route.Epoch < held.Epoch || !r.refreshing.CompareAndSwap(false, true) {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed || r.ctx.Err() != nil {
		r.refreshing.Store(false)
		return
	}
	r.workers.Add(1)
	go func() {
		defer r.workers.Done()
		defer r.refreshing.Store(false)
		if answer := r.fetch(r.at.Load(), nil, 0); answer.table != nil {
			r.offer(answer.table, nil)
		}
	}()
}

// Misroutes counts the calls to Misrouted.
func (r *Router) Misroutes() uint64 { return r.misroutes.Load() }

// Err is the last request's failure, or nil once the host answered.
func (r *Router) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lastErr
}

// Close stops the router and waits for its goroutines. The last table
// stays readable.
func (r *Router) Close() {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.cancel()
	r.workers.Wait()
}

// offer takes table if it is newer than the one held, or older than the
// after_epoch of the watch it answers (the host answers a lower epoch only
// when the router's came from elsewhere, e.g. a node that lost its
// records). The same epoch again moves the bound on, if the host read it
// later.
func (r *Router) offer(table *RouteTable, after *uint64) {
	r.offerMu.Lock()
	defer r.offerMu.Unlock()
	held := r.table.Load()
	switch {
	case held == nil || table.Epoch > held.Epoch || (after != nil && table.Epoch < *after):
		r.table.Store(table)
		if r.config.OnChange != nil {
			r.config.OnChange(table)
		}
	case table.Epoch == held.Epoch && table.readAt().After(held.readAt()):
		renewed := *held
		renewed.SentAt, renewed.Waited = table.SentAt, table.Waited
		r.table.Store(&renewed)
	}
}

// ended records a request's outcome and wakes Ready.
func (r *Router) ended(err error) {
	r.mu.Lock()
	r.lastErr = err
	close(r.outcome)
	r.outcome = make(chan struct{})
	r.mu.Unlock()
}
