// Command assignd-bench starts many dynamic members of the Go client in one
// process against a running host, and measures the heartbeats the host
// answers and the CPU time the members cost. Its flags and its one JSON
// line of output are the same for every client's bench driver:
//
//	assignd-bench --url URL --group G --members N --topics orders --duration S [--warmup S]
//
// The group must exist; its heartbeat interval sets the load.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	assignd "github.com/assignd/assignd/clients/go"
)

const (
	joinTimeout  = 60 * time.Second
	leaveTimeout = 10 * time.Second
	// leavesAtOnce bounds the leaves in flight at the end.
	leavesAtOnce = 64
)

type result struct {
	Client               string  `json:"client"`
	Members              int     `json:"members"`
	Seconds              float64 `json:"seconds"`
	Heartbeats           int64   `json:"heartbeats"`
	Errors               int64   `json:"errors"`
	HeartbeatsPerS       float64 `json:"heartbeats_per_s"`
	CPUS                 float64 `json:"cpu_s"`
	CPUMsPerMemberPerMin float64 `json:"cpu_ms_per_member_per_min"`
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// cpuSeconds is the process's user and system CPU time so far.
func cpuSeconds() float64 {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		log.Fatalf("getrusage: %v", err)
	}
	return float64(u.Utime.Nano()+u.Stime.Nano()) / 1e9
}

func main() {
	log.SetFlags(0)
	url := flag.String("url", "http://127.0.0.1:7070", "the host, or a cluster's bootstrap URLs (comma-separated)")
	group := flag.String("group", "", "the group (required; it must exist)")
	members := flag.Int("members", 1, "dynamic members to start")
	topics := flag.String("topics", "", "comma-separated topics (required)")
	duration := flag.Float64("duration", 10, "seconds to measure")
	warmup := flag.Float64("warmup", 2, "seconds to wait after every member joined")
	flag.Parse()
	if *group == "" || *topics == "" || *members < 1 || *duration <= 0 || *warmup < 0 {
		fmt.Fprintln(os.Stderr, "error: --group, --topics, --members >= 1 and --duration > 0 are required")
		os.Exit(2)
	}

	var measuring atomic.Bool
	var ok, failed atomic.Int64
	joined := make(chan struct{}, *members)
	config := assignd.Config{
		URLs:        []string{*url},
		Group:       *group,
		Topics:      strings.Split(*topics, ","),
		MemberToken: os.Getenv("ASSIGND_MEMBER_TOKEN"),
		Logger:      &assignd.StdLogger{Logger: log.New(os.Stderr, "", log.LstdFlags), Min: assignd.LevelError},
		OnHeartbeat: func(_ time.Duration, failure *assignd.Failure) {
			switch {
			case !measuring.Load():
			case failure == nil:
				ok.Add(1)
			default:
				failed.Add(1)
			}
		},
	}
	all := make([]*assignd.Member, *members)
	for i := range all {
		var once sync.Once
		listener := assignd.ListenerFuncs{OnEvent: func(e assignd.Event) {
			if e.Type == assignd.EventJoined {
				once.Do(func() { joined <- struct{}{} })
			}
		}}
		m, err := assignd.Start(context.Background(), config, listener)
		if err != nil {
			fmt.Fprintln(os.Stderr, "error:", err)
			os.Exit(2)
		}
		all[i] = m
	}

	deadline := time.After(joinTimeout)
	for n := 0; n < *members; n++ {
		select {
		case <-joined:
		case <-deadline:
			leaveAll(all)
			fmt.Fprintf(os.Stderr, "error: %d of %d members joined within %.0f s\n", n, *members, joinTimeout.Seconds())
			os.Exit(1)
		}
	}
	time.Sleep(seconds(*warmup))

	start, cpuStart := time.Now(), cpuSeconds()
	measuring.Store(true)
	time.Sleep(seconds(*duration))
	measuring.Store(false)
	wall, cpu := time.Since(start).Seconds(), cpuSeconds()-cpuStart

	leaveAll(all)
	r := result{
		Client: "go", Members: *members, Seconds: wall,
		Heartbeats: ok.Load(), Errors: failed.Load(),
		HeartbeatsPerS:       float64(ok.Load()) / wall,
		CPUS:                 cpu,
		CPUMsPerMemberPerMin: cpu * 1000 / float64(*members) / (wall / 60),
	}
	line, _ := json.Marshal(r)
	fmt.Println(string(line))
}

// leaveAll leaves every member, leavesAtOnce at a time, each within
// leaveTimeout.
func leaveAll(all []*assignd.Member) {
	slots := make(chan struct{}, leavesAtOnce)
	var wg sync.WaitGroup
	for _, m := range all {
		wg.Add(1)
		slots <- struct{}{}
		go func(m *assignd.Member) {
			defer func() { <-slots; wg.Done() }()
			ctx, cancel := context.WithTimeout(context.Background(), leaveTimeout)
			defer cancel()
			_ = m.Leave(ctx)
		}(m)
	}
	wg.Wait()
}
