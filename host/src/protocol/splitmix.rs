//! SplitMix64 (Steele, Lea and Flood, 2014): the one mixing function
//! behind every seeded sequence of the host — the core's member ids, the
//! simulator's schedules ([`crate::sim::rng`]) and the crash test's. Pure
//! arithmetic, so a seed names one sequence exactly; not for cryptography.

/// The increment between two states (the golden ratio, odd).
pub const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

/// Advances `state` one step and returns that step's output.
pub fn next(state: &mut u64) -> u64 {
    *state = state.wrapping_add(GAMMA);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The output of the step after state `x`: [`next`] as a pure function,
/// for hashing (each value mixed on its own).
pub fn splitmix(x: u64) -> u64 {
    let mut state = x;
    next(&mut state)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reference sequence of seed 0 (Vigna's `splitmix64.c`): ids and
    /// schedules derived from a seed must not change with a refactor.
    #[test]
    fn matches_the_reference_sequence() {
        let mut state = 0;
        assert_eq!(next(&mut state), 0xE220_A839_7B1D_CDAF);
        assert_eq!(next(&mut state), 0x6E78_9E6A_A1B9_65F4);
        assert_eq!(next(&mut state), 0x06C4_5D18_8009_454F);
        assert_eq!(splitmix(0), 0xE220_A839_7B1D_CDAF);
        assert_eq!(splitmix(GAMMA), 0x6E78_9E6A_A1B9_65F4);
    }
}
