//! Min / max of any sample range in O(log n): what a curve view needs to draw millions of samples
//! as one vertical stroke per pixel column without visiting them every frame.
//!
//! Level k holds the min and max of blocks of `BLOCK << k` samples; a range query takes whole
//! blocks from the highest level that fits and scans at most `BLOCK` raw samples at each end.
//! `NaN` samples (empty cells) are skipped.

/// Samples per block at the lowest level.
const BLOCK: usize = 16;

#[derive(Clone, Debug, Default)]
pub struct Envelope {
    levels: Vec<Vec<(f32, f32)>>,
}

fn merge(a: (f32, f32), b: (f32, f32)) -> (f32, f32) {
    (a.0.min(b.0), a.1.max(b.1))
}

const EMPTY: (f32, f32) = (f32::INFINITY, f32::NEG_INFINITY);

impl Envelope {
    pub fn new(values: &[f64]) -> Self {
        let mut levels = Vec::new();
        let base: Vec<(f32, f32)> = values
            .chunks(BLOCK)
            .filter(|c| c.len() == BLOCK)
            .map(|c| {
                c.iter()
                    .filter(|v| !v.is_nan())
                    .fold(EMPTY, |acc, &v| merge(acc, (v as f32, v as f32)))
            })
            .collect();
        let mut current = base;
        while current.len() >= 2 {
            let next: Vec<(f32, f32)> = current
                .chunks(2)
                .filter(|c| c.len() == 2)
                .map(|c| merge(c[0], c[1]))
                .collect();
            levels.push(current);
            current = next;
        }
        if !current.is_empty() {
            levels.push(current);
        }
        Self { levels }
    }

    /// Min and max of `values[a..b]` (the slice this envelope was built from); `None` when every
    /// sample there is `NaN` or the range is empty.
    pub fn range(&self, values: &[f64], a: usize, b: usize) -> Option<(f64, f64)> {
        let b = b.min(values.len());
        let mut acc = EMPTY;
        let mut i = a;
        while i < b {
            let fits = |level: usize| {
                let size = BLOCK << level;
                i.is_multiple_of(size)
                    && i + size <= b
                    && level < self.levels.len()
                    && i / size < self.levels[level].len()
            };
            if !fits(0) {
                let v = values[i];
                if !v.is_nan() {
                    acc = merge(acc, (v as f32, v as f32));
                }
                i += 1;
                continue;
            }
            let mut level = 0;
            while fits(level + 1) {
                level += 1;
            }
            let size = BLOCK << level;
            acc = merge(acc, self.levels[level][i / size]);
            i += size;
        }
        (acc.0 <= acc.1).then_some((f64::from(acc.0), f64::from(acc.1)))
    }
}

#[cfg(test)]
mod tests {
    use super::Envelope;

    #[test]
    fn every_range_agrees_with_a_scan() {
        let mut x = 7u64;
        let values: Vec<f64> = (0..1000)
            .map(|i| {
                x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                if i % 97 == 0 {
                    f64::NAN
                } else {
                    (x >> 40) as f64
                }
            })
            .collect();
        let env = Envelope::new(&values);
        for a in (0..1000).step_by(37) {
            for b in (a..=1000).step_by(29) {
                let scan = values[a..b]
                    .iter()
                    .filter(|v| !v.is_nan())
                    .fold(None, |acc: Option<(f64, f64)>, &v| {
                        Some(acc.map_or((v, v), |(lo, hi)| (lo.min(v), hi.max(v))))
                    })
                    .map(|(lo, hi)| (f64::from(lo as f32), f64::from(hi as f32)));
                assert_eq!(env.range(&values, a, b), scan, "{a}..{b}");
            }
        }
    }
}
