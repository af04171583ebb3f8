//! One direction of an HF channel: mean SNR, Watterson two-path fading, slow SNR drift, and
//! scheduled outages and error bursts.
//!
//! This sits under the [`modem`](crate::modem) model: the modem asks the channel what the signal
//! looked like during one interleaver block ([`Channel::block`]) and turns that into bit errors.
//! A link has two independent `Channel`s, one per direction.
//!
//! # Model (for an HF engineer)
//!
//! * **SNR** is the mean signal-to-noise ratio in 3 kHz of noise bandwidth, as the calibration
//!   table `modem-required-snr.csv` and MIL-STD-188-110 quote it. The noise is white Gaussian.
//! * **Watterson fading** (ITU-R F.1487 Annex 1, simplified test channel of F.520/F.1487
//!   Annex 3): two independent, equal-power, Rayleigh-fading paths with no Doppler shift, each
//!   with a Gaussian Doppler spectrum of standard deviation σ = spread / 2 (the tabulated
//!   "frequency spread" is 2σ). The profiles are the rows of `channel-profiles.csv`, embedded in
//!   the crate ([`profiles`]). Each path gain is a **sum of 24 complex sinusoids** with
//!   Doppler frequencies drawn from that Gaussian spectrum and random phases (the Monte-Carlo
//!   sum-of-sinusoids method). The gain is then a pure function of time, so any block can be
//!   evaluated at any time without stepping a filter; its autocorrelation is, in expectation,
//!   the Watterson one, exp(−2π²σ²τ²): coherence time ≈ 4.5 s on Good, 0.45 s on Poor.
//! * **Delay spread.** The paths are 0.5–7 ms apart, i.e. 1–17 symbols at 2400 Bd, so a
//!   serial-tone modem's equaliser resolves them. The model takes the equaliser as combining the
//!   two paths (maximal-ratio): the instantaneous SNR is `SNR · (|h1|² + |h2|²)` with
//!   `E[|h1|² + |h2|²] = 1`. The delay itself moves no energy in time here; what it costs the
//!   equaliser beyond 2 ms (residual intersymbol interference), like its tracking loss on a
//!   fast-fading channel, is self-noise in the modem's curves, which is why [`BlockChannel`]
//!   carries the spread and the delay (see [`crate::modem`]).
//! * **Sampling.** A block is cut into equal sub-intervals, evaluated at their midpoints:
//!   `max(2 Hz, 6 × spread)` on fading channels (well above the Doppler bandwidth), 1 Hz on AWGN
//!   (only the drift moves). Each sub-interval becomes one [`Segment`] (weight, SNR).
//! * **Slow SNR drift** (optional): the "intermediate-term variation" that F.1487 leaves out
//!   (Furman & Koski 2009). Modelled as a Gaussian process in dB with an exponential
//!   autocorrelation (Ornstein–Uhlenbeck statistics), again as a sum of sinusoids (frequencies
//!   from the Lorentzian spectrum). Its σ and correlation time are **assumptions**; the defaults
//!   ([`SnrDrift::default`]: 3 dB, 10 minutes) are not from a measurement.
//! * **Scheduled impairments** ([`ScheduledImpairment`]): an *outage* (no signal: SNR → 0 over
//!   the interval), a *fade* of a given depth in dB, or *block loss* (every interleaver block
//!   that overlaps the interval is lost whatever its SNR, e.g. a sync loss or a strong
//!   interferer). Outages and fades only remove the part of a block they cover; whether the
//!   block survives is then the modem's effective-SNR decision, which is how an interleaved,
//!   coded modem rides through a short drop-out.
//!
//! Limits: no impulsive or non-Gaussian noise, no Doppler shift, no frequency-selective effects
//! within a path, no propagation delay (≈3 ms per 1000 km, negligible against turnarounds), and
//! the sum-of-sinusoids process is only approximately Gaussian in its deepest fades.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::f64::consts::PI;
use std::time::Duration;
use thiserror::Error;

/// The embedded copy of `calibration/channel-profiles.csv` (byte-identical; a test checks it).
pub const PROFILES_CSV: &str = include_str!("../data/channel-profiles.csv");

/// Number of sinusoids per fading path.
const SINUSOIDS_PER_PATH: usize = 24;
/// Number of sinusoids in the drift process.
const DRIFT_SINUSOIDS: usize = 32;
/// Lowest sampling rate of a fading channel, per second.
const MIN_FADING_SAMPLE_RATE: f64 = 2.0;
/// Samples per hertz of Doppler spread.
const SAMPLES_PER_HZ_SPREAD: f64 = 6.0;
/// Sampling rate of a non-fading channel (for drift), per second.
const AWGN_SAMPLE_RATE: f64 = 1.0;
/// Upper bound on segments per block, whatever the block length and spread.
const MAX_SEGMENTS: usize = 4096;

/// One Watterson profile (a row of `channel-profiles.csv`).
#[derive(Debug, Clone, PartialEq)]
pub struct Profile {
    /// Name, e.g. `good`, `poor`, `mid-latitude-disturbed`.
    pub name: String,
    /// Where it is defined: `F.520-2` or `F.1487`.
    pub standard: String,
    /// Differential delay between the two paths, in milliseconds.
    pub delay_ms: f64,
    /// Frequency spread (2σ of the Gaussian Doppler spectrum), in hertz.
    pub spread_hz: f64,
}

/// Why the profile table or a channel configuration was rejected.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum ChannelError {
    /// A line of the profile CSV is malformed.
    #[error("channel-profiles.csv line {line}: {reason}")]
    BadProfileLine {
        /// 1-based line number.
        line: usize,
        /// What was wrong.
        reason: String,
    },
    /// No profile has this name.
    #[error("unknown channel profile {0:?} (see channel-profiles.csv)")]
    UnknownProfile(String),
    /// A numeric parameter is not finite or out of range.
    #[error("channel parameter {name} = {value} is invalid: {reason}")]
    BadParameter {
        /// Parameter name.
        name: &'static str,
        /// The value given.
        value: f64,
        /// What is required.
        reason: &'static str,
    },
}

/// Parse a profile table in the format of `channel-profiles.csv`.
pub fn parse_profiles(csv: &str) -> Result<Vec<Profile>, ChannelError> {
    let mut out = Vec::new();
    let mut header_seen = false;
    for (i, raw) in csv.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let bad = |reason: String| ChannelError::BadProfileLine {
            line: i + 1,
            reason,
        };
        let fields: Vec<&str> = line.split(',').map(str::trim).collect();
        if !header_seen {
            if fields
                != [
                    "name",
                    "standard",
                    "differential_delay_ms",
                    "frequency_spread_hz",
                ]
            {
                return Err(bad(format!(
                    "expected the header name,standard,differential_delay_ms,frequency_spread_hz, found {line:?}"
                )));
            }
            header_seen = true;
            continue;
        }
        let [name, standard, delay, spread] = fields.as_slice() else {
            return Err(bad(format!("expected 4 fields, found {}", fields.len())));
        };
        let num = |s: &str, what: &str| -> Result<f64, ChannelError> {
            match s.parse::<f64>() {
                Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
                _ => Err(bad(format!("{what} {s:?} is not a non-negative number"))),
            }
        };
        out.push(Profile {
            name: (*name).to_owned(),
            standard: (*standard).to_owned(),
            delay_ms: num(delay, "differential delay")?,
            spread_hz: num(spread, "frequency spread")?,
        });
    }
    if !header_seen {
        return Err(ChannelError::BadProfileLine {
            line: 0,
            reason: "no header line".into(),
        });
    }
    Ok(out)
}

/// The profiles of the embedded `channel-profiles.csv`.
pub fn profiles() -> Result<Vec<Profile>, ChannelError> {
    parse_profiles(PROFILES_CSV)
}

/// The embedded profile with this name (`good`, `moderate`, `poor`, `flutter`, or an F.1487
/// name such as `high-latitude-disturbed`).
pub fn profile(name: &str) -> Result<Profile, ChannelError> {
    profiles()?
        .into_iter()
        .find(|p| p.name == name)
        .ok_or_else(|| ChannelError::UnknownProfile(name.to_owned()))
}

/// Channels drawn for [`measured_spread_hz`].
pub const SPREAD_REALISATIONS: usize = 400;

/// The frequency spread (2σ of the Doppler spectrum, as `channel-profiles.csv` defines it) of
/// the fading this emulator generates for `profile`, measured on the process itself rather
/// than read from its parameters: [`SPREAD_REALISATIONS`] channels drawn from `seed`, each
/// path's complex gain h(t) and its derivative sampled 400 times over 100 / spread seconds.
/// For any stationary fading, E|h'|² / E|h|² is the Doppler spectrum's mean-square angular
/// frequency, (2πσ)² for the Gaussian spectrum of the profile (whose mean is zero). `None`
/// for a profile without fading (spread 0).
pub fn measured_spread_hz(profile: &Profile, seed: u64) -> Option<f64> {
    if profile.spread_hz <= 0.0 {
        return None;
    }
    let rng = &mut ChaCha8Rng::seed_from_u64(seed);
    let config = ChannelConfig {
        fading: Fading::Watterson(profile.clone()),
        ..ChannelConfig::awgn(0.0)
    };
    let samples = 400;
    let dt = 100.0 / profile.spread_hz / samples as f64;
    let (mut power, mut slope) = (0.0, 0.0);
    for _ in 0..SPREAD_REALISATIONS {
        let (p, d) = Channel::new(config.clone(), rng)
            .ok()?
            .gain_moments(samples, dt);
        power += p;
        slope += d;
    }
    Some(2.0 * (slope / power).sqrt() / (2.0 * PI))
}

/// Fading model of a channel direction.
#[derive(Debug, Clone, PartialEq)]
pub enum Fading {
    /// No fading: additive white Gaussian noise only.
    Awgn,
    /// Watterson two-path fading with this profile.
    Watterson(Profile),
}

impl Fading {
    /// Frequency spread in hertz (0 on AWGN).
    pub fn spread_hz(&self) -> f64 {
        match self {
            Fading::Awgn => 0.0,
            Fading::Watterson(p) => p.spread_hz,
        }
    }

    /// Differential delay of the two paths in milliseconds (0 on AWGN).
    pub fn delay_ms(&self) -> f64 {
        match self {
            Fading::Awgn => 0.0,
            Fading::Watterson(p) => p.delay_ms,
        }
    }
}

/// Slow SNR variation: a Gaussian process in dB with exponential autocorrelation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SnrDrift {
    /// Standard deviation of the SNR around its mean, in dB.
    pub sigma_db: f64,
    /// Correlation time (the autocorrelation falls to 1/e after this long).
    pub correlation_time: Duration,
}

impl Default for SnrDrift {
    /// 3 dB over about 10 minutes: an assumption, not a measurement (see the module docs).
    fn default() -> Self {
        Self {
            sigma_db: 3.0,
            correlation_time: Duration::from_secs(600),
        }
    }
}

/// What a scheduled impairment does while it lasts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Impairment {
    /// No signal at all (SNR → 0).
    Outage,
    /// The SNR drops by this many dB.
    Fade {
        /// Depth of the fade in dB (positive).
        depth_db: f64,
    },
    /// Every interleaver block that overlaps the interval is lost.
    BlockLoss,
}

/// An impairment at a given time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScheduledImpairment {
    /// When it starts (time since the start of the simulation).
    pub start: Duration,
    /// How long it lasts.
    pub length: Duration,
    /// What it does.
    pub impairment: Impairment,
}

/// The kinds of [`Impairment`] as the command lines name them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImpairmentKind {
    /// `--outage START+LENGTH`.
    Outage,
    /// `--fade START+LENGTH:DB`.
    Fade,
    /// `--block-loss START+LENGTH`.
    BlockLoss,
}

/// Why the text of an impairment or a drift was refused (the command lines put the option
/// and its value in front).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SpecError {
    /// The text is not of the form the option takes.
    #[error("expected {0}")]
    Form(&'static str),
    /// A time that is not a number of seconds, 0 or more.
    #[error("{0} is not a number of seconds, 0 or more")]
    Seconds(String),
    /// An impairment that lasts no time.
    #[error("the length must be more than 0 s")]
    Empty,
    /// A fade depth of 0 or less, or more than 200 dB.
    #[error("{0} is not a depth of more than 0 and at most 200 dB")]
    Depth(String),
    /// A drift deviation outside 0-40 dB.
    #[error("{0} is not a deviation of 0 to 40 dB")]
    Deviation(String),
    /// A drift correlation time that is not positive.
    #[error("{0} is not a correlation time of more than 0 s")]
    CorrelationTime(String),
}

impl ScheduledImpairment {
    /// An impairment of `kind` from `START+LENGTH` (simulated seconds), with `:DB` (the
    /// depth, more than 0 and at most 200) after it for a fade: the value of the emulator's
    /// and the benchmark's `--outage`, `--fade` and `--block-loss`.
    pub fn parse(kind: ImpairmentKind, text: &str) -> Result<Self, SpecError> {
        let (window, impairment) = match kind {
            ImpairmentKind::Fade => {
                let (w, db) = text
                    .rsplit_once(':')
                    .ok_or(SpecError::Form("START+LENGTH:DB"))?;
                let depth_db = db
                    .trim()
                    .parse::<f64>()
                    .ok()
                    .filter(|d| *d > 0.0 && *d <= 200.0)
                    .ok_or_else(|| SpecError::Depth(db.trim().to_owned()))?;
                (w, Impairment::Fade { depth_db })
            }
            ImpairmentKind::Outage => (text, Impairment::Outage),
            ImpairmentKind::BlockLoss => (text, Impairment::BlockLoss),
        };
        let form = match kind {
            ImpairmentKind::Fade => "START+LENGTH:DB",
            ImpairmentKind::Outage | ImpairmentKind::BlockLoss => "START+LENGTH",
        };
        let (start, length) = window.split_once('+').ok_or(SpecError::Form(form))?;
        let (start, length) = (parse_seconds(start)?, parse_seconds(length)?);
        if length.is_zero() {
            return Err(SpecError::Empty);
        }
        Ok(ScheduledImpairment {
            start,
            length,
            impairment,
        })
    }
}

/// The impairment options of the command lines (`skywave-emu`, `skywave-bench compare`), in
/// the order [`parse_changes`] takes their values.
pub const IMPAIRMENT_OPTIONS: [(&str, ImpairmentKind); 3] = [
    ("--outage", ImpairmentKind::Outage),
    ("--fade", ImpairmentKind::Fade),
    ("--block-loss", ImpairmentKind::BlockLoss),
];

/// A command line's `--drift` value and its `--outage`, `--fade` and `--block-loss` values (in
/// [`IMPAIRMENT_OPTIONS`] order): the drift, and what `each` makes of every impairment value
/// (it is given the option, the kind and the value; the emulator takes an `ADDR@` off first).
/// An error names the option and its value.
pub fn parse_changes<T>(
    drift: Option<&str>,
    values: [&[String]; 3],
    mut each: impl FnMut(&str, ImpairmentKind, &str) -> Result<T, String>,
) -> Result<(Option<SnrDrift>, Vec<T>), String> {
    let drift = drift
        .map(|d| {
            d.parse::<SnrDrift>()
                .map_err(|e| format!("--drift {d}: {e}"))
        })
        .transpose()?;
    let mut out = Vec::new();
    for ((what, kind), texts) in IMPAIRMENT_OPTIONS.into_iter().zip(values) {
        for t in texts {
            out.push(each(what, kind, t)?);
        }
    }
    Ok((drift, out))
}

/// An impairment value aimed at one receiver, `WHO@` before the impairment (`who` names it in
/// errors: "ADDR", "SHIP"; `required`: the `WHO@` must be there, else it may be): the text
/// before the `@` (`None` without one) and the impairment. An error names the option and the
/// value, and for a wrong form the whole form (`[ADDR@]START+LENGTH`).
pub fn parse_aimed<'a>(
    what: &str,
    kind: ImpairmentKind,
    text: &'a str,
    who: &str,
    required: bool,
) -> Result<(Option<&'a str>, ScheduledImpairment), String> {
    let prefix = if required {
        format!("{who}@")
    } else {
        format!("[{who}@]")
    };
    let form = |f: &str| format!("{what} {text}: expected {prefix}{f}");
    let (target, rest) = match text.split_once('@') {
        Some((t, rest)) => (Some(t), rest),
        None => (None, text),
    };
    let parsed = ScheduledImpairment::parse(kind, rest).map_err(|e| match e {
        SpecError::Form(f) => form(f),
        e => format!("{what} {text}: {e}"),
    });
    if required && target.is_none() {
        return Err(form(match kind {
            ImpairmentKind::Fade => "START+LENGTH:DB",
            ImpairmentKind::Outage | ImpairmentKind::BlockLoss => "START+LENGTH",
        }));
    }
    Ok((target, parsed?))
}

/// A number of seconds, 0 or more, as the command lines write times.
pub fn parse_seconds(field: &str) -> Result<Duration, SpecError> {
    field
        .trim()
        .parse::<f64>()
        .ok()
        .and_then(|s| Duration::try_from_secs_f64(s).ok())
        .ok_or_else(|| SpecError::Seconds(field.trim().to_owned()))
}

impl std::fmt::Display for ScheduledImpairment {
    /// What a receiver gets while it lasts: "nothing from 0.0 s to 40.0 s", "everything
    /// 12.5 dB weaker from ...", "no interleaver block whole from ...".
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.impairment {
            Impairment::Outage => f.write_str("nothing")?,
            Impairment::Fade { depth_db } => write!(f, "everything {depth_db} dB weaker")?,
            Impairment::BlockLoss => f.write_str("no interleaver block whole")?,
        }
        write!(
            f,
            " from {:.1} s to {:.1} s",
            self.start.as_secs_f64(),
            (self.start + self.length).as_secs_f64()
        )
    }
}

impl std::str::FromStr for SnrDrift {
    type Err = SpecError;

    /// `SIGMA_DB[/SECS]`: the deviation (0-40 dB) and the correlation time (default
    /// [`SnrDrift::default`]'s).
    fn from_str(text: &str) -> Result<Self, SpecError> {
        let (sigma, tau) = match text.split_once('/') {
            Some((s, t)) => (s, Some(t)),
            None => (text, None),
        };
        let sigma_db = sigma
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|d| (0.0..=40.0).contains(d))
            .ok_or_else(|| SpecError::Deviation(sigma.trim().to_owned()))?;
        let correlation_time = match tau {
            None => SnrDrift::default().correlation_time,
            Some(t) => t
                .trim()
                .parse::<f64>()
                .ok()
                .filter(|s| *s > 0.0)
                .and_then(|s| Duration::try_from_secs_f64(s).ok())
                .ok_or_else(|| SpecError::CorrelationTime(t.trim().to_owned()))?,
        };
        Ok(SnrDrift {
            sigma_db,
            correlation_time,
        })
    }
}

/// Configuration of one channel direction.
#[derive(Debug, Clone, PartialEq)]
pub struct ChannelConfig {
    /// Mean SNR in dB (3 kHz noise bandwidth).
    pub snr_db: f64,
    /// Fading model.
    pub fading: Fading,
    /// Optional slow SNR drift.
    pub drift: Option<SnrDrift>,
    /// Scheduled outages, fades and block losses.
    pub impairments: Vec<ScheduledImpairment>,
}

impl ChannelConfig {
    /// A plain AWGN channel at this SNR.
    pub fn awgn(snr_db: f64) -> Self {
        Self {
            snr_db,
            fading: Fading::Awgn,
            drift: None,
            impairments: Vec::new(),
        }
    }

    /// A Watterson channel at this SNR with the named profile from `channel-profiles.csv`.
    pub fn watterson(snr_db: f64, profile_name: &str) -> Result<Self, ChannelError> {
        Ok(Self {
            snr_db,
            fading: Fading::Watterson(profile(profile_name)?),
            drift: None,
            impairments: Vec::new(),
        })
    }
}

/// One sub-interval of a block: its share of the block and its instantaneous SNR.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Segment {
    /// Fraction of the block (the weights of a block sum to 1).
    pub weight: f64,
    /// Instantaneous SNR, linear (not dB).
    pub snr: f64,
}

/// What the channel did during one interleaver block.
#[derive(Debug, Clone, PartialEq)]
pub struct BlockChannel {
    /// The block's sub-intervals.
    pub segments: Vec<Segment>,
    /// A [`Impairment::BlockLoss`] overlapped the block.
    pub lost: bool,
    /// Doppler spread of the channel in hertz (the modem's tracking loss depends on it).
    pub spread_hz: f64,
    /// Differential delay of the two paths in milliseconds (0 on AWGN; the modem's residual
    /// intersymbol interference depends on it).
    pub delay_ms: f64,
}

impl BlockChannel {
    /// Weighted mean of the instantaneous SNR over the block, in dB.
    pub fn mean_snr_db(&self) -> f64 {
        let total: f64 = self.segments.iter().map(|s| s.weight).sum();
        let mean: f64 = self.segments.iter().map(|s| s.weight * s.snr).sum::<f64>()
            / total.max(f64::MIN_POSITIVE);
        10.0 * mean.log10()
    }
}

#[derive(Debug, Clone, Copy)]
struct Sinusoid {
    /// Angular frequency, rad/s.
    omega: f64,
    phase: f64,
}

/// One realisation of a channel direction. Construction draws the random fading and drift
/// processes from the caller's RNG; after that every query is a pure function of time.
#[derive(Debug, Clone)]
pub struct Channel {
    config: ChannelConfig,
    paths: [Vec<Sinusoid>; 2],
    drift: Vec<Sinusoid>,
}

fn gaussian(rng: &mut impl Rng) -> f64 {
    // Box–Muller; 1 - u is in (0, 1], so the logarithm is finite.
    let u1: f64 = 1.0 - rng.random::<f64>();
    let u2: f64 = rng.random::<f64>();
    (-2.0 * u1.ln()).sqrt() * (2.0 * PI * u2).cos()
}

fn finite(
    name: &'static str,
    value: f64,
    reason: &'static str,
    ok: bool,
) -> Result<(), ChannelError> {
    if value.is_finite() && ok {
        Ok(())
    } else {
        Err(ChannelError::BadParameter {
            name,
            value,
            reason,
        })
    }
}

impl Channel {
    /// Build a channel realisation, drawing its random processes from `rng`.
    pub fn new(config: ChannelConfig, rng: &mut impl Rng) -> Result<Channel, ChannelError> {
        finite(
            "snr_db",
            config.snr_db,
            "must be a finite number of dB",
            true,
        )?;
        let spread = config.fading.spread_hz();
        finite(
            "frequency spread",
            spread,
            "must be between 0 and 1000 Hz",
            (0.0..=1000.0).contains(&spread),
        )?;
        if let Some(d) = config.drift {
            finite(
                "drift sigma_db",
                d.sigma_db,
                "must be between 0 and 40 dB",
                (0.0..=40.0).contains(&d.sigma_db),
            )?;
            let tau = d.correlation_time.as_secs_f64();
            finite("drift correlation time", tau, "must be positive", tau > 0.0)?;
        }
        for imp in &config.impairments {
            if let Impairment::Fade { depth_db } = imp.impairment {
                finite(
                    "fade depth_db",
                    depth_db,
                    "must be between 0 and 200 dB",
                    (0.0..=200.0).contains(&depth_db),
                )?;
            }
        }
        let sigma = spread / 2.0;
        let mut path = || -> Vec<Sinusoid> {
            (0..SINUSOIDS_PER_PATH)
                .map(|_| Sinusoid {
                    omega: 2.0 * PI * sigma * gaussian(rng),
                    phase: 2.0 * PI * rng.random::<f64>(),
                })
                .collect()
        };
        let paths = match config.fading {
            Fading::Awgn => [Vec::new(), Vec::new()],
            Fading::Watterson(_) => [path(), path()],
        };
        let drift = match config.drift {
            None => Vec::new(),
            Some(d) => {
                // Cauchy-distributed frequencies give E[cos(2π f τ)] = exp(-|τ| / T).
                let gamma = 1.0 / (2.0 * PI * d.correlation_time.as_secs_f64());
                (0..DRIFT_SINUSOIDS)
                    .map(|_| {
                        let u: f64 = rng.random::<f64>().clamp(1e-9, 1.0 - 1e-9);
                        let f = gamma * (PI * (u - 0.5)).tan();
                        Sinusoid {
                            omega: 2.0 * PI * f,
                            phase: 2.0 * PI * rng.random::<f64>(),
                        }
                    })
                    .collect()
            }
        };
        Ok(Channel {
            config,
            paths,
            drift,
        })
    }

    /// The configuration this channel was built from.
    pub fn config(&self) -> &ChannelConfig {
        &self.config
    }

    /// Power gain `|h1|² + |h2|²` of the two paths at time `t` seconds (mean 1; exactly 1 on
    /// AWGN).
    pub fn fading_gain(&self, t: f64) -> f64 {
        if matches!(self.config.fading, Fading::Awgn) {
            return 1.0;
        }
        // Each path carries half the power: |sum|² / N has mean 1, times 1/2. Plain loops:
        // this runs for every segment of every block, also in unoptimised test builds.
        let scale = 0.5 / SINUSOIDS_PER_PATH as f64;
        let mut gain = 0.0;
        for sins in &self.paths {
            let (mut re, mut im) = (0.0, 0.0);
            for s in sins {
                let (sin, cos) = (s.omega * t + s.phase).sin_cos();
                re += cos;
                im += sin;
            }
            gain += (re * re + im * im) * scale;
        }
        gain
    }

    /// Fading gains at `n` equally spaced times `t0, t0 + dt, …`: the same sums as
    /// [`Channel::fading_gain`], with each sinusoid advanced by a complex rotation instead of a
    /// fresh sine and cosine per sample (two per sinusoid per block instead of two per sample).
    fn fading_gains(&self, t0: f64, dt: f64, n: usize) -> Vec<f64> {
        if matches!(self.config.fading, Fading::Awgn) {
            return vec![1.0; n];
        }
        let scale = 0.5 / SINUSOIDS_PER_PATH as f64;
        let mut gains = vec![0.0; n];
        let mut re = vec![0.0; n];
        let mut im = vec![0.0; n];
        for sins in &self.paths {
            re.iter_mut().for_each(|v| *v = 0.0);
            im.iter_mut().for_each(|v| *v = 0.0);
            for s in sins {
                let (mut sin, mut cos) = (s.omega * t0 + s.phase).sin_cos();
                let (step_sin, step_cos) = (s.omega * dt).sin_cos();
                for i in 0..n {
                    if let (Some(r), Some(m)) = (re.get_mut(i), im.get_mut(i)) {
                        *r += cos;
                        *m += sin;
                    }
                    let next_cos = cos * step_cos - sin * step_sin;
                    sin = sin * step_cos + cos * step_sin;
                    cos = next_cos;
                }
            }
            for ((g, r), m) in gains.iter_mut().zip(&re).zip(&im) {
                *g += (r * r + m * m) * scale;
            }
        }
        gains
    }

    /// The second moments of each path's complex gain h(t) and of its time derivative, summed
    /// over `samples` instants `dt` seconds apart from 0: `(Σ|h|², Σ|h'|²)`, whose ratio is the
    /// Doppler spectrum's mean-square angular frequency (see [`measured_spread_hz`]).
    fn gain_moments(&self, samples: usize, dt: f64) -> (f64, f64) {
        let (mut power, mut slope) = (0.0, 0.0);
        for sins in &self.paths {
            for k in 0..samples {
                let t = k as f64 * dt;
                let (mut re, mut im, mut dre, mut dim) = (0.0, 0.0, 0.0, 0.0);
                for s in sins {
                    let (sin, cos) = (s.omega * t + s.phase).sin_cos();
                    re += cos;
                    im += sin;
                    dre -= s.omega * sin;
                    dim += s.omega * cos;
                }
                power += re * re + im * im;
                slope += dre * dre + dim * dim;
            }
        }
        (power, slope)
    }

    /// SNR drift at time `t` seconds, in dB (0 without drift).
    pub fn drift_db(&self, t: f64) -> f64 {
        match self.config.drift {
            None => 0.0,
            Some(d) => {
                let amp = d.sigma_db * (2.0 / DRIFT_SINUSOIDS as f64).sqrt();
                self.drift
                    .iter()
                    .map(|s| (s.omega * t + s.phase).cos())
                    .sum::<f64>()
                    * amp
            }
        }
    }

    /// Instantaneous SNR (linear) at time `t` seconds, before scheduled impairments.
    pub fn snr_at(&self, t: f64) -> f64 {
        10f64.powf((self.config.snr_db + self.drift_db(t)) / 10.0) * self.fading_gain(t)
    }

    /// What the channel did during `[start, start + length)`: the block's segments with their
    /// instantaneous SNR, and whether a block loss overlapped it.
    pub fn block(&self, start: Duration, length: Duration) -> BlockChannel {
        let spread = self.config.fading.spread_hz();
        let rate = match self.config.fading {
            Fading::Awgn => AWGN_SAMPLE_RATE,
            Fading::Watterson(_) => (SAMPLES_PER_HZ_SPREAD * spread).max(MIN_FADING_SAMPLE_RATE),
        };
        let t0 = start.as_secs_f64();
        let len = length.as_secs_f64();
        // Float-to-int casts saturate; the count is clamped to 1..=MAX_SEGMENTS.
        let n = ((len * rate).ceil() as usize).clamp(1, MAX_SEGMENTS);
        let dt = len / n as f64;
        let end = start.saturating_add(length);
        let lost = self.config.impairments.iter().any(|imp| {
            imp.impairment == Impairment::BlockLoss
                && imp.start < end
                && start < imp.start.saturating_add(imp.length)
        });
        let mut segments = Vec::with_capacity(n + 4);
        let weight = 1.0 / n as f64;
        let gains = self.fading_gains(t0 + dt / 2.0, dt, n);
        for (i, gain) in gains.into_iter().enumerate() {
            let a = t0 + i as f64 * dt;
            let b = a + dt;
            let snr = 10f64.powf((self.config.snr_db + self.drift_db(a + dt / 2.0)) / 10.0) * gain;
            // The deepest impairment overlapping this sub-interval, and how much of it it covers.
            let mut worst: Option<(f64, f64)> = None; // (attenuation factor, overlap fraction)
            for imp in &self.config.impairments {
                let factor = match imp.impairment {
                    Impairment::Outage => 0.0,
                    Impairment::Fade { depth_db } => 10f64.powf(-depth_db / 10.0),
                    Impairment::BlockLoss => continue,
                };
                let (s, e) = (
                    imp.start.as_secs_f64(),
                    imp.start.saturating_add(imp.length).as_secs_f64(),
                );
                let overlap = (e.min(b) - s.max(a)).max(0.0);
                if overlap > 0.0 && dt > 0.0 && worst.is_none_or(|(f, _)| factor < f) {
                    worst = Some((factor, (overlap / dt).min(1.0)));
                }
            }
            match worst {
                None => segments.push(Segment { weight, snr }),
                Some((factor, frac)) => {
                    if frac < 1.0 {
                        segments.push(Segment {
                            weight: weight * (1.0 - frac),
                            snr,
                        });
                    }
                    segments.push(Segment {
                        weight: weight * frac,
                        snr: snr * factor,
                    });
                }
            }
        }
        BlockChannel {
            segments,
            lost,
            spread_hz: spread,
            delay_ms: self.config.fading.delay_ms(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn impairments_and_drift_parse_from_their_command_line_text() {
        let at = |s: u64, l: u64, impairment| ScheduledImpairment {
            start: Duration::from_secs(s),
            length: Duration::from_secs(l),
            impairment,
        };
        assert_eq!(
            ScheduledImpairment::parse(ImpairmentKind::Outage, "300+600"),
            Ok(at(300, 600, Impairment::Outage))
        );
        assert_eq!(
            ScheduledImpairment::parse(ImpairmentKind::BlockLoss, " 0 + 2 "),
            Ok(at(0, 2, Impairment::BlockLoss))
        );
        assert_eq!(
            ScheduledImpairment::parse(ImpairmentKind::Fade, "60+30:12.5"),
            Ok(at(60, 30, Impairment::Fade { depth_db: 12.5 }))
        );
        for (kind, text, err) in [
            (
                ImpairmentKind::Outage,
                "300",
                SpecError::Form("START+LENGTH"),
            ),
            (ImpairmentKind::Outage, "300+0", SpecError::Empty),
            (
                ImpairmentKind::Outage,
                "-1+5",
                SpecError::Seconds("-1".into()),
            ),
            (
                ImpairmentKind::Outage,
                "1+inf",
                SpecError::Seconds("inf".into()),
            ),
            (
                ImpairmentKind::Fade,
                "1+5",
                SpecError::Form("START+LENGTH:DB"),
            ),
            (ImpairmentKind::Fade, "1+5:0", SpecError::Depth("0".into())),
            (
                ImpairmentKind::Fade,
                "1+5:201",
                SpecError::Depth("201".into()),
            ),
        ] {
            assert_eq!(ScheduledImpairment::parse(kind, text), Err(err), "{text}");
        }
        assert_eq!(
            at(0, 40, Impairment::Outage).to_string(),
            "nothing from 0.0 s to 40.0 s"
        );
        assert_eq!(
            at(100, 60, Impairment::Fade { depth_db: 12.5 }).to_string(),
            "everything 12.5 dB weaker from 100.0 s to 160.0 s"
        );
        assert_eq!(
            "3".parse::<SnrDrift>(),
            Ok(SnrDrift {
                sigma_db: 3.0,
                correlation_time: Duration::from_secs(600)
            })
        );
        assert_eq!(
            "6/1800".parse::<SnrDrift>().map(|d| d.correlation_time),
            Ok(Duration::from_secs(1800))
        );
        assert_eq!(
            "50".parse::<SnrDrift>(),
            Err(SpecError::Deviation("50".into()))
        );
        assert_eq!(
            "3/0".parse::<SnrDrift>(),
            Err(SpecError::CorrelationTime("0".into()))
        );
        let outage = at(5, 10, Impairment::Outage);
        let aimed = |text, required| {
            parse_aimed("--outage", ImpairmentKind::Outage, text, "SHIP", required)
        };
        assert_eq!(aimed("3@5+10", true), Ok((Some("3"), outage)));
        assert_eq!(aimed("5+10", false), Ok((None, outage)));
        assert_eq!(
            aimed("5+10", true),
            Err("--outage 5+10: expected SHIP@START+LENGTH".into())
        );
        assert_eq!(
            aimed("3@5", false),
            Err("--outage 3@5: expected [SHIP@]START+LENGTH".into())
        );
        assert_eq!(
            aimed("3@5+0", true),
            Err("--outage 3@5+0: the length must be more than 0 s".into())
        );
    }

    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn embedded_profiles_parse_and_match_the_reference() {
        let all = profiles().unwrap();
        assert_eq!(all.len(), 14);
        let good = profile("good").unwrap();
        assert_eq!(
            (good.delay_ms, good.spread_hz, good.standard.as_str()),
            (0.5, 0.1, "F.520-2")
        );
        let poor = profile("poor").unwrap();
        assert_eq!((poor.delay_ms, poor.spread_hz), (2.0, 1.0));
        assert_eq!(profile("high-latitude-disturbed").unwrap().spread_hz, 30.0);
        assert!(matches!(
            profile("nope"),
            Err(ChannelError::UnknownProfile(_))
        ));
    }

    #[test]
    fn embedded_csv_is_byte_identical_to_the_shared_copy() {
        crate::calibration::assert_matches_shared_copy("channel-profiles.csv", PROFILES_CSV);
    }

    #[test]
    fn bad_profile_tables_are_rejected() {
        assert!(parse_profiles("").is_err());
        assert!(parse_profiles("a,b\n").is_err());
        let h = "name,standard,differential_delay_ms,frequency_spread_hz\n";
        assert!(matches!(
            parse_profiles(&format!("{h}x,y,1\n")),
            Err(ChannelError::BadProfileLine { line: 2, .. })
        ));
        assert!(parse_profiles(&format!("{h}x,y,1,-2\n")).is_err());
        assert!(parse_profiles(&format!("{h}x,y,1,NaN\n")).is_err());
        assert_eq!(
            parse_profiles(&format!("# c\n{h}x,y,1,2\n")).unwrap().len(),
            1
        );
    }

    #[test]
    fn awgn_block_is_flat() {
        let mut rng = ChaCha8Rng::seed_from_u64(0x5BEAD);
        let ch = Channel::new(ChannelConfig::awgn(10.0), &mut rng).unwrap();
        let b = ch.block(Duration::from_secs(3), Duration::from_millis(4800));
        assert_eq!(b.segments.len(), 5);
        assert!(b.segments.iter().all(|s| (s.snr - 10.0).abs() < 1e-9));
        assert!((b.mean_snr_db() - 10.0).abs() < 1e-9);
        assert!(!b.lost);
    }

    /// Mean power, Rayleigh-like statistics and coherence time of the fading gain.
    #[test]
    fn watterson_statistics() {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let mut sum = 0.0;
        let mut single_path_below = 0usize;
        let mut corr_num = 0.0;
        let mut corr_den = 0.0;
        let n = 20_000;
        for r in 0..20 {
            let ch =
                Channel::new(ChannelConfig::watterson(0.0, "poor").unwrap(), &mut rng).unwrap();
            for i in 0..n / 20 {
                let t = (r * 10_000 + i) as f64 * 0.7;
                let g = ch.fading_gain(t);
                sum += g;
                // One path alone is Rayleigh: P(|h|^2 < 0.1 * mean) = 1 - exp(-0.1) = 0.095.
                let scale = 1.0 / SINUSOIDS_PER_PATH as f64;
                let (re, im) = ch.paths[0].iter().fold((0.0, 0.0), |(re, im), s| {
                    let (sin, cos) = (s.omega * t + s.phase).sin_cos();
                    (re + cos, im + sin)
                });
                if (re * re + im * im) * scale < 0.1 {
                    single_path_below += 1;
                }
                // Power correlation at 0.45 s (≈ the 1/e coherence time of Poor).
                let g2 = ch.fading_gain(t + 0.45);
                corr_num += (g - 1.0) * (g2 - 1.0);
                corr_den += (g - 1.0) * (g - 1.0);
            }
        }
        let mean = sum / n as f64;
        assert!((mean - 1.0).abs() < 0.05, "mean power {mean}");
        let p = single_path_below as f64 / n as f64;
        assert!((0.07..0.12).contains(&p), "P(deep fade) {p}");
        // Envelope-power correlation is the squared field correlation: exp(-2) ≈ 0.14 at 1/e.
        let rho = corr_num / corr_den;
        assert!(
            (0.03..0.35).contains(&rho),
            "power correlation at 0.45 s {rho}"
        );
    }

    /// The fading the emulator generates has the frequency spread of its profile, measured
    /// on the process (slowest and fastest profiles, and Poor).
    #[test]
    fn the_fading_has_its_profiles_frequency_spread() {
        for (seed, name) in ["good", "poor", "flutter", "high-latitude-disturbed"]
            .into_iter()
            .enumerate()
        {
            let p = profile(name).unwrap();
            let m = measured_spread_hz(&p, seed as u64).unwrap();
            println!("{name}: {m:.4} Hz against {} Hz", p.spread_hz);
            assert!(
                (m / p.spread_hz - 1.0).abs() < 0.03,
                "{name}: measured {m} Hz, profile {} Hz",
                p.spread_hz
            );
        }
        // No fading, no spread to measure.
        let still = Profile {
            spread_hz: 0.0,
            ..profile("good").unwrap()
        };
        assert_eq!(measured_spread_hz(&still, 0), None);
    }

    #[test]
    fn rotated_gains_match_direct_evaluation() {
        let ch = Channel::new(
            ChannelConfig::watterson(0.0, "poor").unwrap(),
            &mut ChaCha8Rng::seed_from_u64(4),
        )
        .unwrap();
        let b = ch.block(Duration::from_secs(1000), Duration::from_millis(4800));
        let dt = 4.8 / b.segments.len() as f64;
        for (i, seg) in b.segments.iter().enumerate() {
            let direct = ch.fading_gain(1000.0 + (i as f64 + 0.5) * dt);
            assert!(
                (seg.snr - direct).abs() < 1e-9 * direct.max(1.0),
                "segment {i}: {} vs {direct}",
                seg.snr
            );
        }
    }

    #[test]
    fn drift_has_the_configured_spread() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let mut sq = 0.0;
        let mut n = 0;
        for _ in 0..20 {
            let mut cfg = ChannelConfig::awgn(10.0);
            cfg.drift = Some(SnrDrift {
                sigma_db: 4.0,
                correlation_time: Duration::from_secs(60),
            });
            let ch = Channel::new(cfg, &mut rng).unwrap();
            for i in 0..500 {
                let d = ch.drift_db(f64::from(i) * 30.0);
                sq += d * d;
                n += 1;
            }
        }
        let sigma = (sq / f64::from(n)).sqrt();
        assert!((3.0..5.0).contains(&sigma), "drift sigma {sigma}");
    }

    #[test]
    fn impairments_cut_the_block() {
        let mut rng = ChaCha8Rng::seed_from_u64(0x5BEAD);
        let mut cfg = ChannelConfig::awgn(20.0);
        cfg.impairments = vec![
            ScheduledImpairment {
                start: Duration::from_millis(10_500),
                length: Duration::from_millis(250),
                impairment: Impairment::Outage,
            },
            ScheduledImpairment {
                start: Duration::from_secs(20),
                length: Duration::from_secs(1),
                impairment: Impairment::Fade { depth_db: 10.0 },
            },
            ScheduledImpairment {
                start: Duration::from_secs(30),
                length: Duration::from_millis(1),
                impairment: Impairment::BlockLoss,
            },
        ];
        let ch = Channel::new(cfg, &mut rng).unwrap();
        let b = ch.block(Duration::from_secs(10), Duration::from_secs(2));
        let silent: f64 = b
            .segments
            .iter()
            .filter(|s| s.snr == 0.0)
            .map(|s| s.weight)
            .sum();
        assert!((silent - 0.125).abs() < 1e-9, "outage share {silent}");
        let b = ch.block(Duration::from_secs(20), Duration::from_secs(1));
        assert!(b.segments.iter().all(|s| (s.snr - 10.0).abs() < 1e-9));
        assert!(
            ch.block(Duration::from_millis(29_500), Duration::from_millis(600))
                .lost
        );
        assert!(
            !ch.block(Duration::from_millis(30_001), Duration::from_millis(600))
                .lost
        );
    }

    #[test]
    fn bad_parameters_are_rejected() {
        let mut rng = ChaCha8Rng::seed_from_u64(0x5BEAD);
        assert!(Channel::new(ChannelConfig::awgn(f64::NAN), &mut rng).is_err());
        let mut cfg = ChannelConfig::awgn(1.0);
        cfg.drift = Some(SnrDrift {
            sigma_db: 1.0,
            correlation_time: Duration::ZERO,
        });
        assert!(Channel::new(cfg, &mut rng).is_err());
    }

    #[test]
    fn same_seed_same_channel() {
        let a = Channel::new(
            ChannelConfig::watterson(5.0, "good").unwrap(),
            &mut ChaCha8Rng::seed_from_u64(9),
        )
        .unwrap();
        let b = Channel::new(
            ChannelConfig::watterson(5.0, "good").unwrap(),
            &mut ChaCha8Rng::seed_from_u64(9),
        )
        .unwrap();
        let d = Duration::from_millis(600);
        assert_eq!(
            a.block(Duration::from_secs(100), d),
            b.block(Duration::from_secs(100), d)
        );
    }
}
