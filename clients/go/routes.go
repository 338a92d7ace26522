package assignd

// The routing table (GET /v1/groups/{group}/routes, docs/routing.md) as a
// router holds it: the host's body, read once into an index that answers a
// lookup without scanning the task lists (per topic, the owner of each
// partition as an index into the members). A RouteTable never changes once
// built, so any number of goroutines read it without a lock.

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"
)

// Why a lookup gives no route.
var (
	// ErrUnknownTopic: the table has no such topic.
	ErrUnknownTopic = errors.New("assignd: the routing table has no such topic")
	// ErrPartitionOutOfRange: the topic has fewer partitions.
	ErrPartitionOutOfRange = errors.New("assignd: the partition is past the topic's partition count")
)

// noMember marks a partition that nobody owns (or that moves to nobody).
const noMember int32 = -1

// RouteMember is a member as the routing table shows it.
type RouteMember struct {
	MemberID string
	// MemberName is a static member's name; "" for a dynamic member.
	MemberName string
	// Endpoint is where it serves, as it published it; "" if it did not.
	Endpoint string
	// Metadata is what it published besides; shared by every route of the
	// table: read it, do not change it.
	Metadata map[string]string
}

// Route is where one task of a topic goes, as one table says.
type Route struct {
	Topic     string
	Partition uint32
	// Owner processes the task now; nil: nobody.
	Owner *RouteMember
	// MovingTo is the member the task is about to move to; nil if it is
	// not moving (or moves to nobody yet).
	MovingTo *RouteMember
	// Learners warm the task up to take it over; Standbys keep hot copies.
	// Both sorted by member id.
	Learners []RouteMember
	Standbys []RouteMember
	// Epoch is the table's epoch: pass the route to Router.Misrouted when
	// its owner answers "not mine".
	Epoch uint64
	// Fresh: the host promised, when it sent the table, that no task
	// listed active and not moving gets another owner until now; past it,
	// the route is probably right but without the promise.
	Fresh bool
}

// RouteTable is one routing table and its index. Its fields and methods
// are safe for concurrent use; it never changes.
type RouteTable struct {
	Group string
	// Epoch rises with every change to what the table says and never goes
	// back.
	Epoch uint64
	// GroupEpoch is the group epoch (the targets' counter), for reference.
	GroupEpoch uint64
	// Valid is the ownership bound: for this long after SentAt plus
	// Waited, no task listed active and not moving gets another active
	// owner.
	Valid time.Duration
	// SentAt is when the router sent the request this table answered (on
	// the monotonic clock).
	SentAt time.Time
	// Waited is how long that request waited at the host before the table
	// was read (its Assignd-Routes-Waited-Ms): the host's promise counts
	// from then.
	Waited time.Duration
	// Topics holds each topic's partition count.
	Topics map[string]uint32
	// Members is every member of the group, sorted by member id.
	Members []RouteMember
	topics  map[string]*topicIndex
}

// topicIndex is one topic's partitions: owner and movingTo hold indices
// into the table's members (noMember for none); learners and standbys are
// sparse.
type topicIndex struct {
	owner    []int32
	movingTo []int32
	learners map[uint32][]int32
	standbys map[uint32][]int32
}

// Fresh tells whether the ownership bound still holds now.
func (t *RouteTable) Fresh() bool { return t.freshAt(time.Now()) }

func (t *RouteTable) freshAt(now time.Time) bool { return now.Before(t.FreshUntil()) }

// FreshUntil is the end of the ownership bound: the send time, plus how
// long the request waited at the host, plus Valid.
func (t *RouteTable) FreshUntil() time.Time { return t.readAt().Add(t.Valid) }

// readAt is no sooner than when the host read the table.
func (t *RouteTable) readAt() time.Time { return t.SentAt.Add(t.Waited) }

// Age is how long ago the request this table answered was sent.
func (t *RouteTable) Age() time.Duration { return time.Since(t.SentAt) }

// OwnerOf is the route of key (hashed as Kafka's default partitioner does)
// in topic.
func (t *RouteTable) OwnerOf(topic string, key []byte) (Route, error) {
	count, known := t.Topics[topic]
	if !known || count == 0 {
		return Route{}, fmt.Errorf("%w: %q", ErrUnknownTopic, topic)
	}
	return t.routeAt(topic, PartitionForKey(key, count), time.Now())
}

// OwnerOfString is OwnerOf with key's UTF-8 bytes.
func (t *RouteTable) OwnerOfString(topic, key string) (Route, error) {
	return t.OwnerOf(topic, []byte(key))
}

// OwnerOfPartition is the route of one task.
func (t *RouteTable) OwnerOfPartition(topic string, partition uint32) (Route, error) {
	return t.routeAt(topic, partition, time.Now())
}

func (t *RouteTable) routeAt(topic string, partition uint32, now time.Time) (Route, error) {
	index, known := t.topics[topic]
	if !known {
		return Route{}, fmt.Errorf("%w: %q", ErrUnknownTopic, topic)
	}
	if partition >= uint32(len(index.owner)) {
		return Route{}, fmt.Errorf("%w: %s/%d of %d", ErrPartitionOutOfRange, topic, partition, len(index.owner))
	}
	route := Route{
		Topic: topic, Partition: partition, Epoch: t.Epoch, Fresh: t.freshAt(now),
		Owner:    t.member(index.owner[partition]),
		Learners: t.members(index.learners[partition]),
		Standbys: t.members(index.standbys[partition]),
	}
	if index.movingTo != nil {
		route.MovingTo = t.member(index.movingTo[partition])
	}
	return route, nil
}

func (t *RouteTable) member(i int32) *RouteMember {
	if i == noMember {
		return nil
	}
	m := t.Members[i]
	return &m
}

func (t *RouteTable) members(indices []int32) []RouteMember {
	out := make([]RouteMember, len(indices))
	for i, index := range indices {
		out[i] = t.Members[index]
	}
	return out
}

// routesBody is the host's JSON; task lists stay ranges until indexed.
type routesBody struct {
	Group      string                     `json:"group"`
	Epoch      uint64                     `json:"epoch"`
	GroupEpoch uint64                     `json:"group_epoch"`
	ValidMs    uint64                     `json:"valid_ms"`
	Topics     map[string]uint32          `json:"topics"`
	Members    map[string]routeMemberBody `json:"members"`
	Active     map[string]rangeList       `json:"active"`
	Learner    map[string]rangeList       `json:"learner"`
	Standby    map[string]rangeList       `json:"standby"`
	Moving     []struct {
		From  *string   `json:"from"`
		To    *string   `json:"to"`
		Tasks rangeList `json:"tasks"`
	} `json:"moving"`
}

type routeMemberBody struct {
	MemberName *string           `json:"member_name"`
	Endpoint   *string           `json:"endpoint"`
	Metadata   map[string]string `json:"metadata"`
}

// taskRange is [topic, first, last], both included.
type taskRange struct {
	topic       string
	first, last uint32
}

// rangeList reads a task list without expanding its ranges.
type rangeList []taskRange

// UnmarshalJSON reads items [topic, partition] or [topic, first, last].
func (r *rangeList) UnmarshalJSON(data []byte) error {
	var items []json.RawMessage
	if err := json.Unmarshal(data, &items); err != nil {
		return fmt.Errorf("a task list: %w", err)
	}
	out := make(rangeList, 0, len(items))
	for _, item := range items {
		first, last, topic, err := readItem(item)
		if err != nil {
			return err
		}
		out = append(out, taskRange{topic: topic, first: first, last: last})
	}
	*r = out
	return nil
}

// ParseRouteTable reads a routes answer's body and indexes it; sentAt is
// when the request it answers was sent. Its Waited is zero: set it to the
// answer's Assignd-Routes-Waited-Ms.
func ParseRouteTable(data []byte, sentAt time.Time) (*RouteTable, error) {
	var body routesBody
	if err := json.Unmarshal(data, &body); err != nil {
		return nil, fmt.Errorf("routing table: %w", err)
	}
	return body.index(sentAt)
}

func (b *routesBody) index(sentAt time.Time) (*RouteTable, error) {
	total := uint64(0)
	for _, count := range b.Topics {
		total += uint64(count)
	}
	if total > TasksPerListMax {
		return nil, fmt.Errorf("routing table: %d tasks, more than the %d a group may have", total, TasksPerListMax)
	}
	t := &RouteTable{
		Group: b.Group, Epoch: b.Epoch, GroupEpoch: b.GroupEpoch, SentAt: sentAt,
		Valid: time.Duration(b.ValidMs) * time.Millisecond, Topics: b.Topics,
		topics: make(map[string]*topicIndex, len(b.Topics)),
	}
	if t.Topics == nil {
		t.Topics = map[string]uint32{}
	}
	ids := t.indexMembers(b)
	for topic, count := range t.Topics {
		index := &topicIndex{owner: make([]int32, count)}
		for p := range index.owner {
			index.owner[p] = noMember
		}
		t.topics[topic] = index
	}
	for _, id := range sortedKeys(b.Active) {
		t.eachTask(b.Active[id], func(index *topicIndex, p uint32) { index.owner[p] = ids[id] })
	}
	for _, id := range sortedKeys(b.Learner) {
		t.eachTask(b.Learner[id], func(index *topicIndex, p uint32) { index.learners = addSparse(index.learners, p, ids[id]) })
	}
	for _, id := range sortedKeys(b.Standby) {
		t.eachTask(b.Standby[id], func(index *topicIndex, p uint32) { index.standbys = addSparse(index.standbys, p, ids[id]) })
	}
	for _, move := range b.Moving {
		to := noMember
		if move.To != nil {
			to = t.memberIndex(ids, *move.To)
		}
		t.eachTask(move.Tasks, func(index *topicIndex, p uint32) { index.setMovingTo(p, to) })
	}
	return t, nil
}

// indexMembers lists the members sorted by id (so every list of indices
// sorted by index is sorted by id) and returns each id's index, members
// named only in a task list included.
func (t *RouteTable) indexMembers(b *routesBody) map[string]int32 {
	seen := map[string]struct{}{}
	for id := range b.Members {
		seen[id] = struct{}{}
	}
	for _, lists := range []map[string]rangeList{b.Active, b.Learner, b.Standby} {
		for id := range lists {
			seen[id] = struct{}{}
		}
	}
	ids := make(map[string]int32, len(seen))
	for _, id := range sortedKeys(seen) {
		body := b.Members[id]
		m := RouteMember{MemberID: id, Metadata: body.Metadata}
		if body.MemberName != nil {
			m.MemberName = *body.MemberName
		}
		if body.Endpoint != nil {
			m.Endpoint = *body.Endpoint
		}
		if m.Metadata == nil {
			m.Metadata = map[string]string{}
		}
		ids[id] = int32(len(t.Members))
		t.Members = append(t.Members, m)
	}
	return ids
}

// memberIndex is id's index, adding a member the table names only in a
// move.
func (t *RouteTable) memberIndex(ids map[string]int32, id string) int32 {
	if i, ok := ids[id]; ok {
		return i
	}
	ids[id] = int32(len(t.Members))
	t.Members = append(t.Members, RouteMember{MemberID: id, Metadata: map[string]string{}})
	return ids[id]
}

// eachTask calls f for every task of list that the table's topics hold;
// tasks of other topics or past a topic's count are ignored.
func (t *RouteTable) eachTask(list rangeList, f func(*topicIndex, uint32)) {
	for _, r := range list {
		index, ok := t.topics[r.topic]
		if !ok {
			continue
		}
		count := uint64(len(index.owner))
		for p := uint64(r.first); p <= uint64(r.last) && p < count; p++ {
			f(index, uint32(p))
		}
	}
}

func (index *topicIndex) setMovingTo(p uint32, to int32) {
	if index.movingTo == nil {
		index.movingTo = make([]int32, len(index.owner))
		for i := range index.movingTo {
			index.movingTo[i] = noMember
		}
	}
	index.movingTo[p] = to
}

// addSparse adds member to partition p's list, kept sorted.
func addSparse(lists map[uint32][]int32, p uint32, member int32) map[uint32][]int32 {
	if lists == nil {
		lists = map[uint32][]int32{}
	}
	for _, held := range lists[p] {
		if held == member {
			return lists
		}
	}
	list := append(lists[p], member)
	sort.Slice(list, func(i, j int) bool { return list[i] < list[j] })
	lists[p] = list
	return lists
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
