//! The six normalisation families of design §1.2: a native value becomes a band 0..=4.
//!
//! Boundaries are exactly those of the design table. H and L compare against literal
//! boundaries, so `0.2` is band 1 and `0.05` is band 3 to the bit. C, R and W divide, and a
//! quotient such as `4 × 0.15 / 0.20` lands a hair under its integer in binary floating
//! point; those families add a tolerance of [`EDGE_TOLERANCE`] so a value sitting on a
//! boundary takes the band the table gives it.

use serde::{Deserialize, Serialize};

/// A band on the shared 0–4 scale (0 unacceptable … 4 excellent).
pub type Band = u8;

/// The largest band.
pub const MAX_BAND: Band = 4;

/// How each band reads (seed 000 §III-A), band 0 first. Every report that shows a band shows
/// its reading ([`band_reading`]).
pub const BAND_READINGS: [&str; 5] = ["Unacceptable", "Below expectations", "Adequate", "Good", "Excellent"];

/// The reading of `band` ("Adequate" for 2); a value above [`MAX_BAND`] reads as unknown.
pub fn band_reading(band: i64) -> &'static str {
    usize::try_from(band).ok().and_then(|b| BAND_READINGS.get(b)).copied().unwrap_or("unknown band")
}

/// The legend reports print under their bands: "0 Unacceptable · 1 Below expectations · …".
pub fn band_legend() -> String {
    BAND_READINGS.iter().enumerate().map(|(b, r)| format!("{b} {r}")).collect::<Vec<_>>().join(" · ")
}

/// Tolerance for boundaries computed by division (C, R, W).
pub const EDGE_TOLERANCE: f64 = 1e-9;

/// A normalisation family with its catalogue parameters. Budgets (R) and reference pools (Q)
/// are per-system configuration and arrive through [`BandContext`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "family")]
pub enum Family {
    /// H: higher-is-better rate.
    Higher,
    /// L: lower-is-better rate.
    Lower,
    /// C(B): lower-is-better continuous, band = 4 − ⌊4v/B⌋ clamped.
    Continuous { budget: f64 },
    /// R(B): ratio to a budget declared per system.
    Budget,
    /// W[lo, hi]: target window with linear decay outside.
    Window { lo: f64, hi: f64 },
    /// Q: quartile within a reference pool of systems, with a floor.
    Comparative,
}

impl Family {
    /// The design's short code: H, L, C(B), R, W[lo,hi], Q.
    pub fn code(&self) -> String {
        match self {
            Family::Higher => "H".into(),
            Family::Lower => "L".into(),
            Family::Continuous { budget } => format!("C({budget})"),
            Family::Budget => "R".into(),
            Family::Window { lo, hi } => format!("W[{lo},{hi}]"),
            Family::Comparative => "Q".into(),
        }
    }

    /// True when a larger native value is never worse (H, Q); false when it is never better
    /// (L, C, R); `None` for a window.
    pub fn higher_is_better(&self) -> Option<bool> {
        match self {
            Family::Higher | Family::Comparative => Some(true),
            Family::Lower | Family::Continuous { .. } | Family::Budget => Some(false),
            Family::Window { .. } => None,
        }
    }

    /// Maps a native value to its band.
    pub fn band(&self, value: f64, ctx: &BandContext<'_>) -> Result<Band, BandError> {
        if !value.is_finite() {
            return Err(BandError::NotFinite);
        }
        Ok(match *self {
            Family::Higher => higher(value),
            Family::Lower => lower(value),
            Family::Continuous { budget } => continuous(value, budget),
            Family::Budget => budget_ratio(value, ctx.budget.ok_or(BandError::NoBudget)?),
            Family::Window { lo, hi } => window(value, lo, hi),
            Family::Comparative => ctx.pool.ok_or(BandError::NoPool)?.band(value)?,
        })
    }
}

/// Per-system parameters some families need.
#[derive(Debug, Clone, Copy, Default)]
pub struct BandContext<'a> {
    /// The declared budget B for an R metric.
    pub budget: Option<f64>,
    /// The reference pool for a Q metric.
    pub pool: Option<&'a ComparativePool>,
}

/// Why a value has no band.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BandError {
    NotFinite,
    NoBudget,
    NoPool,
}

impl std::fmt::Display for BandError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            BandError::NotFinite => "value is not a finite number",
            BandError::NoBudget => "no budget declared for this system and metric",
            BandError::NoPool => "no reference pool declared (or the pool is empty)",
        })
    }
}

impl std::error::Error for BandError {}

fn higher(v: f64) -> Band {
    if v < 0.2 {
        0
    } else if v < 0.4 {
        1
    } else if v < 0.6 {
        2
    } else if v < 0.8 {
        3
    } else {
        4
    }
}

fn lower(v: f64) -> Band {
    if v < 0.05 {
        4
    } else if v < 0.10 {
        3
    } else if v < 0.20 {
        2
    } else if v < 0.40 {
        1
    } else {
        0
    }
}

fn clamp_band(x: f64) -> Band {
    x.clamp(0.0, MAX_BAND as f64) as Band
}

fn continuous(v: f64, budget: f64) -> Band {
    clamp_band(4.0 - (4.0 * v / budget + EDGE_TOLERANCE).floor())
}

fn budget_ratio(v: f64, budget: f64) -> Band {
    let r = v / budget - EDGE_TOLERANCE;
    if r <= 0.25 {
        4
    } else if r <= 0.50 {
        3
    } else if r <= 0.75 {
        2
    } else if r <= 1.0 {
        1
    } else {
        0
    }
}

fn window(v: f64, lo: f64, hi: f64) -> Band {
    if (lo..=hi).contains(&v) {
        return MAX_BAND;
    }
    let d = if v < lo { lo - v } else { v - hi };
    clamp_band((4.0 - 4.0 * d / (hi - lo) + EDGE_TOLERANCE).floor())
}

/// The reference pool of a comparative (Q) metric: the values of the other systems, and the
/// floor below which a value is band 0 whatever its rank.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ComparativePool {
    pub values: Vec<f64>,
    pub floor: f64,
}

impl ComparativePool {
    /// Quartile of `value` in the pool by mid-rank percentile p = (#below + ½·#equal) / n:
    /// p < .25 → 1, < .50 → 2, < .75 → 3, otherwise 4; below the floor → 0.
    pub fn band(&self, value: f64) -> Result<Band, BandError> {
        if self.values.is_empty() {
            return Err(BandError::NoPool);
        }
        if value < self.floor {
            return Ok(0);
        }
        let below = self.values.iter().filter(|&&x| x < value).count() as f64;
        let equal = self.values.iter().filter(|&&x| x == value).count() as f64;
        let p = (below + 0.5 * equal) / self.values.len() as f64;
        Ok(1 + ((4.0 * p).floor() as Band).min(3))
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn bands_read_as_seed_000_says() {
        let readings: Vec<&str> = (0..=4).map(band_reading).collect();
        assert_eq!(readings, ["Unacceptable", "Below expectations", "Adequate", "Good", "Excellent"]);
        assert_eq!(band_reading(5), "unknown band");
        assert_eq!(band_reading(-1), "unknown band");
        assert_eq!(band_legend(), "0 Unacceptable · 1 Below expectations · 2 Adequate · 3 Good · 4 Excellent");
    }

    use super::*;

    fn b(f: Family, v: f64) -> Band {
        f.band(v, &BandContext { budget: Some(1.0), pool: None }).unwrap()
    }

    #[test]
    fn higher_edges() {
        let cases = [(0.0, 0), (0.1999, 0), (0.2, 1), (0.3999, 1), (0.4, 2), (0.6, 3), (0.7999, 3), (0.8, 4), (1.0, 4)];
        for (v, want) in cases {
            assert_eq!(b(Family::Higher, v), want, "H({v})");
        }
    }

    #[test]
    fn lower_edges() {
        let cases = [(0.0, 4), (0.0499, 4), (0.05, 3), (0.0999, 3), (0.10, 2), (0.1999, 2), (0.20, 1), (0.3999, 1), (0.40, 0), (1.0, 0)];
        for (v, want) in cases {
            assert_eq!(b(Family::Lower, v), want, "L({v})");
        }
    }

    #[test]
    fn continuous_edges_and_clamp() {
        let c = Family::Continuous { budget: 0.20 };
        let cases = [(-0.1, 4), (0.0, 4), (0.0499, 4), (0.05, 3), (0.10, 2), (0.15, 1), (0.1999, 1), (0.20, 0), (5.0, 0)];
        for (v, want) in cases {
            assert_eq!(b(c, v), want, "C(.2)({v})");
        }
        // 4 × 0.15 / 0.20 is 2.9999999999999996 in binary: the tolerance keeps it on band 1.
        assert_eq!(b(Family::Continuous { budget: 0.10 }, 0.075), 1);
    }

    #[test]
    fn budget_edges() {
        let r = |v, budget| Family::Budget.band(v, &BandContext { budget: Some(budget), pool: None }).unwrap();
        let cases = [(0.0, 4), (25.0, 4), (25.01, 3), (50.0, 3), (75.0, 2), (75.5, 1), (100.0, 1), (100.01, 0)];
        for (v, want) in cases {
            assert_eq!(r(v, 100.0), want, "R(100)({v})");
        }
        assert_eq!(r(0.3, 1.2), 4, "0.3 / 1.2 is .25 up to rounding: on the edge, band 4");
        assert_eq!(Family::Budget.band(1.0, &BandContext::default()), Err(BandError::NoBudget));
    }

    #[test]
    fn window_inside_and_decay() {
        let w = Family::Window { lo: 0.10, hi: 0.30 };
        // w = 0.2: band = ⌊4 − 20 d⌋
        let cases = [
            (0.10, 4),
            (0.2, 4),
            (0.30, 4),
            (0.3001, 3),
            (0.35, 3),
            (0.3501, 2),
            (0.40, 2),
            (0.45, 1),
            (0.5, 0),
            (0.05, 3),
            (0.0, 2),
            (1.0, 0),
        ];
        for (v, want) in cases {
            assert_eq!(b(w, v), want, "W({v})");
        }
    }

    #[test]
    fn comparative_quartiles_and_floor() {
        let pool = ComparativePool { values: vec![0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8], floor: 0.15 };
        let ctx = BandContext { budget: None, pool: Some(&pool) };
        let q = |v| Family::Comparative.band(v, &ctx).unwrap();
        assert_eq!(q(0.1), 0, "below the floor");
        assert_eq!(q(0.2), 1); // p = 1.5/8
        assert_eq!(q(0.35), 2); // p = 3/8
        assert_eq!(q(0.55), 3); // p = 5/8
        assert_eq!(q(0.75), 4); // p = 7/8
        assert_eq!(q(0.9), 4);
        assert_eq!(Family::Comparative.band(0.5, &BandContext::default()), Err(BandError::NoPool));
    }

    #[test]
    fn non_finite_has_no_band() {
        assert_eq!(Family::Higher.band(f64::NAN, &BandContext::default()), Err(BandError::NotFinite));
    }
}
