//! Division by a divisor fixed at construction, without a `div` instruction.
//!
//! Every recorded event divides the time by the bucket length and the window
//! number by the sample count, for two windows: four 64-bit divisions, which
//! would cost more than the rest of the hot path together. A multiply by a
//! precomputed reciprocal (Granlund and Montgomery, "Division by invariant
//! integers using multiplication", 1994) gives the exact quotient for every
//! `u64` numerator.

/// An invariant divisor with its precomputed reciprocal.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Divisor {
    divisor: u64,
    /// Low 64 bits of the 65-bit reciprocal; unused for powers of two.
    magic: u64,
    /// `ceil(log2(divisor)) - 1`, or `log2(divisor)` for powers of two.
    shift: u32,
    power_of_two: bool,
}

impl Divisor {
    /// Precomputes the reciprocal of `divisor`, which must not be zero.
    pub(crate) fn new(divisor: u64) -> Self {
        assert!(divisor > 0, "division by zero");
        if divisor.is_power_of_two() {
            return Divisor {
                divisor,
                magic: 0,
                shift: divisor.trailing_zeros(),
                power_of_two: true,
            };
        }
        // l = ceil(log2 d); m = floor(2^64 * (2^l - d) / d) + 1, which fits in
        // 64 bits because 2^l - d < d.
        let l = 64 - (divisor - 1).leading_zeros();
        let numerator = ((1u128 << l) - u128::from(divisor)) << 64;
        let magic = (numerator / u128::from(divisor)) as u64 + 1;
        Divisor {
            divisor,
            magic,
            shift: l - 1,
            power_of_two: false,
        }
    }

    /// The divisor itself.
    #[inline]
    pub(crate) fn get(self) -> u64 {
        self.divisor
    }

    /// `n / divisor`.
    #[inline]
    pub(crate) fn div(self, n: u64) -> u64 {
        if self.power_of_two {
            return n >> self.shift;
        }
        let high = ((u128::from(self.magic) * u128::from(n)) >> 64) as u64;
        (high + ((n - high) >> 1)) >> self.shift
    }

    /// `n % divisor`.
    #[inline]
    pub(crate) fn rem(self, n: u64) -> u64 {
        n - self.div(n) * self.divisor
    }
}

#[cfg(test)]
mod tests {
    use super::Divisor;
    use proptest::prelude::*;

    #[test]
    fn edges() {
        for d in [1, 2, 3, 7, 60, 500, 1000, 1 << 40, u64::MAX - 1, u64::MAX] {
            let div = Divisor::new(d);
            for n in [0, 1, d - 1, d, d.saturating_add(1), u64::MAX - 1, u64::MAX] {
                assert_eq!(div.div(n), n / d, "{n} / {d}");
                assert_eq!(div.rem(n), n % d, "{n} % {d}");
            }
        }
    }

    proptest! {
        #[test]
        fn matches_hardware_division(n: u64, d in 1u64..) {
            let div = Divisor::new(d);
            prop_assert_eq!(div.div(n), n / d);
            prop_assert_eq!(div.rem(n), n % d);
        }

        #[test]
        fn matches_for_small_divisors(n: u64, d in 1u64..100_000) {
            prop_assert_eq!(Divisor::new(d).div(n), n / d);
        }
    }
}
