package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	assignd "github.com/assignd/assignd/clients/go"
)

// role is what a task's local state is doing.
type role int

const (
	// processing.
	active role = iota + 1
	// a learner or standby: replaying.
	warming
)

// rates are the simulation's speeds, in records per second.
type rates struct {
	// replay: what a learner or standby replays.
	replay uint64
	// process: what an active task appends.
	process uint64
}

// dirStore keeps changelogs (shared by every worker under state/changelog)
// and this worker's checkpoints (under state/<name or member id>) as
// decimal text files.
type dirStore struct {
	stateDir     string
	changelogLen uint64
	// owner is the checkpoints' folder name: the static name, or the
	// member id once joined.
	owner string
}

func taskFile(t assignd.Task) string { return fmt.Sprintf("%s-%d", t.Topic, t.Partition) }

func readOffset(path string) (uint64, bool) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(data)), 10, 64)
	return n, err == nil
}

// writeOffset writes through a temporary file, so a reader never sees half
// a number.
func writeOffset(path string, n uint64) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return
	}
	tmp := fmt.Sprintf("%s.tmp-%d", path, os.Getpid())
	if os.WriteFile(tmp, []byte(strconv.FormatUint(n, 10)), 0o644) == nil {
		_ = os.Rename(tmp, path)
	}
}

func (s *dirStore) end(t assignd.Task) uint64 {
	if n, ok := readOffset(filepath.Join(s.stateDir, "changelog", taskFile(t))); ok {
		return n
	}
	return s.changelogLen
}

func (s *dirStore) setEnd(t assignd.Task, n uint64) {
	writeOffset(filepath.Join(s.stateDir, "changelog", taskFile(t)), n)
}

func (s *dirStore) checkpoint(t assignd.Task) uint64 {
	if s.owner == "" {
		return 0
	}
	n, _ := readOffset(filepath.Join(s.stateDir, s.owner, taskFile(t)))
	return n
}

func (s *dirStore) setCheckpoint(t assignd.Task, n uint64) {
	if s.owner != "" {
		writeOffset(filepath.Join(s.stateDir, s.owner, taskFile(t)), n)
	}
}

// tasks simulates the state of one worker's tasks: an active task
// processes (appends to its changelog, checkpoint at the end); a learner or
// standby replays and reports end - checkpoint as its lag.
type tasks struct {
	mu    sync.Mutex
	store *dirStore
	rates rates
	roles map[assignd.Task]role
	// credit carries fractions of records between ticks.
	credit map[assignd.Task]float64
}

func newTasks(store *dirStore, r rates) *tasks {
	return &tasks{store: store, rates: r, roles: map[assignd.Task]role{}, credit: map[assignd.Task]float64{}}
}

func (s *tasks) setOwner(owner string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.store.owner = owner
}

// set gives tasks a role, or none (0): the state stays, as on disk.
func (s *tasks) set(list []assignd.Task, r role) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.setLocked(list, r)
}

func (s *tasks) setLocked(list []assignd.Task, r role) {
	for _, t := range list {
		if r == 0 {
			delete(s.roles, t)
			delete(s.credit, t)
		} else {
			s.roles[t] = r
		}
	}
}

// unset takes the role away from those of list that have it.
func (s *tasks) unset(list []assignd.Task, r role) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range list {
		if s.roles[t] == r {
			s.setLocked([]assignd.Task{t}, 0)
		}
	}
}

// lags is the lag source: the learners' and standbys' records behind.
func (s *tasks) lags(a assignd.Assignment) []assignd.LagRow {
	s.mu.Lock()
	defer s.mu.Unlock()
	rows := []assignd.LagRow{}
	for _, list := range [][]assignd.Task{a.Learner, a.Standby} {
		for _, t := range list {
			rows = append(rows, assignd.LagRow{Task: t, Lag: s.lag(t)})
		}
	}
	return rows
}

func (s *tasks) lag(t assignd.Task) uint64 {
	end, checkpoint := s.store.end(t), s.store.checkpoint(t)
	if checkpoint >= end {
		return 0
	}
	return end - checkpoint
}

// tick advances every task by elapsed: an active task for which
// mayProcess holds (the member's lease) appends to its changelog at the
// process rate and moves its checkpoint to the end; a learner or standby
// replays towards the end at the replay rate.
func (s *tasks) tick(elapsed time.Duration, mayProcess func(assignd.Task) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for t, r := range s.roles {
		end, checkpoint := s.store.end(t), s.store.checkpoint(t)
		switch {
		case r == active && mayProcess(t):
			end += s.takeCredit(t, float64(s.rates.process)*elapsed.Seconds())
			if end != s.store.end(t) {
				s.store.setEnd(t, end)
			}
			if checkpoint != end {
				s.store.setCheckpoint(t, end)
			}
		case r == warming && checkpoint < end:
			reached := checkpoint + s.takeCredit(t, float64(s.rates.replay)*elapsed.Seconds())
			if reached > end {
				reached = end
			}
			s.store.setCheckpoint(t, reached)
		}
	}
}

func (s *tasks) takeCredit(t assignd.Task, budget float64) uint64 {
	credit := s.credit[t] + budget
	whole := uint64(credit)
	s.credit[t] = credit - float64(whole)
	return whole
}
