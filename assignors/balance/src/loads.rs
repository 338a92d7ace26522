//! Members ordered by load, `count / capacity`, compared exactly by cross
//! multiplication, ties broken by member index: the keys of every choice
//! the balancer makes.

use std::cmp::Ordering;

/// Whether `count_a / cap_a < count_b / cap_b`, exactly.
#[inline]
pub fn load_less(count_a: u32, cap_a: u32, count_b: u32, cap_b: u32) -> bool {
    u64::from(count_a) * u64::from(cap_b) < u64::from(count_b) * u64::from(cap_a)
}

#[inline]
pub(crate) fn ratio_cmp(num_a: u32, cap_a: u32, num_b: u32, cap_b: u32) -> Ordering {
    (u64::from(num_a) * u64::from(cap_b)).cmp(&(u64::from(num_b) * u64::from(cap_a)))
}

/// A member's load `count / cap` for a max-heap: most loaded first, then
/// lowest index.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Donor {
    pub num: u32,
    pub cap: u32,
    pub member: u32,
}

impl Ord for Donor {
    fn cmp(&self, other: &Self) -> Ordering {
        ratio_cmp(self.num, self.cap, other.num, other.cap).then(other.member.cmp(&self.member))
    }
}

impl PartialOrd for Donor {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Donor {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Donor {}

/// A member's load after receiving one more task, `(count + 1) / cap`, for a
/// min-heap (`Reverse<Receiver>`): least loaded first, then lowest index.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Receiver {
    pub num: u32,
    pub cap: u32,
    pub member: u32,
}

impl Ord for Receiver {
    fn cmp(&self, other: &Self) -> Ordering {
        ratio_cmp(self.num, self.cap, other.num, other.cap).then(self.member.cmp(&other.member))
    }
}

impl PartialOrd for Receiver {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Receiver {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Receiver {}
