package assignd

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode"
)

// The host's limits on a member's endpoint and metadata (docs/routing.md,
// "Members' endpoints"); past them a heartbeat is refused.
const (
	EndpointBytesMax      = 256
	MetadataPairsMax      = 16
	MetadataKeyBytesMax   = 64
	MetadataValueBytesMax = 256
)

// DefaultRequestTimeout is how long one heartbeat may take before it
// counts as lost, unless Config says otherwise.
const DefaultRequestTimeout = 5 * time.Second

// LagSource reports how far behind the application's state is: [task,
// lag] rows for the learner and standby tasks of the assignment, and any
// other task whose state the member keeps, if it wants the host to know.
// It is called before every heartbeat; the rows replace the previous
// report. A learner at or under the group's acceptable recovery lag counts
// as caught up, and its task moves here.
type LagSource func(Assignment) []LagRow

// HeartbeatObserver sees one heartbeat's round trip (joins and leaves
// included): how long it took, and its failure, or nil when the host
// answered 200.
type HeartbeatObserver func(latency time.Duration, failure *Failure)

// Config is a member's identity and subscription.
type Config struct {
	// URLs are the host's base URLs, e.g. http://127.0.0.1:7070; for a
	// cluster, any nodes' (bootstrap URLs, tried in turn while none
	// answers). An entry may hold several separated by commas.
	URLs  []string
	Group string
	// MemberName makes a static member (KIP-345): a restart with the same
	// name within the registration timeout gets the same tasks back. ""
	// joins as a dynamic member.
	MemberName string
	// Topics to subscribe to; at least one.
	Topics []string
	// Rack is "" for none.
	Rack string
	// Capacity is this member's relative weight; 0 means 1.
	Capacity uint32
	// Endpoint is where this member serves (a URL or host:port), published
	// in the group's routing table for routers to send its keys to; ""
	// publishes none. Member.SetEndpoint changes it at run time.
	Endpoint string
	// Metadata is published with the endpoint: small string pairs (zone,
	// version, …), at most MetadataPairsMax.
	Metadata map[string]string
	// LoadCapacity is the load this member can carry, in the group's load
	// unit, reported when the host asks for loads; 0 reports none.
	// Member.SetLoadCapacity changes it at run time.
	LoadCapacity float64
	// LoadThreshold is how far (relative) a task's load may move from the
	// value the host has before it is sent again; 0 means
	// LoadThresholdDefault (10 %).
	LoadThreshold float64
	// MemberToken is the group's member token, sent as a bearer token on
	// every heartbeat; needed when the group's config has one.
	MemberToken string
	// RequestTimeout bounds one heartbeat; 0 means DefaultRequestTimeout.
	RequestTimeout time.Duration
	// Lags is called before every heartbeat; nil reports no lags.
	Lags LagSource
	// OnHeartbeat, if set, is told of every heartbeat; for load generators
	// and metrics. It is called on the goroutine that sent the heartbeat,
	// before the machine sees the outcome, so it must be quick; members
	// that share one call it concurrently.
	OnHeartbeat HeartbeatObserver
	// Logger takes the member's logs; nil logs at info and above to
	// stderr through the standard log package.
	Logger Logger
}

// SplitURLs splits comma-separated base URLs, dropping empty ones.
func SplitURLs(urls ...string) []string {
	var out []string
	for _, entry := range urls {
		for _, u := range strings.Split(entry, ",") {
			if u = strings.TrimSpace(u); u != "" {
				out = append(out, u)
			}
		}
	}
	return out
}

// withDefaults fills the zero fields and checks what can be checked
// without asking the host.
func (c Config) withDefaults() (Config, error) {
	if c.Capacity == 0 {
		c.Capacity = 1
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = DefaultRequestTimeout
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
	case len(c.Topics) == 0:
		return c, errors.New("assignd: a member must subscribe to at least one topic")
	case c.RequestTimeout < 0:
		return c, errors.New("assignd: the request timeout must be above zero")
	case c.MemberToken != "" && !visibleASCII(c.MemberToken):
		return c, errors.New("assignd: a member token must be visible ASCII characters")
	case c.LoadCapacity != 0 && !ValidLoadCapacity(c.LoadCapacity):
		return c, fmt.Errorf("assignd: a load capacity must be above 0 and at most 1e15, not %v", c.LoadCapacity)
	case c.LoadThreshold < 0 || math.IsNaN(c.LoadThreshold) || math.IsInf(c.LoadThreshold, 0):
		return c, fmt.Errorf("assignd: the load threshold must be a finite number, 0 or more, not %v", c.LoadThreshold)
	}
	return c, checkEndpoint(c.Endpoint, c.Metadata)
}

// checkEndpoint checks an endpoint and its metadata against the host's
// limits, so that a mistake fails where it is made rather than as the
// host's refusal of a heartbeat.
func checkEndpoint(endpoint string, metadata map[string]string) error {
	if len(endpoint) > EndpointBytesMax || !visibleASCII(endpoint) {
		return fmt.Errorf("assignd: an endpoint must be 1 to %d bytes of visible ASCII: %q", EndpointBytesMax, endpoint)
	}
	if len(metadata) > MetadataPairsMax {
		return fmt.Errorf("assignd: at most %d metadata pairs, not %d", MetadataPairsMax, len(metadata))
	}
	for key, value := range metadata {
		switch {
		case key == "" || len(key) > MetadataKeyBytesMax:
			return fmt.Errorf("assignd: a metadata key must be 1 to %d bytes: %q", MetadataKeyBytesMax, key)
		case len(value) > MetadataValueBytesMax:
			return fmt.Errorf("assignd: a metadata value must be at most %d bytes: %q", MetadataValueBytesMax, key)
		case strings.IndexFunc(key+value, unicode.IsControl) >= 0:
			return fmt.Errorf("assignd: metadata must be visible characters: %q", key)
		}
	}
	return nil
}

func visibleASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}
