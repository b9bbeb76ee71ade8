//! Zipf popularity shared by the load generators: `hit_ratio` draws its traces from the table,
//! `zipf_get` takes the exponent and the rank-to-key shuffle. Each uses a part of it.
#![allow(dead_code)]

use rand::{rngs::SmallRng, seq::SliceRandom, Rng, SeedableRng};

/// Zipf(s) over ranks 0..n (rank r drawn with probability ∝ (r+1)^-s): the cumulative
/// distribution as a table, sampled by binary search for a uniform draw.
pub struct Zipf {
    cdf: Vec<f64>,
}

impl Zipf {
    pub fn new(n: u64, s: f64) -> Zipf {
        let mut cdf = Vec::with_capacity(n as usize);
        let mut sum = 0.0;
        for r in 1..=n {
            sum += (r as f64).powf(-s);
            cdf.push(sum);
        }
        for c in &mut cdf {
            *c /= sum;
        }
        Zipf { cdf }
    }

    /// The exponent at which the `frac` most popular of `n` ranks draw `share` of the requests
    /// (bisection; `share` above `frac`, both in (0, 1)).
    pub fn exponent_for(n: u64, frac: f64, share: f64) -> f64 {
        let top = ((n as f64 * frac).round() as usize).clamp(1, n as usize);
        // The cumulative share of the `top` most popular ranks.
        let share_at = |s: f64| Zipf::new(n, s).cdf[top - 1];
        let (mut lo, mut hi) = (0.0, 8.0);
        // 24 halvings of 8: the exponent to within 1e-6, in a fraction of a second.
        for _ in 0..24 {
            let mid = (lo + hi) / 2.0;
            if share_at(mid) < share {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        (lo + hi) / 2.0
    }

    pub fn sample(&self, rng: &mut SmallRng) -> u32 {
        let u: f64 = rng.gen();
        let r = self.cdf.partition_point(|&c| c < u);
        r.min(self.cdf.len() - 1) as u32
    }
}

/// Popularity rank -> key id for `keys` keys: a seeded shuffle, so that hot keys are spread
/// over the key space, the same for every caller with this seed.
pub fn key_of_rank(keys: u64, seed: u64) -> Vec<u32> {
    let mut k: Vec<u32> = (0..keys as u32).collect();
    k.shuffle(&mut SmallRng::seed_from_u64(seed ^ 0x5EED_5A4E));
    k
}
