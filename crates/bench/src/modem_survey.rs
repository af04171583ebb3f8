//! `skywave-bench modem`: the modem alone on a grid of conditions ([`skywave_emu::survey`]):
//! for each modem generation, rate, interleaver, channel, SNR and frame size, the blocks
//! damaged and the frames lost, before any protocol repeats or gives up. The table explains
//! the scenarios' results (why a faster rate can deliver less on a fading channel) and helps
//! an operator choose a rate.
//!
//! Sits beside [`crate::sweep`], on the same condition parsing ([`crate::stack`]).

use std::fmt::Write as _;

use skywave_emu::modem::Generation;
use skywave_emu::survey::{self, Survey, SurveyConfig};

use crate::model::Condition;
use crate::stack::{channel_config, modem_config_for};

/// The grid to survey.
#[derive(Debug, Clone)]
pub struct SurveySpec {
    /// Modem generations.
    pub generations: Vec<Generation>,
    /// Rates, bit/s.
    pub rates: Vec<u32>,
    /// Interleaver names.
    pub interleavers: Vec<String>,
    /// Channel names (`awgn` or a profile).
    pub channels: Vec<String>,
    /// SNRs, dB in 3 kHz.
    pub snrs: Vec<f64>,
    /// Frame sizes on the air, bytes.
    pub frame_bytes: Vec<usize>,
    /// Frames per transmission.
    pub frames_per_transmission: usize,
    /// Transmissions per condition.
    pub transmissions: usize,
    /// Seed (the same for every condition: one fading realisation per channel and rate).
    pub seed: u64,
}

/// One condition of the grid and what the survey found there.
#[derive(Debug, Clone)]
pub struct SurveyRow {
    /// Modem generation.
    pub generation: Generation,
    /// Rate, bit/s.
    pub rate_bps: u32,
    /// Interleaver name.
    pub interleaver: String,
    /// Channel name.
    pub channel: String,
    /// SNR, dB.
    pub snr_db: f64,
    /// Frame size, bytes.
    pub frame_bytes: usize,
    /// The counts, or why the condition could not run.
    pub result: Result<Survey, String>,
}

/// Runs every condition of the grid, in the order generation, rate, interleaver, channel,
/// SNR, frame size.
pub fn run_survey(spec: &SurveySpec) -> Vec<SurveyRow> {
    let mut rows = Vec::new();
    for &generation in &spec.generations {
        for &rate_bps in &spec.rates {
            for interleaver in &spec.interleavers {
                for channel in &spec.channels {
                    for &snr_db in &spec.snrs {
                        for &frame_bytes in &spec.frame_bytes {
                            let cond = Condition {
                                channel: channel.clone(),
                                snr_db,
                                rate_bps,
                                interleaver: interleaver.clone(),
                                seed: spec.seed,
                                segment_size: 1023,
                                modem: Some(generation),
                                turnaround: None,
                                cas1: false,
                                link_idle: None,
                                default_ttl: None,
                                ip_ttl: None,
                                changes: Default::default(),
                            };
                            rows.push(SurveyRow {
                                generation,
                                rate_bps,
                                interleaver: interleaver.clone(),
                                channel: channel.clone(),
                                snr_db,
                                frame_bytes,
                                result: survey_one(spec, &cond, generation, frame_bytes),
                            });
                        }
                    }
                }
            }
        }
    }
    rows
}

fn survey_one(
    spec: &SurveySpec,
    cond: &Condition,
    generation: Generation,
    frame_bytes: usize,
) -> Result<Survey, String> {
    // A rate the generation lacks is refused by the modem itself (`ModemError::UnsupportedRate`).
    let config = SurveyConfig {
        modem: modem_config_for(cond, generation).map_err(|e| e.to_string())?,
        channel: channel_config(cond).map_err(|e| e.to_string())?,
        frame_bytes,
        frames_per_transmission: spec.frames_per_transmission,
        transmissions: spec.transmissions,
        seed: spec.seed,
    };
    survey::run(&config).map_err(|e| e.to_string())
}

const COLUMNS: [&str; 10] = [
    "modem",
    "rate_bps",
    "interleaver",
    "channel",
    "snr_db",
    "frame_bytes",
    "mean_ber",
    "blocks_damaged_pct",
    "frames_lost_pct",
    "channel_hours",
];

fn cells(r: &SurveyRow) -> Vec<String> {
    let mut v = vec![
        r.generation.to_string(),
        r.rate_bps.to_string(),
        r.interleaver.clone(),
        r.channel.clone(),
        format!("{}", r.snr_db),
        r.frame_bytes.to_string(),
    ];
    match &r.result {
        Ok(s) => v.extend([
            format!("{:.1e}", s.mean_ber()),
            format!("{:.2}", 100.0 * s.block_damage_rate()),
            format!("{:.2}", 100.0 * s.frame_loss_rate()),
            format!("{:.1}", s.channel_seconds / 3600.0),
        ]),
        Err(e) => v.extend([e.clone(), "—".into(), "—".into(), "—".into()]),
    }
    v
}

/// The rows as a Markdown table.
pub fn survey_markdown(rows: &[SurveyRow]) -> String {
    let mut out = format!("| {} |\n", COLUMNS.join(" | "));
    let _ = writeln!(out, "|---|---:|---|---|---:|---:|---:|---:|---:|---:|");
    for r in rows {
        let c: Vec<String> = cells(r).iter().map(|c| c.replace('|', "\\|")).collect();
        let _ = writeln!(out, "| {} |", c.join(" | "));
    }
    out
}

/// The rows as CSV (error texts quoted).
pub fn survey_csv(rows: &[SurveyRow]) -> String {
    let mut out = format!("{}\n", COLUMNS.join(","));
    for r in rows {
        let c: Vec<String> = cells(r)
            .into_iter()
            .map(|c| {
                if c.contains([',', '"']) {
                    format!("\"{}\"", c.replace('"', "\"\""))
                } else {
                    c
                }
            })
            .collect();
        let _ = writeln!(out, "{}", c.join(","));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(generations: Vec<Generation>, rates: Vec<u32>) -> SurveySpec {
        SurveySpec {
            generations,
            rates,
            interleavers: vec!["short".into()],
            channels: vec!["good".into()],
            snrs: vec![15.0],
            frame_bytes: vec![276],
            frames_per_transmission: 4,
            transmissions: 500,
            seed: 1,
        }
    }

    #[test]
    fn the_grid_runs_in_order_and_says_what_it_cannot_run() {
        let rows = run_survey(&spec(
            vec![Generation::Mil110aMinimum, Generation::Rm6],
            vec![2400, 9600],
        ));
        let keys: Vec<(Generation, u32)> =
            rows.iter().map(|r| (r.generation, r.rate_bps)).collect();
        assert_eq!(
            keys,
            [
                (Generation::Mil110aMinimum, 2400),
                (Generation::Mil110aMinimum, 9600),
                (Generation::Rm6, 2400),
                (Generation::Rm6, 9600),
            ]
        );
        assert!(rows[0].result.is_ok());
        let err = rows[1].result.as_ref().unwrap_err();
        assert!(err.contains("stops at 2400"), "{err}");
        let md = survey_markdown(&rows);
        assert_eq!(md.lines().count(), 2 + 4);
        assert!(
            md.contains("| 110a-minimum | 2400 | short | good | 15 | 276 |"),
            "{md}"
        );
        let csv = survey_csv(&rows);
        assert!(csv.starts_with("modem,rate_bps,"), "{csv}");
        assert_eq!(csv.lines().count(), 1 + 4);
    }

    #[test]
    fn a_bad_condition_is_a_row_with_the_reason() {
        let mut s = spec(vec![Generation::Rm6], vec![1234]);
        s.channels = vec!["nowhere".into()];
        let rows = run_survey(&s);
        let err = rows[0].result.as_ref().unwrap_err();
        assert!(err.contains("1234"), "{err}");
    }
}
