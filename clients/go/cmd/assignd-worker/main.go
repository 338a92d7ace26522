// Command assignd-worker is a member with simulated stateful tasks, the
// same in every client language (clients/README.md, "The example
// worker"). Each task has a changelog shared by every worker through
// STATE_DIR/changelog/<topic>-<partition> (its end offset); an active task
// appends to its changelog while MayProcess holds, its checkpoint at the
// end; a learner or standby replays and reports its lag. It
// prints one JSON line per event on stdout; SIGTERM or SIGINT drains (a
// second one leaves at once).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	assignd "github.com/assignd/assignd/clients/go"
)

// tick is how often the simulation advances.
const tick = 100 * time.Millisecond

type options struct {
	url, group, name, topics, stateDir, token, endpoint string
	metadata                                            metadataFlag
	replayRate, changelogLen, processRate               uint64
	drainAfter                                          float64
	// loadPerTask is the synthetic load reported for every active task;
	// negative: none.
	loadPerTask float64
}

// metadataFlag is a repeatable --metadata KEY=VALUE.
type metadataFlag map[string]string

func (m metadataFlag) String() string { return fmt.Sprint(map[string]string(m)) }

func (m metadataFlag) Set(pair string) error {
	key, value, ok := strings.Cut(pair, "=")
	if !ok || key == "" {
		return fmt.Errorf("%q is not KEY=VALUE", pair)
	}
	m[key] = value
	return nil
}

func parseFlags() options {
	o := options{metadata: metadataFlag{}}
	flag.StringVar(&o.url, "url", "http://127.0.0.1:7070", "the host, or a cluster's bootstrap URLs (comma-separated)")
	flag.StringVar(&o.group, "group", "", "the group (required)")
	flag.StringVar(&o.name, "name", "", "a static member name (default: dynamic)")
	flag.StringVar(&o.topics, "topics", "", "comma-separated topics (required)")
	flag.Uint64Var(&o.replayRate, "replay-rate", 1000, "records/s a learner or standby replays")
	flag.Uint64Var(&o.changelogLen, "changelog-len", 10000, "a changelog's length when no worker wrote it yet")
	flag.Uint64Var(&o.processRate, "process-rate", 5, "records/s an active task appends")
	flag.StringVar(&o.stateDir, "state-dir", "worker-state", "changelogs and checkpoints")
	flag.Float64Var(&o.drainAfter, "drain-after", -1, "drain after S seconds")
	flag.StringVar(&o.token, "token", "", "the group's member token (default $ASSIGND_MEMBER_TOKEN)")
	flag.StringVar(&o.endpoint, "endpoint", "", "where this worker serves, published in the routing table")
	flag.Var(o.metadata, "metadata", "KEY=VALUE published with the endpoint (repeatable)")
	flag.Float64Var(&o.loadPerTask, "load-per-task", -1,
		"report this load for every active task (a synthetic load, in the group's load unit)")
	flag.Parse()
	if o.token == "" {
		o.token = os.Getenv("ASSIGND_MEMBER_TOKEN")
	}
	if o.group == "" || o.topics == "" {
		fmt.Fprintln(os.Stderr, "error: --group and --topics are required")
		flag.Usage()
		os.Exit(2)
	}
	return o
}

func main() {
	o := parseFlags()
	out := &output{w: os.Stdout}
	store := &dirStore{stateDir: o.stateDir, changelogLen: o.changelogLen, owner: o.name}
	sim := newTasks(store, rates{replay: o.replayRate, process: o.processRate})
	// Signals are caught before the member starts: one that comes early
	// still drains.
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)

	member, err := assignd.Start(context.Background(), assignd.Config{
		URLs:        []string{o.url},
		Group:       o.group,
		MemberName:  o.name,
		Topics:      splitComma(o.topics),
		MemberToken: o.token,
		Endpoint:    o.endpoint,
		Metadata:    o.metadata,
		Lags:        sim.lags,
	}, listener(out, sim, o.name != ""))
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(2)
	}
	os.Exit(run(member, sim, out, signals, o))
}

// listener prints every event and keeps the simulation's roles in step.
func listener(out *output, sim *tasks, static bool) assignd.Listener {
	return assignd.ListenerFuncs{
		OnEvent: func(e assignd.Event) {
			out.event(e)
			switch e.Type {
			case assignd.EventJoined:
				if !static {
					sim.setOwner(e.MemberID)
				}
			case assignd.EventLearnerStarted, assignd.EventStandbyStarted:
				sim.set(e.Tasks, warming)
			case assignd.EventLearnerStopped, assignd.EventStandbyStopped:
				// A copy that became active here stays active.
				sim.unset(e.Tasks, warming)
			}
		},
		OnAssigned: func(tasks []assignd.Task, _ bool) { sim.set(tasks, active) },
		// Processing happens under the simulation's lock: once the task
		// is out of the table it is stopped, and the member acks.
		OnRevoked: func(tasks []assignd.Task) { sim.set(tasks, 0) },
		OnLost:    func(tasks []assignd.Task) { sim.unset(tasks, active) },
	}
}

// run advances the simulation until the member stops, drains on the first
// signal (or after drainAfter seconds) and leaves on the second. It
// returns the exit code.
func run(member *assignd.Member, sim *tasks, out *output, signals <-chan os.Signal, o options) int {
	drainAfter := o.drainAfter
	ticker := time.NewTicker(tick)
	defer ticker.Stop()
	var drainTimer <-chan time.Time
	if drainAfter >= 0 {
		drainTimer = time.After(time.Duration(drainAfter * float64(time.Second)))
	}
	last := time.Now()
	signalled := 0
	leaving := false
	for {
		select {
		case now := <-ticker.C:
			if !leaving {
				sim.tick(now.Sub(last), member.MayProcess)
				reportLoad(member, o.loadPerTask)
			}
			last = now
		case <-drainTimer:
			member.Drain()
		case <-signals:
			signalled++
			if signalled == 1 {
				member.Drain()
			} else if !leaving {
				// Processing stops before the leave goes out.
				leaving = true
				go func() { _ = member.Leave(context.Background()) }()
			}
		case <-member.Done():
			reason := member.Reason()
			out.stopped(stoppedReason(reason, member.Err()))
			if reason == assignd.StopLeft || reason == assignd.StopDrained {
				return 0
			}
			return 1
		}
	}
}

// reportLoad sets load for every active task (sent once the host asks,
// and only what moved); negative: nothing.
func reportLoad(member *assignd.Member, load float64) {
	if load < 0 {
		return
	}
	loads := map[assignd.Task]float64{}
	for _, task := range member.Assignment().Active {
		loads[task] = load
	}
	if err := member.SetLoads(loads); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
	}
}

// splitComma splits a comma-separated list, dropping empty items.
func splitComma(list string) []string {
	var out []string
	for _, item := range strings.Split(list, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

func stoppedReason(reason assignd.StopReason, err error) string {
	if reason != "" {
		return string(reason)
	}
	return strings.TrimPrefix(fmt.Sprint(err), "assignd: ")
}
