//! Raw-modem mode: IP datagrams straight over the half-duplex modem, with no ARQ, as JNOS ran
//! TCP/IP over HF for the NTIA measurements (NTIA Report 99-360): one AX.25-like frame per
//! datagram, 20 bytes of framing per frame (SDLC/AX.25 flags, addresses, control, PID and
//! FCS), and a frame either arrives intact or not at all (the FCS throws away any frame with
//! a bit error). Recovering lost frames is TCP's job, above this module.
//!
//! It sits beside [`crate::net`] (the STANAG 5066 subnetwork) on the same radio model: every
//! transmission is planned with [`ModemConfig::plan`], arbitrated on an [`Air`], and each
//! interleaver block's fate is drawn with [`ModemConfig::receive_block`] from the receiver's
//! own [`Channel`] direction, exactly as `net` does; a frame is lost if any block carrying its
//! bits is lost or has an error burst inside them. The channels are built from the seed in the
//! same order as `net` builds them (direction 0→1, then 1→0), so the two modes share one radio
//! model and one realisation of the fading per seed.
//!
//! Channel access is AX.25/KISS p-persistent CSMA between two stations:
//! - a station with queued frames senses the carrier at each slot; if the channel is clear it
//!   keys up with probability (persistence + 1) / 256, otherwise it waits one slot time;
//! - a station hears the other's carrier only `carrier_detect` after the other started keying
//!   (key-up and modem preamble acquisition); two stations that key up within that window do
//!   not hear each other, and both transmissions collide and are lost;
//! - while it hears the other it defers until that transmission is over, decoded, and its own
//!   radio has switched back to transmit ([`Transmission::peer_may_transmit_at`]); the
//!   station that just transmitted waits the same time (TX→RX→TX switching), so both contend
//!   fairly for the next turn;
//! - a keyed station sends its queued frames back to back in one transmission (key-up,
//!   preamble, whole interleaver blocks, EOM and flush), as many as fit in the maximum
//!   transmission time (always at least one), then releases the channel.
//!
//! | parameter | default | source |
//! |---|---|---|
//! | framing per frame | 20 bytes | NTIA 99-360 (AX.25 with SDLC framing), `ntia-jnos-table5.csv` |
//! | persistence | 63 (p = 0.25) | KISS/AX.25 default **\[K\]** |
//! | slot time | 100 ms | KISS/AX.25 default **\[K\]** |
//! | carrier detect | key-up + preamble | the modem cannot report a carrier before it has the preamble **\[K\]** |
//! | maximum transmission | 127.5 s | same bound as STANAG 5066; JNOS/KISS has none, the TCP window bounds a turn in practice |
//! | queue | 256 frames per station, tail drop | **\[K\]** |
//!
//! Sans-IO and deterministic: time is a [`Duration`] since the link started, passed in by the
//! caller ([`RawLink::send`], [`RawLink::advance`]); [`RawLink::poll_at`] says when something
//! next happens; all randomness (fading, block errors, persistence draws) comes from one
//! ChaCha8 RNG seeded from [`RawConfig::seed`].
//!
//! Not modelled: AX.25 connected mode (I frames, RR, retries). NTIA does not say which mode JNOS
//! used; IP over UI frames (datagram mode) is assumed, which is what "no ARQ" means here. Nor
//! digipeaters, a station hearing its own echo, frames that straddle a collision only in part
//! (a collision destroys both whole transmissions, as on [`Air`]).

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use thiserror::Error;

use crate::channel::{Channel, ChannelConfig, ChannelError};
use crate::modem::{Air, BlockDecision, ModemConfig, ModemError, Transmission, TxId};

/// Bytes of framing per frame: AX.25 header (16-byte addresses, control, PID) and FCS with
/// SDLC flags, as NTIA counts them.
pub const FRAME_OVERHEAD: usize = 20;

/// Largest datagram accepted in one frame.
pub const MAX_DATAGRAM: usize = 8192;

/// Most events [`RawLink::advance`] processes in one call (a guard; a healthy link needs a
/// handful per transmission).
const MAX_EVENTS_PER_ADVANCE: usize = 1 << 20;

/// Configuration of a raw-modem link between two stations (0 and 1).
#[derive(Debug, Clone, PartialEq)]
pub struct RawConfig {
    /// The modem of both stations.
    pub modem: ModemConfig,
    /// Channel model, instantiated once per direction.
    pub channel: ChannelConfig,
    /// Seed of every random draw (fading, block errors, persistence).
    pub seed: u64,
    /// Framing bytes added to each datagram on the air.
    pub frame_overhead: usize,
    /// Longest transmission; a station sends at least one frame even if it takes longer.
    pub max_transmission: Duration,
    /// CSMA slot time (KISS SLOTTIME).
    pub slot_time: Duration,
    /// KISS persistence: key up in a clear slot with probability (persistence + 1) / 256.
    pub persistence: u8,
    /// How long after a station starts keying the other one hears its carrier.
    pub carrier_detect: Duration,
    /// Frames a station holds waiting for the channel; more are dropped.
    pub queue_limit: usize,
}

impl RawConfig {
    /// The documented defaults for this modem and channel (see the module table), seed 1.
    pub fn new(modem: ModemConfig, channel: ChannelConfig) -> RawConfig {
        let carrier_detect = modem.key_up + modem.preamble().unwrap_or(Duration::ZERO);
        RawConfig {
            modem,
            channel,
            seed: 1,
            frame_overhead: FRAME_OVERHEAD,
            max_transmission: Duration::from_millis(127_500),
            slot_time: Duration::from_millis(100),
            persistence: 63,
            carrier_detect,
            queue_limit: 256,
        }
    }
}

/// Why a raw link could not be built or a datagram not be queued.
#[derive(Debug, Error)]
pub enum RawError {
    /// The modem configuration is unusable.
    #[error("modem: {0}")]
    Modem(#[from] ModemError),
    /// The channel configuration is unusable.
    #[error("channel: {0}")]
    Channel(#[from] ChannelError),
    /// A setting is out of range.
    #[error("raw link setting {name} is invalid: {reason}")]
    BadConfig {
        /// The setting.
        name: &'static str,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// Only stations 0 and 1 exist.
    #[error("station {0} does not exist (a raw link has stations 0 and 1)")]
    NoSuchStation(usize),
    /// The datagram does not fit in one frame.
    #[error("datagram of {len} bytes is larger than the {MAX_DATAGRAM} bytes one frame carries")]
    TooLarge {
        /// Its length.
        len: usize,
    },
}

/// What the link counted, both directions together.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RawCounters {
    /// Transmissions (key-ups).
    pub transmissions: u64,
    /// Frame bytes sent, framing included (not counting preamble, EOM, flush or padding).
    pub bytes_on_air: u64,
    /// Frames sent.
    pub frames_sent: u64,
    /// Frames delivered intact.
    pub frames_delivered: u64,
    /// Frames lost to channel errors (lost blocks or bit errors).
    pub frames_lost: u64,
    /// Frames lost in collisions.
    pub frames_collided: u64,
    /// Collisions (overlapping pairs of transmissions).
    pub collisions: u64,
    /// Frames dropped because the sender's queue was full.
    pub frames_dropped: u64,
    /// Total time the channel carried a transmission (key-up included).
    pub air_time: Duration,
}

/// A datagram that arrived intact.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivered {
    /// When the receiving modem released the frame's last block.
    pub at: Duration,
    /// Sending station.
    pub from: usize,
    /// Receiving station.
    pub to: usize,
    /// The datagram (framing removed).
    pub datagram: Vec<u8>,
}

#[derive(Debug, Default)]
struct Station {
    queue: VecDeque<Vec<u8>>,
    /// Earliest time it may try to key up (switching after a transmission, back-off).
    not_before: Duration,
    /// Next carrier-sense slot, while it has frames.
    next_try: Option<Duration>,
    transmitting: bool,
}

#[derive(Debug)]
struct OnAir {
    id: TxId,
    station: usize,
    tx: Transmission,
    /// (byte offset in the transmission, datagram)
    frames: Vec<(usize, Vec<u8>)>,
}

/// A two-station raw-modem link; see the module documentation.
#[derive(Debug)]
pub struct RawLink {
    config: RawConfig,
    /// `channels[s]`: the direction from station `s` to the other.
    channels: [Channel; 2],
    rng: ChaCha8Rng,
    air: Air,
    stations: [Station; 2],
    on_air: Vec<OnAir>,
    /// Frames waiting for their release time, keyed by (time, sequence).
    arrivals: BTreeMap<(Duration, u64), Delivered>,
    next_seq: u64,
    now: Duration,
    counters: RawCounters,
}

impl RawLink {
    /// Builds the link (channel realisations drawn from the seed).
    pub fn new(config: RawConfig) -> Result<RawLink, RawError> {
        config.modem.block_duration()?;
        config.modem.preamble()?;
        if config.slot_time.is_zero() {
            return Err(RawError::BadConfig {
                name: "slot_time",
                reason: "must be longer than zero",
            });
        }
        if config.queue_limit == 0 {
            return Err(RawError::BadConfig {
                name: "queue_limit",
                reason: "must be at least one frame",
            });
        }
        if config.frame_overhead > 1024 {
            return Err(RawError::BadConfig {
                name: "frame_overhead",
                reason: "must be at most 1024 bytes",
            });
        }
        let mut rng = ChaCha8Rng::seed_from_u64(config.seed);
        // Same order as `net::Subnet::start` for two nodes: (0, 1) then (1, 0).
        let c01 = Channel::new(config.channel.clone(), &mut rng)?;
        let c10 = Channel::new(config.channel.clone(), &mut rng)?;
        Ok(RawLink {
            config,
            channels: [c01, c10],
            rng,
            air: Air::new(),
            stations: [Station::default(), Station::default()],
            on_air: Vec::new(),
            arrivals: BTreeMap::new(),
            next_seq: 0,
            now: Duration::ZERO,
            counters: RawCounters::default(),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &RawConfig {
        &self.config
    }

    /// Counters so far.
    pub fn counters(&self) -> RawCounters {
        let mut c = self.counters;
        c.collisions = self.air.collisions();
        c
    }

    /// Time of the last [`advance`](Self::advance) or [`send`](Self::send).
    pub fn now(&self) -> Duration {
        self.now
    }

    /// Frames `station` holds waiting for the channel.
    pub fn queued(&self, station: usize) -> usize {
        self.stations.get(station).map_or(0, |s| s.queue.len())
    }

    /// Queues a datagram at `station` for the other station at time `now`. Events before
    /// `now` are processed first and the datagrams they released are returned; events at
    /// `now` itself are left to the next [`advance`](Self::advance), so that datagrams queued
    /// at the same instant go out in the same transmission. A datagram beyond the queue limit
    /// is dropped and counted, as a full KISS queue drops it.
    pub fn send(
        &mut self,
        now: Duration,
        station: usize,
        datagram: Vec<u8>,
    ) -> Result<Vec<Delivered>, RawError> {
        if station > 1 {
            return Err(RawError::NoSuchStation(station));
        }
        if datagram.len() > MAX_DATAGRAM {
            return Err(RawError::TooLarge {
                len: datagram.len(),
            });
        }
        let out = self.run(now, false);
        let now = self.now;
        let limit = self.config.queue_limit;
        let s = &mut self.stations[station];
        if s.queue.len() >= limit {
            self.counters.frames_dropped += 1;
        } else {
            s.queue.push_back(datagram);
            if !s.transmitting && s.next_try.is_none() {
                s.next_try = Some(now.max(s.not_before));
            }
        }
        Ok(out)
    }

    /// When something next happens (a slot decision, the end of a transmission, a frame
    /// released by a modem), if anything is pending.
    pub fn poll_at(&self) -> Option<Duration> {
        let ends = self.on_air.iter().map(|o| o.tx.end);
        let tries = self
            .stations
            .iter()
            .filter(|s| !s.transmitting && !s.queue.is_empty())
            .filter_map(|s| s.next_try);
        let arrivals = self.arrivals.keys().next().map(|k| k.0);
        ends.chain(tries).chain(arrivals).min()
    }

    /// Processes everything up to `now` and returns the datagrams released by then, in order.
    /// Time never goes back: an earlier `now` than the last one is treated as the last one.
    pub fn advance(&mut self, now: Duration) -> Vec<Delivered> {
        self.run(now, true)
    }

    /// Processes events before `now` (and at `now` if `inclusive`) and returns the datagrams
    /// released by then.
    fn run(&mut self, now: Duration, inclusive: bool) -> Vec<Delivered> {
        let now = now.max(self.now);
        let due = |t: Duration| t < now || (inclusive && t == now);
        for _ in 0..MAX_EVENTS_PER_ADVANCE {
            let end = self
                .on_air
                .iter()
                .enumerate()
                .map(|(i, o)| (o.tx.end, i))
                .min();
            let tries = (0..2)
                .filter_map(|i| {
                    let s = &self.stations[i];
                    (!s.transmitting && !s.queue.is_empty())
                        .then_some(s.next_try)
                        .flatten()
                        .map(|t| (t, i))
                })
                .min();
            match (end, tries) {
                // Ends first on ties: a station deciding at the instant a transmission ends
                // sees the state after it.
                (Some((te, i)), t) if due(te) && t.is_none_or(|(tt, _)| te <= tt) => {
                    self.now = self.now.max(te);
                    self.finish(i);
                }
                (_, Some((tt, s))) if due(tt) => {
                    self.now = self.now.max(tt);
                    self.try_key_up(s, tt);
                }
                _ => break,
            }
        }
        self.now = now;
        let cut = if inclusive {
            now + Duration::from_nanos(1)
        } else {
            now
        };
        let later = self.arrivals.split_off(&(cut, 0));
        let ready = std::mem::replace(&mut self.arrivals, later);
        ready.into_values().collect()
    }

    /// Whether `station` hears a carrier at `t`.
    fn hears_carrier(&self, station: usize, t: Duration) -> Option<Duration> {
        self.on_air
            .iter()
            .filter(|o| o.station != station && o.tx.start + self.config.carrier_detect <= t)
            .map(|o| o.tx.end)
            .max()
    }

    fn try_key_up(&mut self, station: usize, t: Duration) {
        if self.hears_carrier(station, t).is_some() {
            // Deferred until that transmission ends (`finish` reschedules it).
            self.stations[station].next_try = None;
            return;
        }
        let draw: u8 = self.rng.random();
        if draw > self.config.persistence {
            self.stations[station].next_try = Some(t + self.config.slot_time);
            return;
        }
        self.key_up(station, t);
    }

    fn key_up(&mut self, station: usize, t: Duration) {
        let overhead = self.config.frame_overhead;
        let modem = self.config.modem.clone();
        let s = &mut self.stations[station];
        let mut frames: Vec<(usize, Vec<u8>)> = Vec::new();
        let mut bytes = 0usize;
        let mut plan: Option<Transmission> = None;
        while let Some(d) = s.queue.front() {
            let more = bytes + d.len() + overhead;
            let Ok(tx) = modem.plan(t, more) else { break };
            if !frames.is_empty() && tx.duration() > self.config.max_transmission {
                break;
            }
            let Some(d) = s.queue.pop_front() else { break };
            frames.push((bytes, d));
            bytes = more;
            plan = Some(tx);
        }
        let Some(tx) = plan else {
            // Cannot happen for datagrams within MAX_DATAGRAM; drop the head so the loop ends.
            if s.queue.pop_front().is_some() {
                self.counters.frames_dropped += 1;
            }
            s.next_try = (!s.queue.is_empty()).then_some(t + self.config.slot_time);
            return;
        };
        s.transmitting = true;
        s.next_try = None;
        let id = self.air.transmit(station, &tx);
        self.counters.transmissions += 1;
        self.counters.bytes_on_air += bytes as u64;
        self.counters.frames_sent += frames.len() as u64;
        self.counters.air_time += tx.duration();
        self.on_air.push(OnAir {
            id,
            station,
            tx,
            frames,
        });
    }

    fn finish(&mut self, index: usize) {
        let o = self.on_air.swap_remove(index);
        let sender = o.station;
        let receiver = 1 - sender;
        let free_at = o.tx.peer_may_transmit_at();
        if self.air.collided(o.id) {
            self.counters.frames_collided += o.frames.len() as u64;
        } else if !self.stations[receiver].transmitting {
            self.receive(&o, receiver);
        } else {
            // The receiver keyed up during this transmission: half duplex, it heard nothing
            // (the Air marks that case as a collision, so this is only a guard).
            self.counters.frames_collided += o.frames.len() as u64;
        }
        self.stations[sender].transmitting = false;
        for s in &mut self.stations {
            if !s.transmitting {
                s.not_before = s.not_before.max(free_at);
                if !s.queue.is_empty() {
                    s.next_try = Some(s.next_try.unwrap_or(free_at).max(s.not_before));
                }
            }
        }
        self.air
            .forget_before(self.now.saturating_sub(Duration::from_secs(600)));
    }

    fn receive(&mut self, o: &OnAir, receiver: usize) {
        let channel = &self.channels[o.station];
        let decisions: Vec<_> =
            o.tx.blocks
                .iter()
                .map(|b| self.config.modem.receive_block(channel, b, &mut self.rng))
                .collect();
        let overhead = self.config.frame_overhead;
        for (offset, datagram) in &o.frames {
            let release = frame_release(
                &o.tx,
                &decisions,
                *offset..*offset + datagram.len() + overhead,
            );
            if let Some(release) = release {
                self.counters.frames_delivered += 1;
                self.arrivals.insert(
                    (release, self.next_seq),
                    Delivered {
                        at: release,
                        from: o.station,
                        to: receiver,
                        datagram: datagram.clone(),
                    },
                );
                self.next_seq += 1;
            } else {
                self.counters.frames_lost += 1;
            }
        }
    }
}

/// When the receiver hands up the frame that occupies payload bytes `bytes` of a received
/// transmission, or `None` if a block carrying its bits was lost or has an error burst inside
/// them (the FCS throws the frame away). `decisions` are the blocks' fates, in order.
pub fn frame_release(
    tx: &Transmission,
    decisions: &[BlockDecision],
    bytes: std::ops::Range<usize>,
) -> Option<Duration> {
    let block_bits = tx.block_bits.max(1);
    let lo = bytes.start as u64 * 8;
    let hi = bytes.end as u64 * 8;
    let mut release = tx.end;
    for k in lo / block_bits..hi.div_ceil(block_bits) {
        let (Some(d), Some(b)) = (decisions.get(k as usize), tx.blocks.get(k as usize)) else {
            continue;
        };
        release = b.release;
        let base = k * block_bits;
        let local = lo.max(base) - base..hi.min(base + block_bits) - base;
        if d.lost || d.damages(&local) {
            return None;
        }
    }
    Some(release)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::channel::{Impairment, ScheduledImpairment};
    use crate::modem::{DataRate, Interleaver};

    fn link(rate: DataRate, channel: ChannelConfig, seed: u64) -> RawLink {
        let modem = ModemConfig::new(rate, Interleaver::Short).unwrap();
        let mut c = RawConfig::new(modem, channel);
        c.seed = seed;
        RawLink::new(c).unwrap()
    }

    /// Runs the link until nothing is pending (bounded) and returns every delivery.
    fn drain(l: &mut RawLink) -> Vec<Delivered> {
        let mut out = Vec::new();
        for _ in 0..100_000 {
            let Some(t) = l.poll_at() else { break };
            out.extend(l.advance(t));
        }
        out
    }

    #[test]
    fn clean_link_delivers_frames_in_one_transmission() {
        let mut l = link(DataRate::Bps1200, ChannelConfig::awgn(30.0), 1);
        for i in 0..3u8 {
            assert!(l.send(Duration::ZERO, 0, vec![i; 100]).unwrap().is_empty());
        }
        let got = drain(&mut l);
        assert_eq!(got.len(), 3);
        for (i, d) in got.iter().enumerate() {
            assert_eq!((d.from, d.to), (0, 1));
            assert_eq!(d.datagram, vec![i as u8; 100]);
        }
        let c = l.counters();
        assert_eq!(c.transmissions, 1);
        assert_eq!(c.bytes_on_air, 3 * 120);
        assert_eq!(
            (c.frames_sent, c.frames_delivered, c.frames_lost),
            (3, 3, 0)
        );
    }

    #[test]
    fn timing_follows_the_modem_plan() {
        let mut l = link(DataRate::Bps1200, ChannelConfig::awgn(30.0), 3);
        l.send(Duration::ZERO, 0, vec![7; 80]).unwrap();
        let got = drain(&mut l);
        assert_eq!(got.len(), 1);
        // 100 bytes of frame at 1200 bit/s with a 0.6 s interleaver (720 bits a block):
        // 800 + 32 + 144 bits = 2 blocks. The first slot decision is at 0, keyed at the
        // first slot the persistence draw allows.
        let modem = l.config().modem.clone();
        let key = got[0].at - modem.plan(Duration::ZERO, 100).unwrap().blocks[1].release;
        assert_eq!(key.as_nanos() % 100_000_000, 0, "keyed on a slot boundary");
    }

    #[test]
    fn persistence_255_keys_up_at_once() {
        let modem = ModemConfig::new(DataRate::Bps1200, Interleaver::Short).unwrap();
        let mut c = RawConfig::new(modem.clone(), ChannelConfig::awgn(30.0));
        c.persistence = 255;
        let mut l = RawLink::new(c).unwrap();
        l.send(Duration::from_secs(5), 1, vec![1; 30]).unwrap();
        let got = drain(&mut l);
        let tx = modem.plan(Duration::from_secs(5), 50).unwrap();
        assert_eq!(got[0].at, tx.blocks[0].release);
        assert_eq!((got[0].from, got[0].to), (1, 0));
    }

    #[test]
    fn outage_loses_frames_and_counts_them() {
        let mut ch = ChannelConfig::awgn(30.0);
        ch.impairments.push(ScheduledImpairment {
            start: Duration::ZERO,
            length: Duration::from_secs(3600),
            impairment: Impairment::Outage,
        });
        let mut l = link(DataRate::Bps1200, ch, 2);
        for _ in 0..4 {
            l.send(Duration::ZERO, 0, vec![0; 200]).unwrap();
        }
        assert!(drain(&mut l).is_empty());
        let c = l.counters();
        assert_eq!(
            (c.frames_sent, c.frames_lost, c.frames_delivered),
            (4, 4, 0)
        );
    }

    #[test]
    fn simultaneous_senders_collide_sometimes_and_recover() {
        let mut collided = 0;
        for seed in 0..20 {
            let mut l = link(DataRate::Bps1200, ChannelConfig::awgn(30.0), seed);
            l.send(Duration::ZERO, 0, vec![0; 50]).unwrap();
            l.send(Duration::ZERO, 1, vec![1; 50]).unwrap();
            let got = drain(&mut l);
            let c = l.counters();
            collided += c.collisions;
            // No ARQ: a collided frame is gone; the others arrive.
            assert_eq!(
                got.len() as u64 + c.frames_collided,
                2,
                "seed {seed}: every frame either arrives or collides"
            );
        }
        assert!(
            collided > 0,
            "with p = 0.25 and 0.7 s to detect, some slots collide"
        );
    }

    #[test]
    fn a_station_defers_while_it_hears_the_other() {
        let modem = ModemConfig::new(DataRate::Bps300, Interleaver::Short).unwrap();
        let mut c = RawConfig::new(modem, ChannelConfig::awgn(30.0));
        c.persistence = 255;
        let mut l = RawLink::new(c).unwrap();
        l.send(Duration::ZERO, 0, vec![0; 500]).unwrap();
        // Station 1 becomes ready well after station 0's carrier is detectable.
        l.send(Duration::from_secs(3), 1, vec![1; 10]).unwrap();
        let got = drain(&mut l);
        assert_eq!(got.len(), 2);
        assert_eq!(l.counters().collisions, 0);
        assert_eq!(l.counters().transmissions, 2);
        assert!(got[1].at > got[0].at);
    }

    #[test]
    fn max_transmission_splits_a_long_queue() {
        let modem = ModemConfig::new(DataRate::Bps1200, Interleaver::Short).unwrap();
        let mut c = RawConfig::new(modem, ChannelConfig::awgn(30.0));
        c.max_transmission = Duration::from_secs(5);
        c.persistence = 255;
        let mut l = RawLink::new(c).unwrap();
        for i in 0..6u8 {
            l.send(Duration::ZERO, 0, vec![i; 236]).unwrap();
        }
        let got = drain(&mut l);
        assert_eq!(got.len(), 6);
        // 256-byte frames take 1.7 s each at 1200 bit/s: two per 5 s transmission.
        assert_eq!(l.counters().transmissions, 3);
    }

    #[test]
    fn queue_limit_and_bad_input_are_reported() {
        let modem = ModemConfig::new(DataRate::Bps1200, Interleaver::Short).unwrap();
        let mut c = RawConfig::new(modem, ChannelConfig::awgn(30.0));
        c.queue_limit = 2;
        let mut l = RawLink::new(c).unwrap();
        for _ in 0..3 {
            l.send(Duration::ZERO, 0, vec![0; 10]).unwrap();
        }
        assert_eq!(l.counters().frames_dropped, 1);
        assert!(matches!(
            l.send(Duration::ZERO, 2, vec![]),
            Err(RawError::NoSuchStation(2))
        ));
        assert!(matches!(
            l.send(Duration::ZERO, 0, vec![0; MAX_DATAGRAM + 1]),
            Err(RawError::TooLarge { .. })
        ));
    }

    #[test]
    fn same_seed_same_run_and_fading_loses_frames() {
        let run = |seed| {
            let ch = ChannelConfig::watterson(8.0, "good").unwrap();
            let mut l = link(DataRate::Bps1200, ch, seed);
            let mut got = Vec::new();
            for i in 0..200u32 {
                let t = Duration::from_secs(u64::from(i) * 20);
                got.extend(l.send(t, (i % 2) as usize, vec![i as u8; 216]).unwrap());
            }
            got.extend(drain(&mut l));
            (got, l.counters())
        };
        let (a, ca) = run(9);
        let (b, cb) = run(9);
        assert_eq!(a, b);
        assert_eq!(ca, cb);
        assert!(ca.frames_lost > 0, "8 dB on ITU Good must lose some frames");
        assert!(ca.frames_delivered > 0);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(32))]

        /// Whatever is sent when: every frame is delivered, lost or collided exactly once,
        /// and what arrives in each direction is a subsequence of what was sent, in order.
        #[test]
        fn every_frame_is_accounted_for(
            sends in proptest::collection::vec((0u64..120_000, 0usize..2, 0usize..600), 0..40),
            snr in -5.0f64..30.0,
            seed in 0u64..1000,
        ) {
            let mut sends = sends;
            sends.sort_by_key(|s| s.0);
            let ch = ChannelConfig::watterson(snr, "good").unwrap();
            let mut l = link(DataRate::Bps1200, ch, seed);
            let mut got = Vec::new();
            let mut sent: [Vec<Vec<u8>>; 2] = [Vec::new(), Vec::new()];
            for (i, (ms, st, len)) in sends.iter().enumerate() {
                let mut d = vec![(i % 251) as u8; *len];
                d.extend_from_slice(&(i as u32).to_be_bytes());
                sent[*st].push(d.clone());
                got.extend(l.send(Duration::from_millis(*ms), *st, d).unwrap());
            }
            got.extend(drain(&mut l));
            let c = l.counters();
            proptest::prop_assert_eq!(c.frames_sent, sends.len() as u64);
            proptest::prop_assert_eq!(
                c.frames_delivered + c.frames_lost + c.frames_collided,
                c.frames_sent
            );
            proptest::prop_assert_eq!(got.len() as u64, c.frames_delivered);
            for (st, sent) in sent.iter().enumerate() {
                let mut it = sent.iter();
                for d in got.iter().filter(|d| d.from == st) {
                    proptest::prop_assert_eq!(d.to, 1 - st);
                    proptest::prop_assert!(it.any(|s| *s == d.datagram));
                }
            }
            let times: Vec<_> = got.iter().map(|d| d.at).collect();
            proptest::prop_assert!(times.windows(2).all(|w| w[0] <= w[1]));
        }
    }
}
