//! Sweeps: every combination of scenarios, channels, SNRs, rates, interleavers, message sizes,
//! run lengths and TCP settings, each run once per seed, reduced to one [`Row`] per combination
//! with the mean (and spread) over the seeds.
//!
//! Sits above [`crate::runner`] (one run) and below [`crate::report`] and [`crate::plot`], which
//! turn rows into tables and figures, and the `skywave-bench` CLI.

use skywave_emu::modem::Generation;
use std::collections::HashMap;
use std::time::Duration;

use crate::model::{
    ChannelChanges, Condition, RunResult, Scenario, TcpOverrides, TcpProfile, TcpSettings, Workload,
};
use crate::runner::{BenchError, run};
use crate::workload::Shape;

/// What to sweep over.
#[derive(Debug, Clone, PartialEq)]
pub struct SweepSpec {
    /// Scenarios (each gets its own row per condition).
    pub scenarios: Vec<Scenario>,
    /// Channels (`awgn` or a profile name).
    pub channels: Vec<String>,
    /// SNRs, dB in 3 kHz.
    pub snrs_db: Vec<f64>,
    /// Modem rates, bit/s.
    pub rates_bps: Vec<u32>,
    /// Interleavers (`zero`, `short`, `long`, ...).
    pub interleavers: Vec<String>,
    /// Workload shape: whole messages (Isode) or text attachments (NTIA).
    pub shape: Shape,
    /// Message sizes (Isode) or attachment sizes (NTIA), bytes.
    pub sizes: Vec<usize>,
    /// Messages per run.
    pub counts: Vec<usize>,
    /// TCP profiles; only the TCP scenarios are run once per profile (and per MSS and window
    /// override). Empty: each scenario's own ([`Scenario::default_profile`]).
    pub tcp_profiles: Vec<TcpProfile>,
    /// MSS overrides, bytes (empty: the profile's).
    pub mss: Vec<u16>,
    /// Receive-window overrides, bytes (empty: the profile's).
    pub windows: Vec<u32>,
    /// Initial RTT override (JNOS IRTT); `None`: the profile's.
    pub irtt: Option<Duration>,
    /// Longest back-off override (JNOS maxwait); `None`: the profile's.
    pub max_wait: Option<Duration>,
    /// Smallest RTO override (skywave's TCP only); `None`: the profile's.
    pub min_rto: Option<Duration>,
    /// Changes to every TCP run's profile: its engine, slow-start threshold, SACK, tail-loss
    /// probe, delayed-ACK engine and congestion control.
    pub tcp: TcpOverrides,
    /// The ship's mail-queue timer (JNOS `smtp timer`) for the TCP scenarios; `None`: the
    /// profile's (none: the queue runs once).
    pub smtp_timer: Option<Duration>,
    /// Seeds; every combination is run once per seed.
    pub seeds: Vec<u64>,
    /// STANAG 5066 D_PDU segment size for every run, bytes.
    pub segment_size: usize,
    /// Modem generation for every run; `None`: each scenario's own.
    pub modem: Option<Generation>,
    /// The receiving station's turnaround for every run; `None`: the modem's default.
    pub turnaround: Option<Duration>,
    /// CAS-1 linking before the first ARQ data ([`Condition::cas1`]).
    pub cas1: bool,
    /// With `cas1`: idle links are broken after this long ([`Condition::link_idle`]).
    pub link_idle: Option<Duration>,
    /// The 5066 nodes' default maximum TTL ([`Condition::default_ttl`]).
    pub default_ttl: Option<Duration>,
    /// The TTL the IP client asks for ([`Condition::ip_ttl`]).
    pub ip_ttl: Option<Duration>,
    /// How the channel changes during every run ([`Condition::changes`]).
    pub changes: ChannelChanges,
}

impl SweepSpec {
    /// The CI sweep: every scenario, 1200 bit/s, short interleaver, a clean (30 dB AWGN)
    /// channel, the four Isode message sizes one at a time, one seed, each TCP scenario with its
    /// default profile.
    pub fn quick() -> Self {
        Self {
            scenarios: Scenario::ALL.to_vec(),
            channels: vec!["awgn".into()],
            snrs_db: vec![30.0],
            rates_bps: vec![1200],
            interleavers: vec!["short".into()],
            shape: Shape::Isode,
            sizes: crate::workload::ISODE_SIZES.to_vec(),
            counts: vec![1],
            tcp_profiles: Vec::new(),
            mss: Vec::new(),
            windows: Vec::new(),
            irtt: None,
            max_wait: None,
            min_rto: None,
            tcp: TcpOverrides::NONE,
            smtp_timer: None,
            seeds: vec![1],
            segment_size: DEFAULT_SEGMENT,
            modem: None,
            turnaround: None,
            cas1: false,
            link_idle: None,
            default_ttl: None,
            ip_ttl: None,
            changes: ChannelChanges::default(),
        }
    }

    /// The combinations, in table order (scenario outermost, then channel, rate, interleaver,
    /// SNR, size, count, TCP settings).
    pub fn points(&self) -> Vec<Point> {
        let mut out = Vec::new();
        for &scenario in &self.scenarios {
            for channel in &self.channels {
                for &rate_bps in &self.rates_bps {
                    for interleaver in &self.interleavers {
                        for &snr_db in &self.snrs_db {
                            for &size in &self.sizes {
                                for &count in &self.counts {
                                    let mut settings = self.tcp_settings(scenario, rate_bps);
                                    if !scenario.is_tcp() {
                                        // Not used by the scenario: one row, not one per profile.
                                        settings.truncate(1);
                                    }
                                    for tcp in settings {
                                        out.push(Point {
                                            scenario,
                                            channel: channel.clone(),
                                            snr_db,
                                            rate_bps,
                                            interleaver: interleaver.clone(),
                                            size,
                                            count,
                                            segment_size: self.segment_size,
                                            modem: self.modem,
                                            turnaround: self.turnaround,
                                            cas1: self.cas1,
                                            link_idle: self.link_idle,
                                            default_ttl: self.default_ttl,
                                            ip_ttl: self.ip_ttl,
                                            changes: self.changes.clone(),
                                            tcp,
                                        });
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        out
    }

    /// The TCP settings a scenario runs with at a rate: each profile (or the scenario's own),
    /// times the MSS and window overrides, with the RTO overrides applied.
    pub fn tcp_settings(&self, scenario: Scenario, rate_bps: u32) -> Vec<TcpSettings> {
        let profiles = if self.tcp_profiles.is_empty() {
            vec![scenario.default_profile()]
        } else {
            self.tcp_profiles.clone()
        };
        let mss: Vec<Option<u16>> = if self.mss.is_empty() {
            vec![None]
        } else {
            self.mss.iter().copied().map(Some).collect()
        };
        let windows: Vec<Option<u32>> = if self.windows.is_empty() {
            vec![None]
        } else {
            self.windows.iter().copied().map(Some).collect()
        };
        let mut out = Vec::new();
        for p in profiles {
            for &m in &mss {
                for &w in &windows {
                    let mut t = self.tcp.apply(p.settings(rate_bps).with_overrides(m, w));
                    if let Some(min_rto) = self.min_rto {
                        t.min_rto = min_rto;
                    }
                    if let Some(irtt) = self.irtt {
                        t.irtt = irtt;
                    }
                    if let Some(max_wait) = self.max_wait {
                        t.max_wait = max_wait;
                    }
                    if self.smtp_timer.is_some() {
                        t.smtp_timer = self.smtp_timer;
                    }
                    out.push(t);
                }
            }
        }
        out
    }

    /// Runs in the sweep (points times seeds).
    pub fn runs(&self) -> usize {
        self.points().len() * self.seeds.len()
    }
}

/// The emulator's D_PDU segment size unless a sweep says otherwise: the largest Annex C allows.
pub const DEFAULT_SEGMENT: usize = 1023;

pub use crate::tcp::profile::jnos_tcp;

/// One combination of a sweep.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    /// Scenario.
    pub scenario: Scenario,
    /// Channel.
    pub channel: String,
    /// SNR, dB.
    pub snr_db: f64,
    /// Modem rate, bit/s.
    pub rate_bps: u32,
    /// Interleaver.
    pub interleaver: String,
    /// Message (or attachment) size, bytes.
    pub size: usize,
    /// Messages per run.
    pub count: usize,
    /// TCP settings (used by the TCP scenarios only).
    pub tcp: TcpSettings,
    /// STANAG 5066 D_PDU segment size, bytes.
    pub segment_size: usize,
    /// Modem generation; `None`: the scenario's own.
    pub modem: Option<Generation>,
    /// The receiving station's turnaround; `None`: the modem's default.
    pub turnaround: Option<Duration>,
    /// CAS-1 linking before the first ARQ data ([`Condition::cas1`]).
    pub cas1: bool,
    /// With `cas1`: idle links are broken after this long ([`Condition::link_idle`]).
    pub link_idle: Option<Duration>,
    /// The 5066 nodes' default maximum TTL ([`Condition::default_ttl`]).
    pub default_ttl: Option<Duration>,
    /// The TTL the IP client asks for ([`Condition::ip_ttl`]).
    pub ip_ttl: Option<Duration>,
    /// How the channel changes during the run ([`Condition::changes`]).
    pub changes: ChannelChanges,
}

impl Point {
    /// The condition of this point for one seed.
    pub fn condition(&self, seed: u64) -> Condition {
        Condition {
            channel: self.channel.clone(),
            snr_db: self.snr_db,
            rate_bps: self.rate_bps,
            interleaver: self.interleaver.clone(),
            seed,
            segment_size: self.segment_size,
            modem: self.modem,
            turnaround: self.turnaround,
            cas1: self.cas1,
            link_idle: self.link_idle,
            default_ttl: self.default_ttl,
            ip_ttl: self.ip_ttl,
            changes: self.changes.clone(),
        }
    }

    /// A short label for progress displays.
    pub fn label(&self) -> String {
        format!(
            "{} {} {} dB {} bit/s {} B x{}",
            self.scenario, self.channel, self.snr_db, self.rate_bps, self.size, self.count
        )
    }
}

/// Mean and spread of one point over its seeds.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Stats {
    /// Runs aggregated.
    pub runs: usize,
    /// Mean of the measured seconds.
    pub seconds_mean: f64,
    /// Sample standard deviation of the measured seconds (0 for one run).
    pub seconds_spread: f64,
    /// Mean throughput, bit/s.
    pub throughput_bps: f64,
    /// Mean transmissions.
    pub transmissions: f64,
    /// Mean bytes on the air.
    pub bytes_on_air: f64,
    /// Mean retransmissions.
    pub retransmissions: f64,
    /// Mean TCP segments resent.
    pub tcp_resent_segments: f64,
    /// Mean TCP payload bytes resent.
    pub tcp_resent_bytes: f64,
    /// Messages delivered byte-identical, summed over the runs.
    pub delivered: usize,
    /// Messages carried, summed over the runs.
    pub expected: usize,
}

impl Stats {
    /// Reduces the results of one point's runs.
    pub fn of(results: &[RunResult]) -> Stats {
        let n = results.len();
        if n == 0 {
            return Stats::default();
        }
        let mean = |f: &dyn Fn(&RunResult) -> f64| results.iter().map(f).sum::<f64>() / n as f64;
        let seconds_mean = mean(&|r| r.seconds);
        let seconds_spread = if n > 1 {
            let var = results
                .iter()
                .map(|r| (r.seconds - seconds_mean).powi(2))
                .sum::<f64>()
                / (n - 1) as f64;
            var.sqrt()
        } else {
            0.0
        };
        Stats {
            runs: n,
            seconds_mean,
            seconds_spread,
            throughput_bps: mean(&|r| r.throughput_bps),
            transmissions: mean(&|r| r.transmissions as f64),
            bytes_on_air: mean(&|r| r.bytes_on_air as f64),
            retransmissions: mean(&|r| r.retransmissions as f64),
            tcp_resent_segments: mean(&|r| r.tcp_resent_segments as f64),
            tcp_resent_bytes: mean(&|r| r.tcp_resent_bytes as f64),
            delivered: results.iter().map(|r| r.delivered).sum(),
            expected: results.iter().map(|r| r.expected).sum(),
        }
    }

    /// Every message of every run was delivered.
    pub fn all_delivered(&self) -> bool {
        self.runs > 0 && self.delivered == self.expected
    }
}

/// One line of the output tables.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// What was run.
    pub point: Point,
    /// The figures, or why the point could not be run.
    pub stats: Result<Stats, String>,
}

/// Runs a sweep, calling `progress` after each run with (runs done, runs in all, the point).
/// A point whose runs fail (e.g. a scenario not built) becomes a row carrying the error; the
/// sweep goes on.
pub fn run_sweep(spec: &SweepSpec, mut progress: impl FnMut(usize, usize, &Point)) -> Vec<Row> {
    let points = spec.points();
    let total = points.len() * spec.seeds.len();
    let mut done = 0usize;
    let mut cache: HashMap<(usize, usize, u64), Result<Workload, String>> = HashMap::new();
    let mut rows = Vec::with_capacity(points.len());
    for point in points {
        let mut results = Vec::with_capacity(spec.seeds.len());
        let mut error: Option<String> = None;
        for &seed in &spec.seeds {
            if error.is_none() {
                let work = cache
                    .entry((point.size, point.count, seed))
                    .or_insert_with(|| {
                        spec.shape
                            .workload(point.size, point.count, seed)
                            .map_err(|e| e.to_string())
                    });
                let outcome = match work {
                    Ok(work) => run(point.scenario, &point.condition(seed), &point.tcp, work),
                    Err(e) => Err(BenchError::Session(e.clone())),
                };
                match outcome {
                    Ok(r) => results.push(r),
                    Err(e) => error = Some(e.to_string()),
                }
            }
            done += 1;
            progress(done, total, &point);
        }
        let stats = match error {
            Some(e) => Err(e),
            None => Ok(Stats::of(&results)),
        };
        rows.push(Row { point, stats });
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::HmtpCompression;

    #[test]
    fn stats_give_mean_and_sample_spread() {
        let r = |s: f64, d: usize| RunResult {
            seconds: s,
            throughput_bps: 100.0 * s,
            transmissions: 2,
            bytes_on_air: 10,
            retransmissions: 1,
            tcp_resent_segments: 0,
            tcp_resent_bytes: 0,
            delivered: d,
            expected: 1,
        };
        let s = Stats::of(&[r(2.0, 1), r(4.0, 1), r(6.0, 0)]);
        assert_eq!(s.runs, 3);
        assert_eq!(s.seconds_mean, 4.0);
        assert_eq!(s.seconds_spread, 2.0);
        assert_eq!(s.throughput_bps, 400.0);
        assert_eq!((s.delivered, s.expected), (2, 3));
        assert!(!s.all_delivered());
        assert_eq!(Stats::of(&[r(3.0, 1)]).seconds_spread, 0.0);
        assert_eq!(Stats::of(&[]), Stats::default());
    }

    #[test]
    fn only_tcp_scenarios_multiply_by_tcp_settings() {
        let mut spec = SweepSpec::quick();
        spec.scenarios = vec![
            Scenario::SmtpTcpModem,
            Scenario::Hmtp5066 {
                compression: HmtpCompression::Deflate,
                resume: true,
            },
        ];
        spec.sizes = vec![386];
        spec.tcp_profiles = vec![TcpProfile::Jnos1998];
        spec.windows = vec![1024, 3072];
        spec.seeds = vec![1, 2];
        let p = spec.points();
        assert_eq!(p.len(), 3);
        assert_eq!(spec.runs(), 6);
        assert_eq!(p[0].tcp.mtu, 256);
        assert_eq!(p[0].tcp.max_wait, Duration::from_secs(90));
        assert_eq!(
            jnos_tcp(216, 1024, 300, None, None).max_wait,
            Duration::from_secs(360)
        );
    }

    #[test]
    fn a_sweep_runs_every_seed_and_keeps_errors_as_rows() {
        let mut spec = SweepSpec::quick();
        spec.scenarios = vec![
            Scenario::Hmtp5066 {
                compression: HmtpCompression::Deflate,
                resume: true,
            },
            Scenario::Cftp5066,
        ];
        spec.sizes = vec![386];
        spec.rates_bps = vec![2400];
        spec.seeds = vec![1, 2];
        let mut calls = 0;
        let rows = run_sweep(&spec, |done, total, _| {
            calls += 1;
            assert!(done <= total);
        });
        assert_eq!(calls, 4);
        assert_eq!(rows.len(), 2);
        for row in &rows {
            let s = row.stats.as_ref().unwrap();
            assert_eq!((s.runs, s.delivered, s.expected), (2, 2, 2));
            assert!(s.seconds_mean > 0.0);
        }
        spec.rates_bps = vec![1234];
        let rows = run_sweep(&spec, |_, _, _| {});
        assert!(rows[0].stats.as_ref().unwrap_err().contains("1234"));
    }
}
