package assignd

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
)

// TasksPerListMax is the most tasks one list may hold once its ranges are
// expanded (the host's limit on a group's tasks): a range is cheap to send,
// not to expand, so a longer list is refused before it is expanded.
const TasksPerListMax = 1_000_000

// TaskRanges is a task list written compact: each run of consecutive
// partitions of a topic as one range [topic, first, last], a lone task as
// [topic, partition]. Runs are found in the order given, so sorted tasks
// give the fewest items. It reads either form, item by item.
type TaskRanges []Task

// MarshalJSON writes the list compact ([] when empty).
func (r TaskRanges) MarshalJSON() ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte('[')
	for i := 0; i < len(r); {
		j := i
		for j+1 < len(r) && r[j+1].Topic == r[i].Topic &&
			r[j].Partition != math.MaxUint32 && r[j+1].Partition == r[j].Partition+1 {
			j++
		}
		if i > 0 {
			buf.WriteByte(',')
		}
		topic, err := json.Marshal(r[i].Topic)
		if err != nil {
			return nil, err
		}
		if i == j {
			fmt.Fprintf(&buf, "[%s,%d]", topic, r[i].Partition)
		} else {
			fmt.Fprintf(&buf, "[%s,%d,%d]", topic, r[i].Partition, r[j].Partition)
		}
		i = j + 1
	}
	buf.WriteByte(']')
	return buf.Bytes(), nil
}

// UnmarshalJSON reads items [topic, partition] or [topic, first, last]
// and expands the ranges; null reads as an empty list.
func (r *TaskRanges) UnmarshalJSON(data []byte) error {
	var items []json.RawMessage
	if err := json.Unmarshal(data, &items); err != nil {
		return fmt.Errorf("a task list: %w", err)
	}
	tasks := make([]Task, 0, len(items))
	for _, item := range items {
		first, last, topic, err := readItem(item)
		if err != nil {
			return err
		}
		if uint64(len(tasks))+uint64(last-first)+1 > TasksPerListMax {
			return fmt.Errorf("more than %d tasks in one list", TasksPerListMax)
		}
		for p := uint64(first); p <= uint64(last); p++ {
			tasks = append(tasks, Task{Topic: topic, Partition: uint32(p)})
		}
	}
	*r = tasks
	return nil
}

// readItem reads [topic, partition] (as first = last = partition) or
// [topic, first, last].
func readItem(data []byte) (first, last uint32, topic string, err error) {
	var parts []json.RawMessage
	if err = json.Unmarshal(data, &parts); err != nil {
		return 0, 0, "", fmt.Errorf("a task item is [topic, partition] or [topic, first, last]: %w", err)
	}
	if len(parts) != 2 && len(parts) != 3 {
		return 0, 0, "", fmt.Errorf("a task item has 2 or 3 elements, not %d", len(parts))
	}
	if err = json.Unmarshal(parts[0], &topic); err != nil {
		return 0, 0, "", fmt.Errorf("a task's topic: %w", err)
	}
	if err = json.Unmarshal(parts[1], &first); err != nil {
		return 0, 0, "", fmt.Errorf("a task's partition: %w", err)
	}
	last = first
	if len(parts) == 3 {
		if err = json.Unmarshal(parts[2], &last); err != nil {
			return 0, 0, "", fmt.Errorf("a range's last partition: %w", err)
		}
		if first > last {
			return 0, 0, "", fmt.Errorf("the range [%q, %d, %d] ends before it starts", topic, first, last)
		}
	}
	return first, last, topic, nil
}
