//! Calibration test: the emulated MIL-STD-188-110A/B modem reaches BER 1e-5 at the published
//! SNR of `modem-required-snr.csv` on AWGN, ITU-R Good and ITU-R Poor (long interleaver), and
//! needs more SNR on Good than on Poor wherever the table does.
//!
//! What this does and does not show: each rate's curve has its AWGN position taken from the
//! table and two or three further parameters fitted to that rate's published Good and Poor
//! figures on a seeded reference sample (`skywave_emu::calibration`). On that sample the match
//! is a fit residual (asserted below 0.02 dB), not a prediction. The prediction is the
//! independent sample: the same model on fading the fit never saw.
//!
//! The fading is simulated with the real `Channel` (Watterson two-path, sum of sinusoids) over
//! many blocks from independent channel realisations; the required SNR is found by bisection on
//! the mean block BER (see `skywave_emu::calibration` for why the mean of the per-block expected
//! BER is the BER). The asserted test uses the seeded reference sample the curves were fitted on
//! (eight pooled samples of each block's Good size, 240 000 blocks for the 110A block and
//! 1 440 000 for the 110B block, 8 000 Poor blocks each). An independent sample (another seed, the one `skywave-bench
//! calibrate` prints; four samples of each block's Good size pooled) is asserted within 1 dB of
//! every published figure. On ITU Good the 1e-5 point rests on rare deep fades, so a single
//! sample of either block's size scatters by about a third of a dB, and now and then beyond
//! 1 dB at 8000 and 9600 bit/s: `single_samples_scatter_around_the_published_figure` prints
//! four of each and bounds their mean.
//! Run with `--nocapture` to see the tables.

// Test code: a missing embedded profile is a bug worth a panic.
#![allow(clippy::expect_used)]

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use skywave_emu::calibration::{
    FadingSet, INDEPENDENT_POOL, REFERENCE_GOOD_REALISATIONS, REFERENCE_POOR_REALISATIONS,
    ReferenceSets, calibration_block, emulated_required_snr, itu, reference_sets, required_snr,
    simulate_sets_pooled,
};
use skywave_emu::channel::Fading;
use skywave_emu::modem::DataRate;

/// The fit residual on the sample the curves were fitted on.
const FIT_RESIDUAL_DB: f64 = 0.02;

/// Out of sample: AWGN (set by the table itself, independent of fading) and Poor as
/// docs/emulator.md states them.
const AWGN_OUT_OF_SAMPLE_DB: f64 = 0.02;
const POOR_OUT_OF_SAMPLE_DB: f64 = 0.25;

/// Out of sample on Good: the 1 dB at every rate (the largest miss on this pooled
/// sample is +0.21 dB, at 9600 bit/s; a single sample of one block's size now and then misses
/// 1 dB at 8000 and 9600 bit/s, see the file docs).
fn good_out_of_sample_db(_rate: DataRate) -> f64 {
    1.0
}

/// Compare every row against per-column tolerances (AWGN, Good by rate, Poor).
fn check(
    sets: &ReferenceSets,
    awgn_tolerance: f64,
    good_tolerance: impl Fn(DataRate) -> f64,
    poor_tolerance: f64,
) {
    let fmt = |v: Option<f64>| v.map_or_else(|| "-".to_owned(), |v| format!("{v:.2}"));
    println!("| rate | AWGN pub | AWGN emu | Good pub | Good emu | Poor pub | Poor emu |");
    println!("|---|---|---|---|---|---|---|");
    let mut failures = Vec::new();
    for row in required_snr() {
        let block = calibration_block(row.rate);
        let (_, good_set, poor_set) = sets
            .iter()
            .find(|(b, ..)| *b == block)
            .expect("a sample for every block length");
        let awgn_set = FadingSet::simulate(
            &Fading::Awgn,
            block,
            1,
            2,
            &mut ChaCha8Rng::seed_from_u64(1),
        );
        let awgn = emulated_required_snr(row.rate, &awgn_set);
        let good = emulated_required_snr(row.rate, good_set);
        let poor = emulated_required_snr(row.rate, poor_set);
        println!(
            "| {} | {} | {} | {} | {} | {} | {} |",
            row.rate.bps(),
            fmt(Some(row.awgn_db)),
            fmt(awgn),
            fmt(row.good_db),
            fmt(good),
            fmt(row.poor_db),
            fmt(poor)
        );
        for (name, published, emulated, tolerance) in [
            ("AWGN", Some(row.awgn_db), awgn, awgn_tolerance),
            ("Good", row.good_db, good, good_tolerance(row.rate)),
            ("Poor", row.poor_db, poor, poor_tolerance),
        ] {
            let Some(published) = published else { continue };
            match emulated {
                Some(e) if (e - published).abs() <= tolerance => {}
                _ => failures.push(format!(
                    "{} bit/s {name}: emulated {emulated:?}, published {published}",
                    row.rate.bps()
                )),
            }
        }
        if let (Some(pg), Some(pp), Some(eg), Some(ep)) = (row.good_db, row.poor_db, good, poor)
            && pg > pp
            && eg <= ep
        {
            failures.push(format!(
                "{} bit/s: Good ({eg:.2}) should need more than Poor ({ep:.2})",
                row.rate.bps()
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "calibration failures:\n{}",
        failures.join("\n")
    );
}

/// The fit: on the reference sample every published figure is met to the fit residual.
#[test]
fn emulated_modem_reproduces_the_published_required_snr() {
    check(
        &reference_sets(),
        FIT_RESIDUAL_DB,
        |_| FIT_RESIDUAL_DB,
        FIT_RESIDUAL_DB,
    );
}

/// The independent sample: another seed (the one `skywave-bench calibrate` prints), the
/// reference sample's size for the 110A block and Poor, [`INDEPENDENT_POOL`] samples
/// of the 110B block's Good size pooled.
fn independent_sets() -> ReferenceSets {
    simulate_sets_pooled(
        INDEPENDENT_SEED,
        REFERENCE_GOOD_REALISATIONS,
        REFERENCE_POOR_REALISATIONS,
        INDEPENDENT_POOL,
    )
}

/// The prediction: an independent sample of the same size (another seed) stays within the
/// bands docs/emulator.md states (the README gives the summary).
#[test]
fn independent_sample_stays_close() {
    check(
        &independent_sets(),
        AWGN_OUT_OF_SAMPLE_DB,
        good_out_of_sample_db,
        POOR_OUT_OF_SAMPLE_DB,
    );
}

/// Seed of the independent sample (the one `skywave-bench calibrate` prints).
const INDEPENDENT_SEED: u64 = 0xBADC_0FFE;

/// Single independent samples of ITU-R Good, each of the size one sample of its block has
/// (240 000 blocks for 110A, 1 440 000 for 110B): the 1e-5 point on a 0.1 Hz channel rests on
/// fades rarer than one block in 10 000 (at 8000 and 9600 bit/s), so single samples scatter by
/// about a third of a dB. Run with `--nocapture` for the table.
///
/// Both blocks' curves are fitted on eight pooled samples: every single sample within 1 dB of
/// the published figure and their mean within 0.3 dB. (Until 2026-11-29 75-2400 bit/s were
/// fitted on one sample, and their means sat 0.1-0.3 dB above the published figures.)
#[test]
fn single_samples_scatter_around_the_published_figure() {
    use skywave_emu::calibration::good_samples;
    const SAMPLES: u64 = 4;
    let good = itu("good").expect("ITU-R Good is embedded");
    let mut failures = Vec::new();
    const MEAN_BAND: f64 = 0.3;
    const EACH_BAND: f64 = 1.0;
    for family in [DataRate::Bps2400, DataRate::Bps9600] {
        let samples = good_samples(
            INDEPENDENT_SEED,
            family,
            1..1 + SAMPLES,
            REFERENCE_GOOD_REALISATIONS,
            &good,
        );
        assert_eq!(samples.len(), SAMPLES as usize);
        for row in required_snr()
            .into_iter()
            .filter(|r| calibration_block(r.rate) == calibration_block(family))
        {
            let Some(published) = row.good_db else {
                continue;
            };
            let offsets: Vec<f64> = samples
                .iter()
                .map(|set| {
                    emulated_required_snr(row.rate, set).map_or(f64::INFINITY, |e| e - published)
                })
                .collect();
            let mean = offsets.iter().sum::<f64>() / offsets.len() as f64;
            let shown: Vec<String> = offsets.iter().map(|o| format!("{o:+.2}")).collect();
            println!(
                "{} bit/s Good, single samples: {} dB (mean {mean:+.2})",
                row.rate.bps(),
                shown.join(", ")
            );
            if mean.abs() > MEAN_BAND || offsets.iter().any(|o| o.abs() > EACH_BAND) {
                failures.push(format!("{} bit/s: {offsets:?}", row.rate.bps()));
            }
        }
    }
    assert!(failures.is_empty(), "{failures:?}");
}

/// The MIL-STD-188-110A-minimum generation meets every row of the standard's table: to the fit
/// residual on the reference sample, within 1 dB on an independent one; and it has no rate
/// above 2400 bit/s. The rows at 2 ms and 1 Hz place the curves; the 5 ms / 1 Hz row fixes the
/// equaliser's self-noise at 5 ms and the 5 Hz rows the tracking loss's growth beyond 1 Hz
/// (`skywave_emu::calibration`), each fitted once on the reference sample.
#[test]
fn the_110a_minimum_modem_meets_the_standard_table() {
    use skywave_emu::calibration::{MIL_110A_MINIMUM, REFERENCE_SEED, simulate_sets_up_to};
    use skywave_emu::modem::{Generation, Interleaver, ModemConfig};
    // The standard's rows are 75-2400 bit/s: the 110A block's samples alone.
    let sets = |seed| {
        simulate_sets_up_to(
            seed,
            REFERENCE_GOOD_REALISATIONS,
            REFERENCE_POOR_REALISATIONS,
            DataRate::Bps2400,
        )
    };
    let mut checked = 0;
    for (sets, seed, tolerance) in [
        (sets(REFERENCE_SEED), REFERENCE_SEED, 0.05),
        (sets(INDEPENDENT_SEED), INDEPENDENT_SEED, 1.0),
    ] {
        for row in MIL_110A_MINIMUM {
            let set = row.sample(&sets, seed).expect("a sample for every row");
            let e = row.emulated_snr_db(&set).expect("reaches the row's BER");
            println!(
                "{} bit/s, {} ms, {} Hz, BER {:e}: emulated {e:.2}, standard {}",
                row.rate.bps(),
                row.delay_ms,
                row.spread_hz,
                row.ber,
                row.snr_db
            );
            assert!((e - row.snr_db).abs() <= tolerance, "{row:?}: {e}");
            checked += 1;
        }
    }
    assert_eq!(checked, 18, "nine rows, two samples");
    let m = ModemConfig::new(DataRate::Bps4800, Interleaver::Long).expect("RM6 has 4800");
    assert!(m.with_generation(Generation::Mil110aMinimum).is_err());
}

/// Nothing in the model says "short interleaver": its penalty on a fading channel must come out
/// of the fading and the effective-SNR mapping alone. On ITU Poor a 0.6 s block sees fewer
/// independent fades than a 4.8 s block, so it needs more SNR; on AWGN both need the same.
#[test]
fn short_interleaver_costs_snr_on_poor() {
    use skywave_emu::modem::{Interleaver, ModemConfig};
    let mut rng = ChaCha8Rng::seed_from_u64(0x5407);
    let poor = itu("poor").expect("poor profile");
    for rate in [DataRate::Bps600, DataRate::Bps2400] {
        let block = |il| {
            ModemConfig::new(rate, il)
                .and_then(|m| m.block_duration())
                .expect("110A block")
        };
        let short = FadingSet::simulate(&poor, block(Interleaver::Short), 40, 400, &mut rng);
        let long = FadingSet::simulate(&poor, block(Interleaver::Long), 40, 100, &mut rng);
        let s = emulated_required_snr(rate, &short).expect("short crosses 1e-5");
        let l = emulated_required_snr(rate, &long).expect("long crosses 1e-5");
        println!(
            "{} bit/s on Poor: short {s:.2} dB, long {l:.2} dB",
            rate.bps()
        );
        assert!(
            s > l + 0.5,
            "{} bit/s: short {s:.2} dB should need more than long {l:.2} dB",
            rate.bps()
        );
    }
}
