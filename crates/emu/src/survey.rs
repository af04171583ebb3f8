//! What the modem alone does to frames on a channel, with no protocol above it: frames of one
//! size sent back to back in transmissions planned on the modem, each interleaver block's fate
//! drawn from the channel exactly as [`crate::raw`] and [`crate::net`] draw it, and a frame
//! lost when a block carrying its bits is lost or damaged ([`crate::raw::frame_release`]).
//!
//! It answers the operator's question before any protocol is involved: at this rate,
//! interleaver and channel, how many AX.25 frames or 5066 D_PDUs of this size get through?
//! Protocol effects (ARQ repeats, TCP timeouts, turnarounds) come on top, in the benchmark's
//! scenarios. `skywave-bench modem` prints these figures.
//!
//! Sans-IO and deterministic: one channel realisation and every block's fate from one
//! ChaCha8 RNG seeded from [`SurveyConfig::seed`]. Each transmission starts when the previous
//! one's receiver could have answered ([`crate::modem::Transmission::peer_may_transmit_at`]),
//! so the survey walks the fading in time as a busy half-duplex link does.

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use thiserror::Error;

use crate::channel::{Channel, ChannelConfig, ChannelError};
use crate::modem::{ModemConfig, ModemError};
use crate::raw::frame_release;

/// Most transmissions one survey simulates (bounds the work a caller can ask for).
pub const MAX_TRANSMISSIONS: usize = 1_000_000;

/// What to send over which modem and channel.
#[derive(Debug, Clone)]
pub struct SurveyConfig {
    /// The modem (generation, rate, interleaver, timings).
    pub modem: ModemConfig,
    /// One direction of the channel.
    pub channel: ChannelConfig,
    /// Bytes of one frame on the air, framing included.
    pub frame_bytes: usize,
    /// Frames sent back to back in each transmission.
    pub frames_per_transmission: usize,
    /// Transmissions to simulate (1 to [`MAX_TRANSMISSIONS`]).
    pub transmissions: usize,
    /// Seed of the channel realisation and the block draws.
    pub seed: u64,
}

/// The counts a survey yields.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Survey {
    /// Transmissions simulated.
    pub transmissions: u64,
    /// Interleaver blocks carrying frame bits.
    pub blocks: u64,
    /// Of those, blocks lost outright or with at least one error burst.
    pub blocks_damaged: u64,
    /// Sum of the blocks' expected post-decoder BER (lost blocks count 0.5).
    ber_sum: f64,
    /// Frames sent.
    pub frames: u64,
    /// Frames the receiver threw away.
    pub frames_lost: u64,
    /// Seconds of channel time the survey walked through.
    pub channel_seconds: f64,
}

impl Survey {
    /// Mean expected BER over the blocks.
    pub fn mean_ber(&self) -> f64 {
        self.ber_sum / self.blocks.max(1) as f64
    }

    /// Share of blocks damaged, 0 to 1.
    pub fn block_damage_rate(&self) -> f64 {
        self.blocks_damaged as f64 / self.blocks.max(1) as f64
    }

    /// Share of frames lost, 0 to 1.
    pub fn frame_loss_rate(&self) -> f64 {
        self.frames_lost as f64 / self.frames.max(1) as f64
    }
}

/// A survey that cannot run.
#[derive(Debug, Error)]
pub enum SurveyError {
    /// The modem cannot plan such a transmission.
    #[error("modem: {0}")]
    Modem(#[from] ModemError),
    /// The channel configuration is unusable.
    #[error("channel: {0}")]
    Channel(#[from] ChannelError),
    /// A count is out of range.
    #[error("survey setting {name} is {value}: {reason}")]
    Setting {
        /// The setting.
        name: &'static str,
        /// Its value.
        value: usize,
        /// What is wrong with it.
        reason: &'static str,
    },
}

/// Runs the survey.
pub fn run(config: &SurveyConfig) -> Result<Survey, SurveyError> {
    let check = |name, value: usize, ok: bool, reason| {
        if ok {
            Ok(())
        } else {
            Err(SurveyError::Setting {
                name,
                value,
                reason,
            })
        }
    };
    check(
        "frame_bytes",
        config.frame_bytes,
        config.frame_bytes > 0,
        "a frame has at least one byte",
    )?;
    check(
        "frames_per_transmission",
        config.frames_per_transmission,
        config.frames_per_transmission > 0,
        "a transmission carries at least one frame",
    )?;
    check(
        "transmissions",
        config.transmissions,
        (1..=MAX_TRANSMISSIONS).contains(&config.transmissions),
        "must be 1 to 1000000",
    )?;
    let payload = config
        .frame_bytes
        .checked_mul(config.frames_per_transmission)
        .ok_or(SurveyError::Setting {
            name: "frames_per_transmission",
            value: config.frames_per_transmission,
            reason: "frames × bytes overflows",
        })?;
    let mut rng = ChaCha8Rng::seed_from_u64(config.seed);
    let channel = Channel::new(config.channel.clone(), &mut rng)?;
    let mut survey = Survey::default();
    let mut start = std::time::Duration::ZERO;
    for _ in 0..config.transmissions {
        let tx = config.modem.plan(start, payload)?;
        let decisions: Vec<_> = tx
            .blocks
            .iter()
            .map(|b| config.modem.receive_block(&channel, b, &mut rng))
            .collect();
        // The plan says which blocks carry frame bits; the rest hold EOM, flush and padding.
        let carrying = tx
            .blocks
            .iter()
            .zip(&decisions)
            .filter(|(b, _)| !b.payload_bits.is_empty())
            .map(|(_, d)| d);
        for d in carrying {
            survey.blocks += 1;
            survey.ber_sum += if d.lost { 0.5 } else { d.ber };
            if d.lost || !d.bursts.is_empty() {
                survey.blocks_damaged += 1;
            }
        }
        for f in 0..config.frames_per_transmission {
            let from = f * config.frame_bytes;
            survey.frames += 1;
            if frame_release(&tx, &decisions, from..from + config.frame_bytes).is_none() {
                survey.frames_lost += 1;
            }
        }
        survey.transmissions += 1;
        start = tx.peer_may_transmit_at();
    }
    survey.channel_seconds = start.as_secs_f64();
    Ok(survey)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::modem::{DataRate, Generation, Interleaver};

    fn config(snr_db: f64, channel: &str, rate: DataRate, frame_bytes: usize) -> SurveyConfig {
        let mut modem = ModemConfig::new(rate, Interleaver::Short).unwrap();
        modem.generation = Generation::Mil110aMinimum;
        SurveyConfig {
            modem,
            channel: if channel == "awgn" {
                ChannelConfig::awgn(snr_db)
            } else {
                ChannelConfig::watterson(snr_db, channel).unwrap()
            },
            frame_bytes,
            frames_per_transmission: 4,
            transmissions: 2000,
            seed: 1,
        }
    }

    #[test]
    fn a_clean_channel_loses_nothing_and_a_dead_one_everything() {
        let clean = run(&config(30.0, "awgn", DataRate::Bps1200, 276)).unwrap();
        assert_eq!((clean.frames, clean.frames_lost), (8000, 0));
        assert_eq!(clean.blocks_damaged, 0);
        // 4 × 276 bytes at 1200 bit/s in 0.6 s blocks of 90 bytes: 13 blocks carry them.
        assert_eq!(clean.blocks, 2000 * 13);
        let dead = run(&config(-20.0, "awgn", DataRate::Bps1200, 276)).unwrap();
        assert_eq!(dead.frames_lost, dead.frames);
        assert!(dead.mean_ber() > 0.1, "{dead:?}");
    }

    #[test]
    fn on_slow_fading_the_faster_rate_loses_more_frames_of_the_same_size() {
        // ITU-R Good at 15 dB, short interleaver, the 1990s modem: 2400 bit/s is 3-4 dB
        // closer to its waterfall than 1200 bit/s, and its frames span fewer blocks; the first
        // effect wins. Seeded, the same grid point as `skywave-bench modem`'s default: 1.66 %
        // and 4.78 %; the bands catch a change of the model.
        let slow = run(&config(15.0, "good", DataRate::Bps1200, 276)).unwrap();
        let fast = run(&config(15.0, "good", DataRate::Bps2400, 276)).unwrap();
        let (s, f) = (slow.frame_loss_rate(), fast.frame_loss_rate());
        assert!((0.0160..0.0180).contains(&s), "1200: {s:.4}");
        assert!((0.0460..0.0495).contains(&f), "2400: {f:.4}");
        // A 1045-byte frame (a full 5066 D_PDU) spans more blocks and is lost more often.
        let big = run(&config(15.0, "good", DataRate::Bps2400, 1045)).unwrap();
        assert!(big.frame_loss_rate() > 2.0 * f, "{big:?}");
    }

    #[test]
    fn settings_out_of_range_are_refused() {
        let mut c = config(10.0, "awgn", DataRate::Bps1200, 276);
        c.transmissions = 0;
        assert!(matches!(
            run(&c),
            Err(SurveyError::Setting {
                name: "transmissions",
                ..
            })
        ));
        c.transmissions = 1;
        c.frame_bytes = 0;
        assert!(run(&c).unwrap_err().to_string().contains("frame_bytes"));
    }
}
