//! Calibration of the modem's error curves against the published required-SNR table.
//!
//! `modem-required-snr.csv` (RapidM RM6 measurements, `calibration/README.md`) gives, per data
//! rate, the SNR in 3 kHz at which the modem reaches BER 10⁻⁵ on AWGN, ITU-R Good (F.520 0.5 ms,
//! 0.1 Hz) and ITU-R Poor (2 ms, 1 Hz). The emulator must reproduce it within 1.5 dB, and
//! reproduce the fact that Good needs more SNR than Poor (fades that outlast the interleaver).
//!
//! # How the curves are fitted
//!
//! The AWGN column fixes each rate's waterfall position directly ([`RateCurve::awgn_db`]). The
//! other parameters (see [`crate::modem`] for the model) were fitted with [`fit_rate`] on the
//! seeded reference fading sample ([`reference_sets`], long interleaver: eight pooled ITU Good
//! samples of each block's size, 240 000 blocks from 1 200 independent channel realisations
//! for the 110A block and 1 440 000 from 7 200 for the 110B block, and 8 000 ITU Poor blocks
//! from 80 for each; about 2 560 h, 13 800 h and 10 h of channel time), by alternating
//! bisections:
//!
//! 1. ε (tracking loss) so that Poor matches, then the waterfall slope k so that Good matches,
//!    k limited to [`MAX_SLOPE`] = 1 decade/dB. Steeper curves make the mean BER on Good hinge on
//!    a handful of very deep fades, i.e. on Monte-Carlo luck. 75–2400 bit/s end here, with k of
//!    0.4–1 and no further parameter.
//! 2. If k = 1 still leaves Good short (3200–9600 bit/s), the EESM β factor c is lowered below
//!    1: the block becomes more sensitive to the part of it that is faded, which is what a weak
//!    rate-3/4 code with a dense constellation is.
//! 3. If Poor is then still more than 0.25 dB off even with ε = 0 (6400–9600 bit/s: their
//!    Good penalty is 16–22 dB but their Poor penalty only 7–9 dB), c is made to depend on the
//!    Doppler spread, `c · (spread / 1 Hz)^q` (spread clamped to the calibrated 0.1–1 Hz): c
//!    is fitted to Poor and q to Good. **This is a per-channel-class calibration**: nothing in
//!    the fading model alone separates Good from Poor that much for these rates.
//!
//! The ignored test `calibration::tests::refit` reruns the fit on the reference sample and
//! prints the table (3200-9600 bit/s took 18 minutes in a release build on two cores, 75-2400
//! bit/s 6 minutes; `SKYWAVE_REFIT_RATES=3200,4800` limits it to those rates). 2400 bit/s has no published Poor figure; its ε was fitted to 18 dB, the
//! MIL-STD-188-110A minimum-performance figure for 2400 bit/s on CCIR Poor (\[C\],
//! `hf-emulator.md` §2a).
//!
//! # Accuracy
//!
//! On the reference sample the fit reproduces every published figure to 0.01 dB: a fit
//! residual, not a prediction (asserted to 0.02 dB in `tests/calibration.rs`). AWGN holds by
//! construction (the table's AWGN column is the curve's position). The prediction is an
//! independent sample ([`INDEPENDENT_POOL`]: four samples of each block's Good size pooled,
//! `independent_sample_stays_close`, run by default, and `skywave-bench calibrate`): every row
//! within 1 dB, Poor within 0.2 dB, Good -0.01 to +0.21 dB (+0.18 at 600, +0.16 at 1200, +0.17
//! at 8000 and +0.21 dB at 9600 bit/s).
//!
//! The reference sample was 60 000 Good blocks (300 realisations) until the fit was found to
//! sit on a lucky one: five other samples of that size needed 0.7-1.1 dB more SNR on Good at
//! 600-2400 bit/s than the one the curves were fitted on, so the prediction missed 1 dB at 600
//! and 1200 bit/s. BER 10⁻⁵ on a 0.1 Hz channel is a mean set by rare deep fades, and a small
//! sample's mean is more often below the true one than above. Fitted on four times the sample
//! (240 000 blocks), single samples of that size still scatter by about 0.35 dB, around
//! figures about 0.1-0.3 dB above the published ones at 75-2400 bit/s; refitted on eight
//! pooled samples of that size ([`REFERENCE_POOL`], 2026-11-29: the slopes k moved by at most
//! 0.02 decade/dB, ε by under 1 %), four single samples average +0.09 to +0.12 dB (-0.04 to
//! +0.27). The reference's own eight, checked once with a throwaway test, put each rate within
//! -0.14 to +0.22 dB and average within 0.01 dB of the pool, so the independent seed's +0.1 is
//! that seed's scatter, not a bias of pooling. At 8000 and 9600 bit/s the figure is set by fades
//! rarer than one block in 10 000 (the F.1487 test-length rule asks 30 000 s of Good for the
//! same reason): on 240 000 blocks it moved by up to +2.8 dB between samples. The 110B block's
//! Good sample is six times larger ([`HIGH_RATE_GOOD_FACTOR`], 1 440 000 blocks), and the
//! reference sample pools eight of those ([`REFERENCE_POOL`]): fitted on one, fourteen other
//! samples put 8000 and 9600 bit/s at +0.50 and +0.45 dB on average (-0.24 to +1.27, one
//! beyond 1 dB); refitted on the eight, the same fourteen average +0.23 and +0.24 (-0.28 to
//! +0.89 and -0.43 to +1.06: one sample in fourteen is still beyond 1 dB at 9600 bit/s, which
//! is why the independent check pools four). Those fourteen were measured once with a
//! throwaway scatter test; the default test `single_samples_scatter_around_the_published_figure`
//! prints four single samples of each block and bounds their mean.
//!
//! [`FadingSet::mean_ber`] takes the blocks weakest first and stops once the rest cannot move
//! the answer, so a sample of millions of blocks costs about what its simulation costs.
//!
//! # The MIL-STD-188-110A-minimum generation
//!
//! [`Generation::Mil110aMinimum`] is a modem that just meets the standard's minimum-performance
//! table ([`MIL_110A_MINIMUM`], `hf-emulator.md` §2a), as NTIA's 1998 equipment would have.
//! [`fit_110a`] keeps each RM6 curve's shape and places it with the table's rows on the
//! channels the curves are fitted at ([`Requirement::is_calibrated_channel`]): 2400 bit/s sits
//! at its AWGN row with ε fitted to its 2 ms / 1 Hz row, 1200 and 600 bit/s are shifted to meet
//! theirs, 75-300 bit/s keep the RM6 curves. [`curve_of`] gives either generation's curve; the
//! generation has no rate above 2400 bit/s.
//!
//! # Beyond the calibrated channels: 5 ms and 5 Hz
//!
//! The RM6 table stops at 2 ms and 1 Hz (ITU-R Poor). The standard's other rows go further, and
//! fix how the curves of both generations go on ([`RateCurve::self_noise`]), each fitted once
//! on the reference sample by `calibration::tests::refit_beyond_the_calibrated_channels`:
//!
//! - **Delay.** Up to 2 ms the equaliser is taken to resolve the two paths at no cost beyond
//!   the fitted tracking loss. 2400 bit/s needs 30 dB at 5 ms / 1 Hz against 18 dB at 2 ms: the
//!   equaliser's residual intersymbol interference, modelled as self-noise proportional to the
//!   signal, [`DELAY_SELF_NOISE`] at 5 ms (0.025: a cap near 16 dB), linear in the delay from
//!   2 ms and beyond 5 ms (an assumption: the standard tests nothing longer). One figure for
//!   every rate, since the 110A rates share one 2400-baud symbol stream and equaliser (the 110B
//!   rates are assumed alike). It costs the low rates little: they need 2-7 dB, far below the
//!   cap.
//! - **Doppler spread.** The tracking loss ε · spread, calibrated at 0.1 and 1 Hz, grew
//!   linearly beyond, and left every rate but 300 bit/s short of BER 10⁻⁵ at 5 Hz whatever the
//!   SNR, where the standard asks 2, 5 and 7 dB of 75, 150 and 300 bit/s at 5 ms / 5 Hz.
//!   Beyond 1 Hz it now grows as ε · spread^p, p per rate ([`HIGH_SPREAD_EXPONENTS`]): fitted
//!   to those three rows (0.41, 0.70, 0.97) and to 2400 bit/s's 5 Hz row (BER 10⁻³ at 30 dB:
//!   0.63); 600 and 1200 bit/s, which the standard tests at 1 Hz only, are interpolated in log
//!   rate (an assumption). Beyond 5 Hz, the highest spread tested, the loss is held at its
//!   5 Hz value, as β is held at its 1 Hz value: so the Walsh and repetition rates (75-300
//!   bit/s) still work on flutter-class channels (10-30 Hz), as they are built to.
//!
//! These rows are fits, one parameter each (the delay's is shared), not predictions; the
//! prediction is that they hold on an independent sample (they do, within 0.05 dB:
//! `tests/calibration.rs`). What nothing checks: at 5 Hz 600, 1200 and 2400 bit/s floor at a
//! BER of about 2 × 10⁻³, 2 × 10⁻⁴ and 6 × 10⁻⁴ (ARQ still gets through, slowly); and the 110B
//! rates keep their 1 Hz behaviour beyond 1 Hz (6400-9600 bit/s have no tracking loss at all,
//! their Poor penalty being in β), which on flutter-class channels is certainly optimistic.
//!
//! # From block error statistics to BER
//!
//! The calibration does not count simulated bit errors: for each simulated block it takes the
//! block's expected post-decoder BER from the curve at the block's effective SNR, and averages
//! over blocks (all blocks carry the same number of bits). That is the expectation of the
//! counted BER, without its sampling noise; [`crate::modem::decide_block`] draws bit-error bursts
//! whose mean BER is that same figure (a unit test checks it). The SNR where the mean crosses
//! 10⁻⁵ is found by bisection.

use crate::channel::{Channel, ChannelConfig, Fading, Profile};
use crate::modem::{
    CALIBRATED_DELAY_MS, DataRate, Generation, Interleaver, ModemConfig, RateCurve, Standard,
};
use rand::{Rng, SeedableRng};
use std::ops::Range;
use std::time::Duration;

/// The embedded copy of `calibration/modem-required-snr.csv` (byte-identical; a test checks it).
pub const REQUIRED_SNR_CSV: &str = include_str!("../data/modem-required-snr.csv");

/// The BER at which the table is given.
pub const TARGET_BER: f64 = 1e-5;

/// One row of `modem-required-snr.csv`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RequiredSnr {
    /// Data rate.
    pub rate: DataRate,
    /// SNR (dB, 3 kHz) for BER 10⁻⁵ on AWGN.
    pub awgn_db: f64,
    /// The same on ITU-R Good, if published.
    pub good_db: Option<f64>,
    /// The same on ITU-R Poor, if published.
    pub poor_db: Option<f64>,
}

/// Parse a table in the format of `modem-required-snr.csv`. Returns `None` if it is malformed.
pub fn parse_required_snr(csv: &str) -> Option<Vec<RequiredSnr>> {
    let mut rows = Vec::new();
    let mut lines = csv
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'));
    if lines.next()? != "rate_bps,awgn_db,itu_good_db,itu_poor_db" {
        return None;
    }
    for line in lines {
        let f: Vec<&str> = line.split(',').map(str::trim).collect();
        let [rate, awgn, good, poor] = f.as_slice() else {
            return None;
        };
        let opt = |s: &str| {
            if s.is_empty() {
                Some(None)
            } else {
                s.parse::<f64>().ok().map(Some)
            }
        };
        rows.push(RequiredSnr {
            rate: DataRate::from_bps(rate.parse().ok()?)?,
            awgn_db: awgn.parse().ok()?,
            good_db: opt(good)?,
            poor_db: opt(poor)?,
        });
    }
    Some(rows)
}

/// The rows of the embedded table.
pub fn required_snr() -> Vec<RequiredSnr> {
    parse_required_snr(REQUIRED_SNR_CSV).unwrap_or_default()
}

/// Fitted curves: (rate, AWGN dB from the CSV, slope k in decades/dB, ε per Hz of spread,
/// EESM β factor c, β spread exponent q). Produced by `calibration::tests::refit` (see the
/// module docs). The tracking loss's growth beyond 1 Hz is [`HIGH_SPREAD_EXPONENTS`].
const CURVES: [(DataRate, f64, f64, f64, f64, f64); 11] = [
    // rate, AWGN dB, slope, epsilon, beta factor, beta spread exponent
    (DataRate::Bps75, -6.75, 0.6328, 1.8828, 1.0, 0.0),
    (DataRate::Bps150, -4.0, 0.4128, 6.3616e-1, 1.0, 0.0),
    (DataRate::Bps300, -1.5, 0.4935, 2.2367e-1, 1.0, 0.0),
    (DataRate::Bps600, 2.02, 0.8576, 2.9785e-1, 1.0, 0.0),
    (DataRate::Bps1200, 5.25, 0.7847, 1.3578e-1, 1.0, 0.0),
    (DataRate::Bps2400, 10.75, 0.6488, 5.7167e-2, 1.0, 0.0),
    (DataRate::Bps3200, 7.6, 1.0, 7.2681e-2, 0.2926, 0.0),
    (DataRate::Bps4800, 12.29, 1.0, 3.3434e-2, 0.3881, 0.0),
    (DataRate::Bps6400, 14.69, 1.0, 1.0e-9, 0.2327, 0.0867),
    (DataRate::Bps8000, 15.44, 1.0, 1.0e-9, 0.1805, 0.1565),
    (DataRate::Bps9600, 20.48, 1.0, 1.0e-9, 0.1929, 0.2674),
];

/// Exponent p of the tracking loss's growth beyond 1 Hz of spread (ε · spread^p), per rate;
/// rates not listed keep the linear growth (p = 1) of the 0.1–1 Hz calibration. 75, 150 and
/// 300 bit/s are fitted to MIL-STD-188-110A's 5 ms / 5 Hz rows, 2400 bit/s to its 2 ms / 5 Hz
/// BER 10⁻³ row (on the 110A-minimum curves, whose shape the RM6 ones share); 600 and 1200
/// bit/s, which the standard tests at 1 Hz only, are interpolated between 300 and 2400 bit/s
/// in log rate (an assumption). Produced by `calibration::tests::refit_beyond_the_calibrated_channels`.
pub const HIGH_SPREAD_EXPONENTS: [(DataRate, f64); 6] = [
    (DataRate::Bps75, 0.4118),
    (DataRate::Bps150, 0.6985),
    (DataRate::Bps300, 0.9653),
    (DataRate::Bps600, 0.8546),
    (DataRate::Bps1200, 0.7440),
    (DataRate::Bps2400, 0.6334),
];

/// [`RateCurve::delay_self_noise`] of every rate: the equaliser's residual intersymbol
/// interference on two paths 5 ms apart, relative to the signal. Fitted to MIL-STD-188-110A's
/// 2400 bit/s row at 5 ms / 1 Hz (30 dB, against 18 dB at 2 ms) on the 110A-minimum curve; one
/// figure for every rate, since every 110A rate above 75 bit/s runs the same 2400-baud symbol
/// stream through the same equaliser (the 110B rates are assumed alike; nothing was measured).
/// Produced by `calibration::tests::refit_beyond_the_calibrated_channels`.
pub const DELAY_SELF_NOISE: f64 = 2.5388e-2;

/// The calibrated error curve of a rate.
pub fn curve(rate: DataRate) -> RateCurve {
    let (awgn_db, slope, tracking_loss, beta_factor, beta_spread_exponent) = CURVES
        .iter()
        .find(|(r, ..)| *r == rate)
        .map_or((0.0, 1.0, 0.0, 1.0, 0.0), |&(_, a, k, e, c, q)| {
            (a, k, e, c, q)
        });
    RateCurve {
        rate,
        awgn_db,
        slope,
        tracking_loss,
        beta_factor,
        beta_spread_exponent,
        high_spread_exponent: HIGH_SPREAD_EXPONENTS
            .iter()
            .find(|(r, _)| *r == rate)
            .map_or(1.0, |&(_, p)| p),
        delay_self_noise: DELAY_SELF_NOISE,
    }
}

/// One row of MIL-STD-188-110A's minimum-performance table: the SNR (dB in 3 kHz) at which a
/// compliant modem must reach the BER on the channel, long interleaver.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Requirement {
    /// Data rate.
    pub rate: DataRate,
    /// Differential delay of the two equal-power paths, ms (0: AWGN).
    pub delay_ms: f64,
    /// Frequency spread, Hz (0: AWGN).
    pub spread_hz: f64,
    /// Bit error rate to reach.
    pub ber: f64,
    /// Required SNR, dB.
    pub snr_db: f64,
}

impl Requirement {
    /// Whether the row lies on the channels the curves were fitted at (AWGN, or at most 2 ms
    /// and 1 Hz, at BER 10⁻⁵, as the RM6 table): [`fit_110a`] places the curve on these rows;
    /// the others fix how the curves go on beyond (the tracking loss above 1 Hz, the
    /// equaliser's self-noise beyond 2 ms).
    pub fn is_calibrated_channel(&self) -> bool {
        self.delay_ms <= CALIBRATED_DELAY_MS && self.spread_hz <= 1.0 && self.ber == TARGET_BER
    }

    /// The row's channel as the emulator's fading: AWGN; the F.520 Poor profile for 2 paths,
    /// 2 ms, 1 Hz (CCIR Poor, the channel of the standard's 2 ms / 1 Hz rows); otherwise two
    /// paths with the row's delay and spread.
    pub fn fading(&self) -> Option<Fading> {
        if self.spread_hz == 0.0 {
            Some(Fading::Awgn)
        } else if self.delay_ms == CALIBRATED_DELAY_MS && self.spread_hz == 1.0 {
            itu("poor")
        } else {
            Some(Fading::Watterson(Profile {
                name: format!("110a-{}ms-{}hz", self.delay_ms, self.spread_hz),
                standard: "MIL-STD-188-110A".into(),
                delay_ms: self.delay_ms,
                spread_hz: self.spread_hz,
            }))
        }
    }

    /// The row's fading sample: AWGN, the ITU-R Poor sample of `sets` for the Poor rows, or
    /// the row's own channel simulated from `seed` (as many blocks as a Poor sample).
    pub fn sample(&self, sets: &ReferenceSets, seed: u64) -> Option<FadingSet> {
        let block = calibration_block(self.rate);
        match self.fading()? {
            Fading::Awgn => Some(awgn_set(block)),
            Fading::Watterson(p) if p.name == "poor" => sets
                .iter()
                .find(|(b, ..)| *b == block)
                .map(|(_, _, poor)| poor.clone()),
            f => {
                // One stream per row, whatever order the rows are asked in.
                let tenths = |v: f64| (v * 10.0).round() as u64;
                let row_seed = seed
                    ^ (u64::from(self.rate.bps()) << 32)
                    ^ (tenths(self.delay_ms) << 16)
                    ^ tenths(self.spread_hz);
                let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(row_seed);
                Some(FadingSet::simulate(
                    &f,
                    block,
                    REFERENCE_POOR_REALISATIONS,
                    100,
                    &mut rng,
                ))
            }
        }
    }

    /// The SNR at which the 110A-minimum curve of the row's rate reaches the row's BER on
    /// `set` (the row's channel).
    pub fn emulated_snr_db(&self, set: &FadingSet) -> Option<f64> {
        let c = curve_of(Generation::Mil110aMinimum, self.rate);
        set.required_snr_db(&c, self.ber, self.snr_db)
    }
}

/// MIL-STD-188-110A's minimum performance for 75–2400 bit/s (coded rows; the 4800 bit/s
/// uncoded mode is not a rate of this modem). Source: `hf-emulator.md` §2a, \[C\] (recollection
/// of the standard's table; RapidM's STANAG 4529 page lists the same channel/SNR pairs).
pub const MIL_110A_MINIMUM: [Requirement; 9] = [
    req110a(DataRate::Bps2400, 0.0, 0.0, 1e-5, 10.0),
    req110a(DataRate::Bps2400, 2.0, 1.0, 1e-5, 18.0),
    req110a(DataRate::Bps2400, 2.0, 5.0, 1e-3, 30.0),
    req110a(DataRate::Bps2400, 5.0, 1.0, 1e-5, 30.0),
    req110a(DataRate::Bps1200, 2.0, 1.0, 1e-5, 11.0),
    req110a(DataRate::Bps600, 2.0, 1.0, 1e-5, 7.0),
    req110a(DataRate::Bps300, 5.0, 5.0, 1e-5, 7.0),
    req110a(DataRate::Bps150, 5.0, 5.0, 1e-5, 5.0),
    req110a(DataRate::Bps75, 5.0, 5.0, 1e-5, 2.0),
];

const fn req110a(
    rate: DataRate,
    delay_ms: f64,
    spread_hz: f64,
    ber: f64,
    snr_db: f64,
) -> Requirement {
    Requirement {
        rate,
        delay_ms,
        spread_hz,
        ber,
        snr_db,
    }
}

/// The 110A-minimum generation's curves where they differ from the RM6 ones: (rate, AWGN
/// position dB, tracking loss ε per Hz). Produced by `calibration::tests::refit_110a` with
/// [`fit_110a`] on the reference sample (see the module docs).
const CURVES_110A: [(DataRate, f64, f64); 3] = [
    (DataRate::Bps600, 1.9688, 2.9785e-1),
    (DataRate::Bps1200, 5.7014, 1.3578e-1),
    (DataRate::Bps2400, 10.0, 7.2683e-2),
];

/// The error curve of a rate for a modem generation.
pub fn curve_of(generation: Generation, rate: DataRate) -> RateCurve {
    let rm6 = curve(rate);
    match generation {
        Generation::Rm6 => rm6,
        Generation::Mil110aMinimum => CURVES_110A.iter().find(|(r, ..)| *r == rate).map_or(
            rm6,
            |&(_, awgn_db, tracking_loss)| RateCurve {
                awgn_db,
                tracking_loss,
                ..rm6
            },
        ),
    }
}

/// Fit one rate of the 110A-minimum generation from the RM6 curve and the standard's rows
/// that the channel model represents (`poor`: an ITU-R Poor sample of the rate's
/// long-interleaver block). The RM6 curve's shape (waterfall slope, EESM β factor) stays: the
/// table says nothing about it. With an AWGN row and a fading row (2400 bit/s) the AWGN row is
/// the curve's position and the tracking loss ε is fitted to the fading row; with a fading row
/// only (600, 1200 bit/s) the whole curve is shifted in SNR until the row is met; with none
/// (75–300 bit/s, whose rows are all at 5 ms / 5 Hz) the RM6 curve stands. Returns (AWGN
/// position dB, ε).
pub fn fit_110a(rate: DataRate, poor: &FadingSet) -> (f64, f64) {
    let rm6 = curve(rate);
    let rows: Vec<&Requirement> = MIL_110A_MINIMUM
        .iter()
        .filter(|r| r.rate == rate && r.is_calibrated_channel())
        .collect();
    let awgn = rows.iter().find(|r| r.spread_hz == 0.0).map(|r| r.snr_db);
    let fading = rows.iter().find(|r| r.spread_hz > 0.0).map(|r| r.snr_db);
    let req = |c: &RateCurve, target: f64| {
        poor.required_snr_db(c, TARGET_BER, target).unwrap_or(100.0) - target
    };
    match (awgn, fading) {
        (Some(a), Some(f)) => {
            let eps = bisect_log(1e-9, 10.0, 24, |e| {
                Some(req(
                    &RateCurve {
                        awgn_db: a,
                        tracking_loss: e,
                        ..rm6
                    },
                    f,
                ))
            });
            (a, eps)
        }
        (None, Some(f)) => {
            // The required SNR grows with the shift: bisect it on [-10, 10] dB.
            let (mut lo, mut hi) = (-10.0, 10.0);
            for _ in 0..30 {
                let mid = (lo + hi) / 2.0;
                let c = RateCurve {
                    awgn_db: rm6.awgn_db + mid,
                    ..rm6
                };
                if req(&c, f) <= 0.0 {
                    lo = mid;
                } else {
                    hi = mid;
                }
            }
            (rm6.awgn_db + (lo + hi) / 2.0, rm6.tracking_loss)
        }
        (Some(a), None) => (a, rm6.tracking_loss),
        (None, None) => (rm6.awgn_db, rm6.tracking_loss),
    }
}

/// Fit [`DELAY_SELF_NOISE`]: the equaliser's self-noise at 5 ms that makes `curve` need
/// `target_db` for `ber` on `set` (a 5 ms sample). The required SNR grows with the self-noise
/// (and is unbounded once its cap falls below what the BER needs), so a log bisection finds it.
pub fn fit_delay_self_noise(curve: &RateCurve, set: &FadingSet, ber: f64, target_db: f64) -> f64 {
    bisect_log(1e-9, 1.0, 40, |eta| {
        let c = RateCurve {
            delay_self_noise: eta,
            ..*curve
        };
        Some(set.required_snr_db(&c, ber, target_db).unwrap_or(1000.0) - target_db)
    })
}

/// Fit a rate's [`RateCurve::high_spread_exponent`]: the growth p of the tracking loss beyond
/// 1 Hz (ε · spread^p) that makes `curve` need `target_db` for `ber` on `set` (a sample above
/// 1 Hz). The required SNR grows with p; bisected on [0, 3].
pub fn fit_high_spread_exponent(
    curve: &RateCurve,
    set: &FadingSet,
    ber: f64,
    target_db: f64,
) -> f64 {
    let (mut lo, mut hi) = (0.0, 3.0);
    for _ in 0..30 {
        let mid = (lo + hi) / 2.0;
        let c = RateCurve {
            high_spread_exponent: mid,
            ..*curve
        };
        if set.required_snr_db(&c, ber, target_db).unwrap_or(1000.0) <= target_db {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    (lo + hi) / 2.0
}

/// Emulated required SNR (BER 10⁻⁵) of a rate of a generation on a fading sample.
pub fn emulated_required_snr_of(
    generation: Generation,
    rate: DataRate,
    set: &FadingSet,
) -> Option<f64> {
    let c = curve_of(generation, rate);
    set.required_snr_db(&c, TARGET_BER, c.awgn_db)
}

/// How far [`FadingSet::mean_ber`] may be from the exact mean, absolutely: a ten-millionth of
/// the 10⁻⁵ the calibration asks for, far below a 0.01 dB step of any curve.
pub const MEAN_BER_ABS_TOLERANCE: f64 = 1e-12;

/// Normalised fading of many blocks (mean SNR 0 dB), to evaluate curves at any SNR by scaling.
#[derive(Debug, Clone)]
pub struct FadingSet {
    /// Doppler spread of the channel, Hz.
    pub spread_hz: f64,
    /// Differential delay of the two paths, ms.
    pub delay_ms: f64,
    /// (weight, linear SNR gain) of every segment of every block.
    segments: Vec<(f64, f64)>,
    /// Each block's range in `segments`, weakest blocks first (see `weakest`).
    blocks: Vec<Range<usize>>,
    /// Each block's weakest segment gain, ascending, beside `blocks`. A block's effective SNR
    /// is never below its weakest segment's (EESM weighs every segment by at most one), so the
    /// BER at that gain bounds the BER of the block and of every block after it: the mean
    /// stops once the blocks left cannot move it (see [`FadingSet::mean_ber`]).
    weakest: Vec<f64>,
}

impl FadingSet {
    /// Simulate `realisations` independent channels of this fading, each for `blocks_each`
    /// consecutive blocks of `block` length.
    pub fn simulate(
        fading: &Fading,
        block: Duration,
        realisations: usize,
        blocks_each: usize,
        rng: &mut impl Rng,
    ) -> FadingSet {
        let mut segments = Vec::new();
        let mut blocks = Vec::with_capacity(realisations * blocks_each);
        for _ in 0..realisations {
            let cfg = ChannelConfig {
                snr_db: 0.0,
                fading: fading.clone(),
                drift: None,
                impairments: Vec::new(),
            };
            let Ok(ch) = Channel::new(cfg, rng) else {
                continue;
            };
            for k in 0..blocks_each {
                let b = ch.block(block * k as u32, block);
                let from = segments.len();
                segments.extend(b.segments.iter().map(|s| (s.weight, s.snr)));
                blocks.push(from..segments.len());
            }
        }
        // A NaN or negative gain counts as none, as the effective SNR counts it.
        let weakest_of = |r: &Range<usize>| {
            segments
                .get(r.clone())
                .unwrap_or_default()
                .iter()
                .filter(|(w, _)| *w > 0.0 && w.is_finite())
                .map(|&(_, g)| if g.is_nan() { 0.0 } else { g.max(0.0) })
                .fold(f64::INFINITY, f64::min)
        };
        let weakest = blocks.iter().map(weakest_of).collect();
        let mut set = FadingSet {
            spread_hz: fading.spread_hz(),
            delay_ms: fading.delay_ms(),
            segments,
            blocks,
            weakest,
        };
        set.sort_weakest_first();
        set
    }

    /// Add other samples of the same fading and block length to this one.
    pub fn pool(&mut self, others: Vec<FadingSet>) {
        for other in others {
            let offset = self.segments.len();
            self.segments.extend(other.segments);
            self.blocks.extend(
                other
                    .blocks
                    .into_iter()
                    .map(|r| r.start + offset..r.end + offset),
            );
            self.weakest.extend(other.weakest);
        }
        self.sort_weakest_first();
    }

    /// Order the blocks weakest first (see `weakest`).
    fn sort_weakest_first(&mut self) {
        let mut ordered: Vec<(f64, Range<usize>)> =
            self.weakest.drain(..).zip(self.blocks.drain(..)).collect();
        ordered.sort_by(|a, b| a.0.total_cmp(&b.0));
        (self.weakest, self.blocks) = ordered.into_iter().unzip();
    }

    /// Number of blocks.
    pub fn len(&self) -> usize {
        self.blocks.len()
    }

    /// Whether the set has no blocks.
    pub fn is_empty(&self) -> bool {
        self.blocks.is_empty()
    }

    /// Mean post-decoder BER of the curve over all blocks at mean SNR `snr_db`, to within
    /// [`MEAN_BER_ABS_TOLERANCE`] or a billionth of itself, whichever is larger.
    ///
    /// At a BER of 10⁻⁵ the mean is made by the few blocks in deep fades; the rest lie tens of
    /// dB above the waterfall. So the blocks are taken weakest first, and once the bound on
    /// the BER of every block left (the BER at the next block's weakest segment, see
    /// `weakest`) times their number is within the tolerance, they are not evaluated. This is
    /// what lets the calibration sample hold millions of blocks.
    pub fn mean_ber(&self, curve: &RateCurve, snr_db: f64) -> f64 {
        self.ber_sum(curve, snr_db, None) / self.blocks.len().max(1) as f64
    }

    /// Whether the mean BER at `snr_db` exceeds `target` (within the tolerance of
    /// [`FadingSet::mean_ber`]).
    fn ber_exceeds(&self, curve: &RateCurve, snr_db: f64, target: f64) -> bool {
        let limit = target * self.blocks.len().max(1) as f64;
        self.ber_sum(curve, snr_db, Some(limit)) > limit
    }

    /// The sum behind [`FadingSet::mean_ber`], weakest blocks first. Asked against a `limit`,
    /// it stops as soon as the answer is certain: once the sum passes it (it can only grow;
    /// below the waterfall the weakest few blocks decide), or once the blocks left could not
    /// lift it past it even at their bound (above the waterfall).
    fn ber_sum(&self, curve: &RateCurve, snr_db: f64, limit: Option<f64>) -> f64 {
        let scale = 10f64.powf(snr_db / 10.0);
        let n = self.blocks.len();
        let ber_at = |segs: &[(f64, f64)]| {
            let eff = curve.effective_snr_scaled(segs, scale, self.spread_hz, self.delay_ms);
            curve.ber(10.0 * eff.log10())
        };
        let mut sum = 0.0;
        // Plain loops: this is the inner loop of the calibration fit and its tests.
        for (i, (r, &weakest)) in self.blocks.iter().zip(&self.weakest).enumerate() {
            let rest = ber_at(&[(1.0, weakest)]) * (n - i) as f64;
            let settled = limit.is_some_and(|l| sum + rest <= l);
            if settled || rest <= (MEAN_BER_ABS_TOLERANCE * n as f64).max(1e-9 * sum) {
                break;
            }
            sum += ber_at(self.segments.get(r.clone()).unwrap_or_default());
            if limit.is_some_and(|l| sum > l) {
                break;
            }
        }
        sum
    }

    /// The mean SNR (dB) at which the mean BER crosses `target`, searching outwards from
    /// `hint` (any starting point works; a good one saves evaluations), then bisecting to
    /// 0.01 dB. `None` if the mean BER does not cross `target` between −40 and +100 dB.
    pub fn required_snr_db(&self, curve: &RateCurve, target: f64, hint: f64) -> Option<f64> {
        let above = |snr: f64| self.ber_exceeds(curve, snr, target);
        let hint = if hint.is_finite() {
            hint.clamp(-40.0, 100.0)
        } else {
            0.0
        };
        let (mut lo, mut hi);
        if above(hint) {
            // Too little SNR at the hint: step up until the BER is below target.
            lo = hint;
            let mut step = 1.0;
            hi = hint + step;
            while above(hi) {
                if hi >= 100.0 {
                    return None;
                }
                lo = hi;
                step *= 2.0;
                hi = (hi + step).min(100.0);
            }
        } else {
            hi = hint;
            let mut step = 1.0;
            lo = hint - step;
            while !above(lo) {
                if lo <= -40.0 {
                    return None;
                }
                hi = lo;
                step *= 2.0;
                lo = (lo - step).max(-40.0);
            }
        }
        // At most 140 dB / 2^15 < 0.005 dB after 15 halvings.
        for _ in 0..15 {
            if hi - lo < 0.01 {
                break;
            }
            let mid = (lo + hi) / 2.0;
            if above(mid) {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        Some((lo + hi) / 2.0)
    }
}

/// A sample of AWGN blocks of this length (the channel is constant: two blocks suffice).
pub fn awgn_set(block: Duration) -> FadingSet {
    FadingSet::simulate(
        &Fading::Awgn,
        block,
        1,
        2,
        &mut rand_chacha::ChaCha8Rng::seed_from_u64(1),
    )
}

/// Seed of the reference fading sample.
pub const REFERENCE_SEED: u64 = 0x5EED_CA1B;
/// Independent Good channel realisations in the reference sample (200 blocks each), for the
/// 110A block; the 110B block takes [`HIGH_RATE_GOOD_FACTOR`] times as many.
pub const REFERENCE_GOOD_REALISATIONS: usize = 1200;
/// How many times more Good fading the 110B block's sample holds (3200-9600 bit/s): their BER
/// 10⁻⁵ point on Good is set by fades rarer than one block in 10 000, and on 240 000 blocks six
/// independent samples put 9600 bit/s at 41.8-44.4 dB (8000 bit/s 35.3-37.7 dB), 43.44 and
/// 36.78 dB pooled, where the curves fitted on one such sample gave 42.02 and 35.56: the fit
/// had landed on a lucky sample, as the 110A rates' had on 60 000 blocks. On six times the
/// fading the spread between samples is about a third.
pub const HIGH_RATE_GOOD_FACTOR: usize = 6;
/// Independent Poor channel realisations in the reference sample (100 blocks each).
pub const REFERENCE_POOR_REALISATIONS: usize = 80;
/// The reference sample's Good pools: eight samples of each block's size, 1 920 000 blocks
/// (about 2 560 h) for the 110A block and 11 520 000 (about 13 800 h) for the 110B block's.
/// Fitted on one, 3200-9600 bit/s had landed on a lucky sample again: fourteen other samples
/// of that size put 8000 and 9600 bit/s at +0.50 and +0.45 dB on average (-0.24 to +1.27).
/// Refitted on eight, the same fourteen average +0.23 and +0.24. The 110A block followed
/// (75-2400 bit/s, whose single samples had sat 0.1-0.3 dB above the published figures).
pub const REFERENCE_POOL: GoodPool = GoodPool {
    low_rate: 8,
    high_rate: 8,
};
/// The independent check's Good pools (`skywave-bench calibrate`, `tests/calibration.rs`): four
/// samples of each block's size. One sample scatters by about 0.35 dB at 600-2400 and at 8000
/// and 9600 bit/s, and now and then lands beyond 1 dB; four pooled scatter by about half that.
pub const INDEPENDENT_POOL: GoodPool = GoodPool {
    low_rate: 4,
    high_rate: 4,
};

/// The fading sample of one long-interleaver block length: (block, Good set, Poor set).
pub type ReferenceSets = Vec<(Duration, FadingSet, FadingSet)>;

/// Simulate Good and Poor fading for every long-interleaver block length of the rate table
/// (4.8 s for 110A, 36 frames for 110B), in rate order, from `seed`: `good_realisations` for
/// 110A's block, [`HIGH_RATE_GOOD_FACTOR`] times as many for 110B's (drawn after 110A's, so
/// 110A's sample does not depend on the factor).
pub fn simulate_sets(
    seed: u64,
    good_realisations: usize,
    poor_realisations: usize,
) -> ReferenceSets {
    simulate_sets_up_to(
        seed,
        good_realisations,
        poor_realisations,
        DataRate::Bps9600,
    )
}

/// How many Good samples of its block's size each block's sample pools: see
/// [`simulate_sets_pooled`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GoodPool {
    /// Samples pooled for the 110A block (75-2400 bit/s).
    pub low_rate: usize,
    /// Samples pooled for the 110B block (3200-9600 bit/s).
    pub high_rate: usize,
}

/// [`simulate_sets`], with each block's Good sample pooled from as many independent samples of
/// its size as `pool` says: the first is [`simulate_sets`]'s own, each other one is drawn from
/// its own stream of the seed ([`good_samples`]), on its own thread.
pub fn simulate_sets_pooled(
    seed: u64,
    good_realisations: usize,
    poor_realisations: usize,
    pool: GoodPool,
) -> ReferenceSets {
    let mut sets = simulate_sets(seed, good_realisations, poor_realisations);
    let Some(good) = itu("good") else {
        return sets;
    };
    for (rate, samples) in [
        (DataRate::Bps2400, pool.low_rate),
        (DataRate::Bps9600, pool.high_rate),
    ] {
        let block = calibration_block(rate);
        if let Some((_, pooled, _)) = sets.iter_mut().find(|(b, ..)| *b == block) {
            let extra = good_samples(seed, rate, 1..samples as u64, good_realisations, &good);
            pooled.pool(extra);
        }
    }
    sets
}

/// Independent ITU-R Good samples of the block of `rate`'s modem family, each the size
/// [`simulate_sets`] draws for it (`good_realisations` channels of 200 blocks for 110A,
/// [`HIGH_RATE_GOOD_FACTOR`] times as many for 110B), one per ChaCha stream of `seed` in
/// `streams` (stream 0 is [`simulate_sets`]' own draw, so start at 1; 110A's streams are
/// offset by 2³² so the two families never share one), simulated in parallel, in stream order.
pub fn good_samples(
    seed: u64,
    rate: DataRate,
    streams: Range<u64>,
    good_realisations: usize,
    good: &Fading,
) -> Vec<FadingSet> {
    let block = calibration_block(rate);
    let n = good_realisations_for(rate, good_realisations);
    let offset = match rate.standard() {
        Standard::Mil110A => 1 << 32,
        Standard::Mil110BAppendixC => 0,
    };
    std::thread::scope(|scope| {
        let handles: Vec<_> = streams
            .map(|k| {
                scope.spawn(move || {
                    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
                    rng.set_stream(k + offset);
                    FadingSet::simulate(good, block, n, 200, &mut rng)
                })
            })
            .collect();
        // A thread that panicked lost its sample: fewer samples, never a wrong one.
        handles.into_iter().filter_map(|h| h.join().ok()).collect()
    })
}

/// Good channel realisations in one sample of `rate`'s block: `good_realisations` for 110A,
/// [`HIGH_RATE_GOOD_FACTOR`] times as many for 110B.
fn good_realisations_for(rate: DataRate, good_realisations: usize) -> usize {
    match rate.standard() {
        Standard::Mil110A => good_realisations,
        Standard::Mil110BAppendixC => good_realisations * HIGH_RATE_GOOD_FACTOR,
    }
}

/// [`simulate_sets`] for the block lengths of the rates up to `highest` only: the same
/// samples (they are drawn in rate order), without the cost of the others; a check of the
/// 110A rates needs no 110B fading.
pub fn simulate_sets_up_to(
    seed: u64,
    good_realisations: usize,
    poor_realisations: usize,
    highest: DataRate,
) -> ReferenceSets {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let (Some(good), Some(poor)) = (itu("good"), itu("poor")) else {
        return Vec::new();
    };
    let mut out: ReferenceSets = Vec::new();
    for rate in DataRate::ALL
        .into_iter()
        .filter(|r| r.bps() <= highest.bps())
    {
        let block = calibration_block(rate);
        if out.iter().any(|(b, ..)| *b == block) {
            continue;
        }
        let n = good_realisations_for(rate, good_realisations);
        let g = FadingSet::simulate(&good, block, n, 200, &mut rng);
        let p = FadingSet::simulate(&poor, block, poor_realisations, 100, &mut rng);
        out.push((block, g, p));
    }
    out
}

/// The reference fading sample the curves were fitted on ([`REFERENCE_SEED`]; [`REFERENCE_POOL`]'s
/// eight Good samples of 240 000 blocks for 110A's block and of 1 440 000 for 110B's, 8 000
/// Poor blocks for each, i.e. about 2 560 h, 13 800 h and 10 h of channel time).
pub fn reference_sets() -> ReferenceSets {
    simulate_sets_pooled(
        REFERENCE_SEED,
        REFERENCE_GOOD_REALISATIONS,
        REFERENCE_POOR_REALISATIONS,
        REFERENCE_POOL,
    )
}

/// Long-interleaver block length of a rate (the interleaver of the calibration table).
pub fn calibration_block(rate: DataRate) -> Duration {
    ModemConfig::new(rate, Interleaver::Long)
        .and_then(|c| c.block_duration())
        .unwrap_or(Duration::from_millis(4800))
}

/// Result of [`fit_rate`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Fit {
    /// Fitted slope, decades per dB.
    pub slope: f64,
    /// Fitted ε per Hz.
    pub tracking_loss: f64,
    /// Fitted EESM β factor.
    pub beta_factor: f64,
    /// Fitted β spread exponent.
    pub beta_spread_exponent: f64,
    /// Emulated Good figure with these parameters, dB.
    pub good_db: Option<f64>,
    /// Emulated Poor figure with these parameters, dB.
    pub poor_db: Option<f64>,
}

/// Bisection in log space on `[lo, hi]` for an increasing function `f` crossing 0
/// (`None` counts as "above").
fn bisect_log(lo: f64, hi: f64, steps: usize, f: impl Fn(f64) -> Option<f64>) -> f64 {
    let (mut a, mut b) = (lo.ln(), hi.ln());
    for _ in 0..steps {
        let m = (a + b) / 2.0;
        match f(m.exp()) {
            Some(v) if v <= 0.0 => a = m,
            _ => b = m,
        }
    }
    ((a + b) / 2.0).exp()
}

/// Steepest waterfall the fit normally uses, decades per dB.
pub const MAX_SLOPE: f64 = 1.0;

/// Fit one rate so that the emulated Good and Poor figures match the targets: ε to Poor, then
/// the slope to Good; if even `max_slope` leaves Good short, the slope stays there and the
/// EESM β factor is lowered instead. Three alternating rounds. If Poor is then still more than
/// 0.25 dB off (the fading alone costs more than the published Poor figure even without
/// tracking loss), the β factor is made spread-dependent: c is fitted to Poor and the exponent
/// q to Good, with ε at its floor.
#[allow(clippy::too_many_arguments)]
pub fn fit_rate(
    awgn_db: f64,
    good_db: f64,
    poor_db: f64,
    rate: DataRate,
    good: &FadingSet,
    poor: &FadingSet,
    max_slope: f64,
) -> Fit {
    let mk = |slope, tracking_loss, beta_factor, beta_spread_exponent| RateCurve {
        rate,
        awgn_db,
        slope,
        tracking_loss,
        beta_factor,
        beta_spread_exponent,
        ..curve(rate)
    };
    let req = |set: &FadingSet, c: &RateCurve, hint: f64| {
        set.required_snr_db(c, TARGET_BER, hint).unwrap_or(100.0)
    };
    let (mut slope, mut eps, mut beta, mut q) = (1.0, 1e-4, 1.0, 0.0);
    for _ in 0..3 {
        eps = bisect_log(1e-9, 10.0, 20, |e| {
            Some(req(poor, &mk(slope, e, beta, q), poor_db) - poor_db)
        });
        if beta < 1.0 || req(good, &mk(max_slope, eps, 1.0, q), good_db) < good_db {
            slope = max_slope;
            // Lower beta factor -> more penalty: good_db - req is increasing in the factor.
            beta = bisect_log(1e-3, 1.0, 16, |c| {
                Some(good_db - req(good, &mk(slope, eps, c, q), good_db))
            });
        } else {
            slope = bisect_log(0.02, max_slope, 16, |k| {
                Some(req(good, &mk(k, eps, beta, q), good_db) - good_db)
            });
        }
    }
    if (req(poor, &mk(slope, eps, beta, q), poor_db) - poor_db).abs() > 0.25 {
        eps = 1e-9;
        for _ in 0..3 {
            // Larger c -> less Poor penalty; larger q -> smaller c at 0.1 Hz -> more Good penalty.
            beta = bisect_log(1e-3, 100.0, 18, |c| {
                Some(poor_db - req(poor, &mk(slope, eps, c, q), poor_db))
            });
            q = bisect_log(1e-3, 4.0, 16, |e| {
                Some(req(good, &mk(slope, eps, beta, e), good_db) - good_db)
            });
        }
    }
    let c = mk(slope, eps, beta, q);
    Fit {
        slope,
        tracking_loss: eps,
        beta_factor: beta,
        beta_spread_exponent: q,
        good_db: good.required_snr_db(&c, TARGET_BER, good_db),
        poor_db: poor.required_snr_db(&c, TARGET_BER, poor_db),
    }
}

/// Emulated required SNR of a rate on a profile, with the calibrated curve.
pub fn emulated_required_snr(rate: DataRate, set: &FadingSet) -> Option<f64> {
    let c = curve(rate);
    set.required_snr_db(&c, TARGET_BER, c.awgn_db)
}

/// The ITU profile of the table (`good` or `poor`) as a fading model.
pub fn itu(name: &str) -> Option<Fading> {
    crate::channel::profile(name).ok().map(Fading::Watterson)
}

/// Check that an embedded data file is byte-identical to the shared calibration copy, when that
/// copy can be found (the workspace sits beside `shared/` on the development machine).
#[cfg(test)]
pub(crate) fn assert_matches_shared_copy(name: &str, embedded: &str) {
    let manifest = env!("CARGO_MANIFEST_DIR");
    let candidates = [
        format!("{manifest}/../../shared/calibration/{name}"),
        format!("{manifest}/../../../shared/calibration/{name}"),
    ];
    let mut found = false;
    for path in &candidates {
        if let Ok(text) = std::fs::read_to_string(path) {
            assert_eq!(text, embedded, "crates/emu/data/{name} differs from {path}");
            found = true;
        }
    }
    if !found {
        crate::missing::skip_or_fail(
            &format!("../shared/calibration/{name}"),
            "the byte-identity check of the embedded copy",
            "clone the project with `shared/` beside it, as CI does",
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The weakest-first mean with its early stops is the plain mean over every block, at
    /// every SNR from far below the waterfall to far above it, and the threshold test agrees
    /// with it.
    #[test]
    fn the_pruned_mean_ber_is_the_plain_mean() {
        let good = itu("good").expect("good");
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        let set = FadingSet::simulate(
            &good,
            calibration_block(DataRate::Bps9600),
            40,
            50,
            &mut rng,
        );
        assert!(set.weakest.windows(2).all(|w| w[0] <= w[1]));
        for rate in [DataRate::Bps300, DataRate::Bps2400, DataRate::Bps9600] {
            let c = curve(rate);
            let mut evaluated_some_only = false;
            for snr in (-10..=60).step_by(5).map(f64::from) {
                let scale = 10f64.powf(snr / 10.0);
                let plain = set
                    .blocks
                    .iter()
                    .map(|r| {
                        let segs = set.segments.get(r.clone()).unwrap_or_default();
                        let eff = c.effective_snr_scaled(segs, scale, set.spread_hz, set.delay_ms);
                        c.ber(10.0 * eff.log10())
                    })
                    .sum::<f64>()
                    / set.len() as f64;
                let pruned = set.mean_ber(&c, snr);
                assert!(
                    (pruned - plain).abs() <= MEAN_BER_ABS_TOLERANCE.max(1e-9 * plain),
                    "{rate:?} at {snr} dB: {pruned} against {plain}"
                );
                for target in [1e-3, TARGET_BER] {
                    assert_eq!(set.ber_exceeds(&c, snr, target), plain > target);
                }
                evaluated_some_only |= plain > 0.0 && plain < 1e-7;
            }
            assert!(evaluated_some_only, "{rate:?}: no SNR above the waterfall");
        }
    }

    #[test]
    fn embedded_table_parses_and_matches_the_shared_copy() {
        assert_matches_shared_copy("modem-required-snr.csv", REQUIRED_SNR_CSV);
        let rows = required_snr();
        assert_eq!(rows.len(), 11);
        assert_eq!(rows[0].rate, DataRate::Bps75);
        assert_eq!(rows[5].poor_db, None);
        assert_eq!(rows[10].good_db, Some(42.02));
        assert!(parse_required_snr("x").is_none());
    }

    #[test]
    fn curve_table_uses_the_published_awgn_figures() {
        for row in required_snr() {
            assert_eq!(curve(row.rate).awgn_db, row.awgn_db, "{:?}", row.rate);
        }
    }

    /// What the curves do beyond the channels the standard tests: the self-noise is the
    /// stated function of spread and delay, and on a flutter-class channel (10 Hz) the
    /// Walsh/repetition rates still reach BER 10⁻⁵ with no more SNR than at 5 Hz, while
    /// 2400 bit/s at 7 ms (beyond the 5 ms the 110A equaliser is specified for) does not.
    #[test]
    fn beyond_the_standard_channels_the_curves_go_on_as_stated() {
        let c = curve(DataRate::Bps2400);
        let close = |a: f64, b: f64| (a - b).abs() < 1e-12;
        assert!(close(c.self_noise(1.0, 2.0), c.tracking_loss));
        assert!(close(c.self_noise(0.0, 5.0), DELAY_SELF_NOISE));
        assert!(close(c.self_noise(0.0, 3.5), DELAY_SELF_NOISE / 2.0));
        assert!(close(
            c.self_noise(5.0, 0.5),
            c.tracking_loss * 5f64.powf(c.high_spread_exponent)
        ));
        assert!(close(c.self_noise(30.0, 0.5), c.self_noise(5.0, 0.5)));
        assert!(c.self_noise(2.0, 2.0) > c.self_noise(1.0, 2.0));
        assert!(close(c.self_noise(f64::NAN, f64::INFINITY), 0.0));

        let sample = |rate: DataRate, delay_ms: f64, spread_hz: f64| {
            let f = Fading::Watterson(Profile {
                name: "test".into(),
                standard: "test".into(),
                delay_ms,
                spread_hz,
            });
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
            FadingSet::simulate(&f, calibration_block(rate), 20, 30, &mut rng)
        };
        for rate in [DataRate::Bps75, DataRate::Bps150, DataRate::Bps300] {
            let c = curve(rate);
            let at5 = sample(rate, 0.5, 5.0).required_snr_db(&c, TARGET_BER, 0.0);
            let at10 = sample(rate, 0.5, 10.0).required_snr_db(&c, TARGET_BER, 0.0);
            let (Some(at5), Some(at10)) = (at5, at10) else {
                panic!("{rate:?} reaches 1e-5 at 5 and 10 Hz: {at5:?} {at10:?}");
            };
            assert!(at10 <= at5 + 0.5, "{rate:?}: {at10} against {at5}");
        }
        let c = curve_of(Generation::Mil110aMinimum, DataRate::Bps2400);
        let at =
            |delay| sample(DataRate::Bps2400, delay, 1.0).required_snr_db(&c, TARGET_BER, 20.0);
        assert!(at(2.0).zip(at(5.0)).is_some_and(|(a, b)| b > a + 6.0));
        assert_eq!(at(7.0), None);
    }

    /// Rerun the 110A-minimum fit on the reference sample and print CURVES_110A.
    #[test]
    #[ignore = "slow unoptimised: refits the 110A-minimum constants"]
    fn refit_110a() {
        let sets = reference_sets();
        for rate in [DataRate::Bps600, DataRate::Bps1200, DataRate::Bps2400] {
            let (_, _, poor) = sets
                .iter()
                .find(|(b, ..)| *b == calibration_block(rate))
                .unwrap();
            let (a, e) = fit_110a(rate, poor);
            println!("    (DataRate::Bps{}, {a:.4}, {e:.4e}),", rate.bps());
        }
    }

    /// Rerun the fits beyond the calibrated channels on the reference sample (release build)
    /// and print DELAY_SELF_NOISE and HIGH_SPREAD_EXPONENTS: the self-noise first (2400 bit/s
    /// at 5 ms / 1 Hz), then each rate's exponent with it in place.
    #[test]
    #[ignore = "slow unoptimised: refits the constants beyond the calibrated channels"]
    fn refit_beyond_the_calibrated_channels() {
        let sets = reference_sets();
        let row = |rate: DataRate, delay: f64, spread: f64| {
            MIL_110A_MINIMUM
                .iter()
                .find(|r| r.rate == rate && r.delay_ms == delay && r.spread_hz == spread)
                .copied()
                .unwrap()
        };
        let base = |rate| curve_of(Generation::Mil110aMinimum, rate);
        let r = row(DataRate::Bps2400, 5.0, 1.0);
        let set = r.sample(&sets, REFERENCE_SEED).unwrap();
        let eta = fit_delay_self_noise(&base(DataRate::Bps2400), &set, r.ber, r.snr_db);
        println!("pub const DELAY_SELF_NOISE: f64 = {eta:.4e};");
        let mut fitted = Vec::new();
        for (rate, delay) in [
            (DataRate::Bps75, 5.0),
            (DataRate::Bps150, 5.0),
            (DataRate::Bps300, 5.0),
            (DataRate::Bps2400, 2.0),
        ] {
            let r = row(rate, delay, 5.0);
            let set = r.sample(&sets, REFERENCE_SEED).unwrap();
            let c = RateCurve {
                delay_self_noise: eta,
                ..base(rate)
            };
            let p = fit_high_spread_exponent(&c, &set, r.ber, r.snr_db);
            fitted.push((rate, p));
        }
        let p300 = fitted[2].1;
        let p2400 = fitted[3].1;
        for (rate, p) in &fitted[..3] {
            println!("    (DataRate::Bps{}, {p:.4}),", rate.bps());
        }
        for (rate, k) in [(DataRate::Bps600, 1.0), (DataRate::Bps1200, 2.0)] {
            println!(
                "    (DataRate::Bps{}, {:.4}),",
                rate.bps(),
                p300 + (p2400 - p300) * k / 3.0
            );
        }
        println!("    (DataRate::Bps2400, {p2400:.4}),");
    }

    /// Rerun the fit (release build, a few minutes) and print the CURVES table.
    #[test]
    #[ignore = "slow: refits the calibration constants"]
    fn refit() {
        let sets = reference_sets();
        let find = |rate: DataRate| {
            sets.iter()
                .find(|(b, ..)| *b == calibration_block(rate))
                .map(|(_, g, p)| (g, p))
        };
        let only: Option<Vec<u32>> = std::env::var("SKYWAVE_REFIT_RATES")
            .ok()
            .map(|v| v.split(',').filter_map(|r| r.trim().parse().ok()).collect());
        let max_slope: f64 = std::env::var("SKYWAVE_REFIT_MAX_SLOPE")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(MAX_SLOPE);
        let rows: Vec<RequiredSnr> = required_snr()
            .into_iter()
            .filter(|r| only.as_ref().is_none_or(|o| o.contains(&r.rate.bps())))
            .collect();
        let lines: Vec<String> = std::thread::scope(|scope| {
            let handles: Vec<_> = rows
                .iter()
                .map(|row| {
                    let (g, p) = find(row.rate).unwrap();
                    scope.spawn(move || {
                        let poor_target = row.poor_db.unwrap_or(18.0);
                        let good_target = row.good_db.unwrap_or(row.awgn_db + 9.0);
                        let fit = fit_rate(row.awgn_db, good_target, poor_target, row.rate, g, p, max_slope);
                        format!(
                            "    (DataRate::Bps{}, {}, {:.4}, {:.4e}, {:.4}, {:.4}), // good {:?} ({good_target}) poor {:?} ({poor_target})",
                            row.rate.bps(),
                            row.awgn_db,
                            fit.slope,
                            fit.tracking_loss,
                            fit.beta_factor,
                            fit.beta_spread_exponent,
                            fit.good_db,
                            fit.poor_db
                        )
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for line in lines {
            println!("{line}");
        }
    }
}
