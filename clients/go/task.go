package assignd

import (
	"encoding/json"
	"fmt"
	"sort"
)

// Task is one partition of one topic. In JSON it is [topic, partition].
type Task struct {
	Topic     string
	Partition uint32
}

// String writes the task as topic/partition, as the host's logs do.
func (t Task) String() string { return fmt.Sprintf("%s/%d", t.Topic, t.Partition) }

// Less orders tasks by topic (byte order), then partition: the order of
// every task list the machine hands out.
func (t Task) Less(o Task) bool {
	if t.Topic != o.Topic {
		return t.Topic < o.Topic
	}
	return t.Partition < o.Partition
}

// MarshalJSON writes [topic, partition].
func (t Task) MarshalJSON() ([]byte, error) {
	return json.Marshal([]interface{}{t.Topic, t.Partition})
}

// UnmarshalJSON reads [topic, partition].
func (t *Task) UnmarshalJSON(data []byte) error {
	first, last, topic, err := readItem(data)
	if err != nil {
		return err
	}
	if first != last {
		return fmt.Errorf("a task is [topic, partition], not a range")
	}
	*t = Task{Topic: topic, Partition: first}
	return nil
}

// SortTasks sorts tasks in place in the machine's order and returns them.
func SortTasks(tasks []Task) []Task {
	sort.Slice(tasks, func(i, j int) bool { return tasks[i].Less(tasks[j]) })
	return tasks
}

// taskSet is a set of tasks; lists leave it sorted.
type taskSet map[Task]struct{}

func newTaskSet(tasks ...Task) taskSet {
	s := make(taskSet, len(tasks))
	for _, t := range tasks {
		s[t] = struct{}{}
	}
	return s
}

func (s taskSet) has(t Task) bool { _, ok := s[t]; return ok }

func (s taskSet) add(t Task) { s[t] = struct{}{} }

func (s taskSet) addAll(o taskSet) {
	for t := range o {
		s[t] = struct{}{}
	}
}

func (s taskSet) removeAll(o taskSet) {
	for t := range o {
		delete(s, t)
	}
}

func (s taskSet) clone() taskSet {
	c := make(taskSet, len(s))
	c.addAll(s)
	return c
}

// list returns the tasks sorted, never nil (an empty list is [] in JSON).
func (s taskSet) list() []Task {
	out := make([]Task, 0, len(s))
	for t := range s {
		out = append(out, t)
	}
	return SortTasks(out)
}

// filter returns the tasks of s for which keep holds.
func (s taskSet) filter(keep func(Task) bool) taskSet {
	out := taskSet{}
	for t := range s {
		if keep(t) {
			out.add(t)
		}
	}
	return out
}
