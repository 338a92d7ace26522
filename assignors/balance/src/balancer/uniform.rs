//! Uniform components, where every member subscribes to every topic:
//! exact weighted quotas, each member keeping its current tasks up to its
//! quota and the surplus handed to members under quota. Touches only the
//! answer and the counts of the component's members.

use super::Balancer;
use crate::loads::ratio_cmp;

impl Balancer<'_> {
    /// Exact weighted quotas; every member keeps its current tasks up to its
    /// quota and the surplus goes to members under quota.
    pub(super) fn balance_uniform(&mut self, comp: u32, topics: &[u32], members: &[u32]) {
        let input = self.input;
        let (quota, task_count) = self.quotas(comp, topics, members);
        let member_comp = &self.member_comp[..];

        // Quota per member index for the task walk. The walk is the hot
        // loop (every task of the component): it works on local slices so
        // that the compiler keeps their bounds in registers, which matters
        // most inside wasm.
        let quota_of = &mut self.scratch[..];
        for (i, &m) in members.iter().enumerate() {
            quota_of[m as usize] = quota[i];
        }
        let owner = &mut self.owner[..];
        let count = &mut self.count[..];
        let mut surplus = vec![0u32; task_count as usize];
        let mut surplus_len = 0;
        for &t in topics {
            let first = self.offsets[t as usize];
            let range = first as usize..self.offsets[t as usize + 1] as usize;
            surplus_len += keep_within_quota(
                Walk {
                    first_task: first,
                    current: &input.active_owner[range.clone()],
                    member_comp,
                    comp,
                },
                &mut owner[range],
                count,
                quota_of,
                &mut surplus[surplus_len..],
            );
        }
        hand_out(&surplus[..surplus_len], members, owner, count, quota_of);
    }

    /// Each member's quota (in `members` order) and the component's task
    /// count: `floor(T·c/C)`, plus one remainder slot for some members with
    /// a fractional share.
    fn quotas(&mut self, comp: u32, topics: &[u32], members: &[u32]) -> (Vec<u32>, u64) {
        let input = self.input;
        let member_comp = &self.member_comp[..];
        // Whether current owner `o` is a member of this component; `get`
        // also rejects NO_MEMBER and stale indices with one check.
        let in_comp = |o: u32| member_comp.get(o as usize) == Some(&comp);
        let held = &mut self.scratch[..];
        let mut task_count = 0u64;
        for &t in topics {
            let range = self.offsets[t as usize] as usize..self.offsets[t as usize + 1] as usize;
            task_count += range.len() as u64;
            for &o in &input.active_owner[range] {
                if in_comp(o) {
                    held[o as usize] += 1;
                }
            }
        }
        let total_capacity: u64 = members
            .iter()
            .map(|&m| u64::from(self.capacity[m as usize]))
            .sum();
        let mut quota: Vec<u32> = members
            .iter()
            .map(|&m| (task_count * u64::from(self.capacity[m as usize]) / total_capacity) as u32)
            .collect();
        let mut remainder = task_count - quota.iter().map(|&q| u64::from(q)).sum::<u64>();
        debug_assert!(remainder < members.len() as u64);
        // Only a member with a fractional share may round up, so every count
        // is strictly within one of its share. The slots go first to such
        // members already holding more than their floor quota (each slot
        // saves a move, and a settled group is a fixed point), then to
        // those whose load after rounding up is lowest (the highest-averages
        // order, which avoids loads a single move could improve), then by
        // lower index.
        let fractional = |i: usize| {
            !(task_count * u64::from(self.capacity[members[i] as usize]))
                .is_multiple_of(total_capacity)
        };
        let mut has_slot = vec![false; members.len()];
        for (i, &m) in members.iter().enumerate() {
            if remainder == 0 {
                break;
            }
            if held[m as usize] > quota[i] && fractional(i) {
                quota[i] += 1;
                has_slot[i] = true;
                remainder -= 1;
            }
        }
        if remainder > 0 {
            let mut rest: Vec<usize> = (0..members.len())
                .filter(|&i| !has_slot[i] && fractional(i))
                .collect();
            let same_capacity = members
                .iter()
                .all(|&m| self.capacity[m as usize] == self.capacity[members[0] as usize]);
            if !same_capacity {
                rest.sort_by(|&i, &j| {
                    let (ci, cj) = (
                        self.capacity[members[i] as usize],
                        self.capacity[members[j] as usize],
                    );
                    ratio_cmp(quota[i] + 1, ci, quota[j] + 1, cj).then(i.cmp(&j))
                });
            }
            debug_assert!(rest.len() as u64 >= remainder);
            for &i in rest.iter().take(remainder as usize) {
                quota[i] += 1;
            }
        }
        for &m in members {
            held[m as usize] = 0;
        }
        (quota, task_count)
    }
}

/// The tasks of one topic in a uniform component's walk, with what says
/// whether their current owners belong to the component.
struct Walk<'a> {
    first_task: u32,
    current: &'a [u32],
    member_comp: &'a [u32],
    comp: u32,
}

/// Keeps each task of `walk` on its current owner while that owner is a
/// member of the component under its quota; writes the other tasks to the
/// front of `surplus`, in task order, and returns how many. Its own small
/// function: inlined into the whole balancer, the loop's few values did not
/// stay in registers in wasm (Cranelift spilled them on every task).
#[inline(never)]
fn keep_within_quota(
    walk: Walk,
    owner: &mut [u32],
    count: &mut [u32],
    quota_of: &[u32],
    surplus: &mut [u32],
) -> usize {
    let member_count = count.len();
    let (quota_of, member_comp) = (&quota_of[..member_count], &walk.member_comp[..member_count]);
    let owner = &mut owner[..walk.current.len()];
    let mut kept_out = 0;
    for (i, &o) in walk.current.iter().enumerate() {
        let m = o as usize;
        if m < member_count && member_comp[m] == walk.comp && count[m] < quota_of[m] {
            owner[i] = o;
            count[m] += 1;
        } else {
            surplus[kept_out] = walk.first_task + i as u32;
            kept_out += 1;
        }
    }
    kept_out
}

/// Members under quota take the `surplus` tasks in member order, each up to
/// its quota; every member's count ends at its quota and its `quota_of`
/// entry is cleared.
#[inline(never)]
fn hand_out(
    surplus: &[u32],
    members: &[u32],
    owner: &mut [u32],
    count: &mut [u32],
    quota_of: &mut [u32],
) {
    let mut next = 0;
    for &m in members {
        let m_index = m as usize;
        let missing = (quota_of[m_index] - count[m_index]) as usize;
        for &task in &surplus[next..next + missing] {
            owner[task as usize] = m;
        }
        next += missing;
        count[m_index] = quota_of[m_index];
        quota_of[m_index] = 0;
    }
    debug_assert_eq!(next, surplus.len(), "quotas sum to the task count");
}
