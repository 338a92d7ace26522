// js-sticky: a sticky, capacity-weighted assignor for assignd, in JavaScript.
//
// 1. Every task stays with its current active owner while that member still
//    subscribes to the task's topic and is within its fair share:
//      share(m) = capacity(m) × Σ over m's topics t of
//                 partitions(t) / capacity of t's subscribers
//    (where everyone subscribes to everything: tasks × capacity / total
//    capacity). A member keeps up to floor(share) tasks, and one more
//    (ceil(share)) while tasks are left over for such extras: the tasks
//    minus the sum of the floors. So a member that joins gets its share,
//    and an answer fed back in as the input moves nothing.
// 2. Every other task goes to the least-loaded (load / capacity) member
//    subscribing to its topic, ties by member index. Load is the tasks a
//    member was given; when the group reports loads (a load unit and at
//    least one task's load), it is the sum of their loads instead, and the
//    weight is the members' load capacity if every member declared one
//    (else their capacity). A task whose load the host does not know yet
//    counts as the mean of the known ones: unknown is not zero.
// 3. Tasks of topics nobody subscribes to get NO_MEMBER.
//
// Written for the sandbox. The JS engine (StarlingMonkey) interprets this
// file's bytecode inside WebAssembly, and the host meters fuel per wasm
// instruction: a loop step costs ~700 fuel, a typed-array read ~350, a
// function call ~2,000, and a `for...of` step ~15,000 (an iterator object
// per step). So: indexed loops over typed arrays, nothing per member × topic
// that can be done per distinct subscription set, no object, string, call
// or heap operation per task. Moving tasks are handed out in bulk by
// water-filling (see `fill`); by load, one heap step each (`placeByLoad`).

import { log } from 'assignd:assignor/log@0.2.0';

const NO_MEMBER = 0xffffffff;
const emptyPairs = () => ({ task: new Uint32Array(0), member: new Uint32Array(0) });

/** A refusal: componentize-js turns a thrown `{ tag, val }` into `err(assign-error)`. */
class Refusal {
  constructor(tag, message) {
    this.tag = tag;
    this.val = message;
  }
}

function info() {
  return {
    name: 'js-sticky',
    version: '0.2.0',
    description:
      'sticky, capacity-weighted: a task stays on its owner while the owner ' +
      'subscribes and is within its fair share; the rest go to the least ' +
      'loaded (load/capacity) subscriber, by the tasks\' reported loads when ' +
      'the group has them. Written in JavaScript.',
    capabilities: { learners: false, standbys: false, racks: false, load: true },
    params: [],
  };
}

function assign(input) {
  try {
    return assignSticky(input);
  } catch (e) {
    if (e instanceof Refusal) throw e;
    // Any other exception would trap the component and lose its message
    // (built without `stdio`, the engine has nowhere to print it): report it
    // as `failed`, so the operator sees it.
    throw new Refusal('failed', `js-sticky: ${e?.stack ?? e}`);
  }
}

function assignSticky({ topics, subscriptions, members, activeOwner, loadUnit, loads }) {
  const topicCount = topics.length;
  const memberCount = members.length;
  const setCount = subscriptions.length;

  // Tasks are dense: topic t owns first[t] .. first[t + 1].
  const first = new Uint32Array(topicCount + 1);
  for (let t = 0; t < topicCount; t++) first[t + 1] = first[t] + topics[t].partitions;
  const taskCount = first[topicCount];
  if (activeOwner.length !== taskCount) {
    throw new Refusal(
      'unsupported-input',
      `active-owner has ${activeOwner.length} entries for ${taskCount} tasks`,
    );
  }

  // Members as columns; setOf[m] = setCount for a member without a valid set.
  const capacity = new Float64Array(memberCount);
  const setOf = new Uint32Array(memberCount);
  const setCapacity = new Float64Array(setCount + 1);
  for (let m = 0; m < memberCount; m++) {
    const { capacity: c, subscription: s } = members[m];
    capacity[m] = Math.max(1, c);
    setOf[m] = s < setCount ? s : setCount;
    setCapacity[setOf[m]] += capacity[m];
  }

  // Topic -> the subscription sets (with members) containing it, as one
  // flat column (CSR). Sets are few: this is cheap however many members.
  const topicSetStart = new Uint32Array(topicCount + 1);
  for (let s = 0; s < setCount; s++) {
    if (setCapacity[s] === 0) continue;
    const set = subscriptions[s];
    for (let i = 0; i < set.length; i++) if (set[i] < topicCount) topicSetStart[set[i] + 1]++;
  }
  for (let t = 0; t < topicCount; t++) topicSetStart[t + 1] += topicSetStart[t];
  const topicSets = new Uint32Array(topicSetStart[topicCount]);
  const cursor = topicSetStart.slice(0, topicCount);
  for (let s = 0; s < setCount; s++) {
    if (setCapacity[s] === 0) continue;
    const set = subscriptions[s];
    for (let i = 0; i < set.length; i++) if (set[i] < topicCount) topicSets[cursor[set[i]]++] = s;
  }

  // Each topic's tasks per unit of its subscribers' capacity (0: nobody
  // subscribes); a member's share is its capacity times the sum of that
  // over its topics.
  const perCapacity = new Float64Array(topicCount);
  let subscribedTasks = 0;
  for (let t = 0; t < topicCount; t++) {
    let total = 0;
    for (let i = topicSetStart[t]; i < topicSetStart[t + 1]; i++) total += setCapacity[topicSets[i]];
    if (total > 0 && topics[t].partitions > 0) {
      perCapacity[t] = topics[t].partitions / total;
      subscribedTasks += topics[t].partitions;
    }
  }
  const setShare = new Float64Array(setCount + 1);
  for (let s = 0; s < setCount; s++) {
    const set = subscriptions[s];
    for (let i = 0; i < set.length; i++) if (set[i] < topicCount) setShare[s] += perCapacity[set[i]];
  }
  // room[m]: how many more tasks m may keep; floor(share) to begin with.
  const floorShare = new Float64Array(memberCount);
  const room = new Float64Array(memberCount);
  let extras = subscribedTasks; // how many members may keep ceil(share)
  for (let m = 0; m < memberCount; m++) {
    floorShare[m] = Math.floor(capacity[m] * setShare[setOf[m]] + 1e-9);
    room[m] = floorShare[m];
    extras -= floorShare[m];
  }

  // 1. Keep what can stay: up to floor(share) per member, in task order...
  const out = new Uint32Array(taskCount).fill(NO_MEMBER);
  const stamp = new Int32Array(setCount + 1).fill(-1); // set -> topic being visited
  const over = new Uint32Array(taskCount); // kept-able tasks past floor(share)
  let overCount = 0;
  for (let t = 0; t < topicCount; t++) {
    if (perCapacity[t] === 0) continue;
    for (let i = topicSetStart[t]; i < topicSetStart[t + 1]; i++) stamp[topicSets[i]] = t;
    for (let task = first[t], end = first[t + 1]; task < end; task++) {
      const owner = activeOwner[task];
      if (owner < memberCount && stamp[setOf[owner]] === t) {
        if (room[owner] > 0) {
          out[task] = owner;
          room[owner]--;
        } else {
          over[overCount++] = task;
        }
      }
    }
  }
  // ...then one more each while extras last.
  for (let i = 0; i < overCount && extras > 0; i++) {
    const owner = activeOwner[over[i]];
    if (room[owner] === 0) {
      out[over[i]] = owner;
      room[owner] = -1;
      extras--;
    }
  }
  // What each member carries so far: tasks, or with loads their load.
  const cost = taskLoads(loadUnit, loads, taskCount);
  const weight = cost === null ? capacity : loadWeights(members, capacity);
  const load = new Float64Array(memberCount);
  if (cost === null) {
    for (let m = 0; m < memberCount; m++) load[m] = floorShare[m] - room[m];
  } else {
    for (let task = 0; task < taskCount; task++) {
      const m = out[task];
      if (m !== NO_MEMBER) load[m] += cost[task];
    }
  }

  // 2. Place the rest. Topics subscribed by the same sets have the same
  //    candidates and form one pool, handed out together; the key of a
  //    topic is its list of sets (one small string per topic, none per task).
  const poolByKey = new Map();
  const poolTopics = []; // pool -> its topics
  for (let t = 0; t < topicCount; t++) {
    if (perCapacity[t] === 0) continue;
    const key = topicSets.subarray(topicSetStart[t], topicSetStart[t + 1]).join(',');
    let pool = poolByKey.get(key);
    if (pool === undefined) {
      pool = poolTopics.length;
      poolByKey.set(key, pool);
      poolTopics.push([]);
    }
    poolTopics[pool].push(t);
  }
  // Members by set, ascending (CSR), to list each pool's candidates.
  const setMemberStart = new Uint32Array(setCount + 2);
  for (let m = 0; m < memberCount; m++) setMemberStart[setOf[m] + 1]++;
  for (let s = 0; s <= setCount; s++) setMemberStart[s + 1] += setMemberStart[s];
  const setMembers = new Uint32Array(memberCount);
  const setCursor = setMemberStart.slice(0, setCount + 1);
  for (let m = 0; m < memberCount; m++) setMembers[setCursor[setOf[m]]++] = m;

  const moving = new Uint32Array(taskCount);
  let placed = 0;
  let changed = 0;
  for (let pool = 0; pool < poolTopics.length; pool++) {
    const poolTopicList = poolTopics[pool];
    let k = 0;
    for (let j = 0; j < poolTopicList.length; j++) {
      const t = poolTopicList[j];
      for (let task = first[t], end = first[t + 1]; task < end; task++) {
        if (out[task] === NO_MEMBER) moving[k++] = task;
      }
    }
    if (k === 0) continue;
    const t = poolTopicList[0];
    let candidates;
    if (topicSetStart[t + 1] - topicSetStart[t] === 1) {
      const s = topicSets[topicSetStart[t]];
      candidates = setMembers.subarray(setMemberStart[s], setMemberStart[s + 1]);
    } else {
      const parts = [];
      for (let i = topicSetStart[t]; i < topicSetStart[t + 1]; i++) {
        const s = topicSets[i];
        parts.push(setMembers.subarray(setMemberStart[s], setMemberStart[s + 1]));
      }
      candidates = concat(parts).sort();
    }
    placed += k;
    changed +=
      cost === null
        ? fill(moving.subarray(0, k), candidates, capacity, load, out, activeOwner)
        : placeByLoad(moving.subarray(0, k), candidates, cost, weight, load, out, activeOwner);
  }

  const kept = subscribedTasks - placed;
  log(
    'info',
    `js-sticky: ${taskCount} tasks, ${memberCount} members: ${kept} kept, ` +
      `${placed} placed ${cost === null ? 'by task count' : `by load (${loadUnit})`}, ` +
      `${changed} change owner`,
  );
  return { activeOwner: out, learners: emptyPairs(), standbys: emptyPairs() };
}

/**
 * Give `tasks` to `candidates` (ascending member indices) as "each task to
 * the least loaded (load / capacity), ties by member index" would, without a
 * heap operation per task: raise every candidate to the common level
 *   L = (tasks + Σ load) / Σ capacity   over the candidates below L
 * (floor(L × capacity) − load each), give what is left (fewer tasks than
 * candidates) one each to the least loaded, then deal the tasks out
 * round-robin among those with room, so each topic spreads over them.
 * Updates `load` and `out`; returns how many tasks change owner.
 */
function fill(tasks, candidates, capacity, load, out, activeOwner) {
  const k = tasks.length;
  const c = candidates.length;

  // The water level, over the candidates not already above it.
  const below = new Uint8Array(c).fill(1);
  let level = 0;
  for (let changed = true; changed; ) {
    let loadSum = k;
    let capSum = 0;
    for (let i = 0; i < c; i++) {
      if (below[i]) {
        loadSum += load[candidates[i]];
        capSum += capacity[candidates[i]];
      }
    }
    level = loadSum / capSum;
    changed = false;
    for (let i = 0; i < c; i++) {
      const m = candidates[i];
      if (below[i] && load[m] >= level * capacity[m]) {
        below[i] = 0;
        changed = true;
      }
    }
  }

  const room = new Float64Array(c);
  let given = 0;
  for (let i = 0; i < c; i++) {
    if (!below[i]) continue;
    const m = candidates[i];
    const n = Math.max(0, Math.floor(level * capacity[m] + 1e-9) - load[m]);
    room[i] = n;
    given += n;
  }
  // Rounding may give one too many somewhere (not with small capacities):
  // take it back from the last candidates that got some.
  for (let i = c - 1; i >= 0 && given > k; i--) {
    const back = Math.min(room[i], given - k);
    room[i] -= back;
    given -= back;
  }
  for (let i = 0; i < c; i++) load[candidates[i]] += room[i];
  // The rest, r < candidates: one each to the r least loaded, ties by
  // index. The threshold is the r-th smallest ratio (a native sort).
  const r = k - given;
  if (r > 0) {
    const ratio = new Float64Array(c);
    for (let i = 0; i < c; i++) ratio[i] = load[candidates[i]] / capacity[candidates[i]];
    const threshold = ratio.slice().sort()[r - 1];
    for (let pass = 0; pass < 2; pass++) {
      for (let i = 0; i < c && given < k; i++) {
        if (pass === 0 ? ratio[i] < threshold : ratio[i] === threshold) {
          room[i]++;
          load[candidates[i]]++;
          given++;
        }
      }
    }
  }

  // Deal the tasks out round-robin over the candidates with room.
  const dealers = new Uint32Array(c);
  let n = 0;
  for (let i = 0; i < c; i++) if (room[i] > 0) dealers[n++] = i;
  let p = 0;
  let changed = 0;
  for (let j = 0; j < k; j++) {
    const i = dealers[p];
    const task = tasks[j];
    const m = candidates[i];
    out[task] = m;
    if (activeOwner[task] !== m) changed++;
    if (--room[i] === 0) {
      dealers[p] = dealers[--n]; // done: the last dealer takes its place
    } else {
      p++;
    }
    if (p >= n) p = 0;
  }
  return changed;
}

/**
 * Each task's load, or null when the group reports no loads (then tasks
 * are counted). A task with no row counts as the mean of the known loads.
 */
function taskLoads(loadUnit, loads, taskCount) {
  if (loadUnit == null || loads.task.length === 0) return null;
  const cost = new Float64Array(taskCount).fill(NaN);
  const { task: rowTask, load: rowLoad } = loads;
  let known = 0; // the host sends at most one row per task
  let sum = 0;
  for (let i = 0, n = rowTask.length; i < n; i++) {
    const task = rowTask[i];
    if (task < taskCount) {
      const load = rowLoad[i];
      cost[task] = load;
      known++;
      sum += load;
    }
  }
  if (known === 0) return null;
  if (known < taskCount) {
    const mean = sum / known;
    for (let task = 0; task < taskCount; task++) if (Number.isNaN(cost[task])) cost[task] = mean;
  }
  return cost;
}

/** The members' load capacities if every member declared one, else their capacities. */
function loadWeights(members, capacity) {
  const weight = new Float64Array(members.length);
  for (let m = 0; m < members.length; m++) {
    const c = members[m].loadCapacity;
    if (c == null || !(c > 0)) return capacity;
    weight[m] = c;
  }
  return weight;
}

/**
 * Give each of `tasks`, in order, to the candidate with the least
 * load / weight, ties by member index: a min-heap of the candidates by
 * that ratio. Loads only grow (a load is never negative), so sifting the
 * root down after each task keeps the heap ordered. Updates `load` and
 * `out`; returns how many tasks change owner.
 */
function placeByLoad(tasks, candidates, cost, weight, load, out, activeOwner) {
  const n = candidates.length;
  const heap = candidates.slice();
  const key = new Float64Array(n); // key[i]: the load / weight of heap[i]
  for (let i = 0; i < n; i++) key[i] = load[heap[i]] / weight[heap[i]];
  for (let i = (n >> 1) - 1; i >= 0; i--) siftDown(heap, key, n, i);
  let changed = 0;
  for (let j = 0; j < tasks.length; j++) {
    const task = tasks[j];
    const m = heap[0];
    out[task] = m;
    if (activeOwner[task] !== m) changed++;
    load[m] += cost[task];
    key[0] = load[m] / weight[m];
    siftDown(heap, key, n, 0);
  }
  return changed;
}

/** Moves heap[i] down to its place in a min-heap by key, ties by member index. */
function siftDown(heap, key, n, i) {
  const m = heap[i];
  const k = key[i];
  for (;;) {
    let child = 2 * i + 1;
    if (child >= n) break;
    let childKey = key[child];
    const right = child + 1;
    if (right < n) {
      const rightKey = key[right];
      if (rightKey < childKey || (rightKey === childKey && heap[right] < heap[child])) {
        child = right;
        childKey = rightKey;
      }
    }
    if (childKey > k || (childKey === k && heap[child] > m)) break;
    heap[i] = heap[child]; // the hole moves down; m goes in at the end
    key[i] = childKey;
    i = child;
  }
  heap[i] = m;
  key[i] = k;
}

function concat(arrays) {
  let length = 0;
  for (let i = 0; i < arrays.length; i++) length += arrays[i].length;
  const all = new Uint32Array(length);
  for (let i = 0, at = 0; i < arrays.length; at += arrays[i].length, i++) all.set(arrays[i], at);
  return all;
}

export const assignor = { info, assign };
