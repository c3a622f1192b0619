//! A small deterministic PRNG (xorshift64*), seeded from the command line,
//! so that a failing run can be replayed exactly.

/// The generator state.
pub struct Rng(u64);

impl Rng {
    /// A generator for `seed` (0 is mapped to a fixed non-zero state).
    pub fn new(seed: u64) -> Rng {
        // Spread small seeds over the state (splitmix64's finaliser).
        let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        Rng(if z == 0 { 0x2545_f491_4f6c_dd1d } else { z })
    }

    /// The next 64 random bits.
    pub fn u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// The next 32 random bits.
    pub fn u32(&mut self) -> u32 {
        // CAST: the high half, which is the better half of xorshift64*.
        (self.u64() >> 32) as u32
    }

    /// A value in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u32) -> u32 {
        // CAST: the product of two u32 shifted down fits in u32.
        ((u64::from(self.u32()) * u64::from(n)) >> 32) as u32
    }

    /// True with probability 1/`n`.
    pub fn one_in(&mut self, n: u32) -> bool {
        self.below(n) == 0
    }

    /// Fills `buf` with random bytes.
    pub fn fill(&mut self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            let v = self.u64().to_ne_bytes();
            chunk.copy_from_slice(&v[..chunk.len()]);
        }
    }

    /// `n` random bytes.
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        let mut v = vec![0; n];
        self.fill(&mut v);
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deterministic_and_bounded() {
        let (mut a, mut b) = (Rng::new(7), Rng::new(7));
        for _ in 0..1000 {
            assert_eq!(a.u64(), b.u64());
            assert!(a.below(10) < 10);
            b.below(10);
        }
        assert_ne!(Rng::new(1).u64(), Rng::new(2).u64());
        assert_ne!(Rng::new(0).u64(), 0);
    }
}
