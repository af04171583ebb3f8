//! The bundled HF emulator: channel, MIL-STD-188-110 modem and STANAG 5066 nodes in virtual time.
//!
//! Stands in for radios, modems and 5066 servers in the demo, the end-to-end tests and the
//! benchmarks, so it must behave like the real thing where it matters for mail: time on the
//! air, link turnarounds, errors that depend on SNR and fading, ARQ retransmissions.
//!
//! The physical and protocol layers ([`channel`] to [`arq`]) are sans-IO and deterministic: no
//! clocks, no sockets, no tokio. Time is a `std::time::Duration` since the start of the
//! simulation, and randomness comes from an RNG the caller passes in (seed it, e.g.
//! `rand_chacha::ChaCha8Rng::seed_from_u64`, and the run is reproducible). [`net`] drives them
//! with tokio time from one seeded RNG, so a run in paused time is reproducible too.
//!
//! Layers, bottom up:
//! - [`channel`]: one direction of an HF channel: SNR in 3 kHz, AWGN or a Watterson two-path
//!   profile from `channel-profiles.csv` (fading generated in time), optional slow SNR drift,
//!   scheduled outages, fades and block losses.
//! - [`modem`]: MIL-STD-188-110A (75–2400 bit/s) and 110B Appendix C (3200–9600 bit/s) timing
//!   (key-up, preamble, whole interleaver blocks, EOM and flush, decode latency, turnaround),
//!   half-duplex collisions, and per-block errors from the block's effective SNR.
//! - [`calibration`]: the published required-SNR table the modem reproduces
//!   (`modem-required-snr.csv`), the fitted curves and the simulation that checks them.
//! - [`crc`], [`dpdu`]: the STANAG 5066 Annex C CRCs and D_PDU codec: the bytes on the air.
//! - [`cpdu`], [`spdu`]: Annex B C_PDUs and Annex A S_PDUs, carried inside D_PDU segments.
//! - [`arq`]: the sans-IO Annex C selective-repeat ARQ core for one link (sender and receiver).
//! - [`net`]: the discrete-event scheduler (tokio time, so virtual in paused tests) joining N
//!   nodes, their modems and channels into one half-duplex subnetwork: ARQ links with
//!   RESET/WIN-RESYNC, expedited data, non-ARQ to individual and group addresses (each member
//!   through its own channel), data-rate change, several peers per node (a transmission shared
//!   fairly among them, addressees answering in turn, random carrier-sense back-off), counters
//!   and a per-transmission trace.
//! - [`missing`]: how a check that needs an outside tool or `../shared` skips on a developer's
//!   machine and fails under `scripts/test.sh`.
//! - [`sis_server`]: each node's Annex A SIS server, in process or on TCP.
//! - [`capture`]: pcap of every D_PDU put on the air, for Wireshark's `s5066dts` dissector.
//! - [`raw`]: raw-modem mode (sans-IO): IP datagrams in AX.25-like frames straight over the
//!   half-duplex modem with p-persistent CSMA and no ARQ, as JNOS ran TCP/IP over HF.
//! - [`ipnet`]: not HF: an emulated IP network (each host's uplink rate, one-way delay, seeded
//!   loss per copy, multicast to every subscriber) in tokio time, for P_MUL over UDP/IP beside
//!   HF in the fleet benchmark.
//!
//! The layers up to [`arq`] are sans-IO (no clocks, no sockets); [`net`] and [`sis_server`]
//! are the async shell around them.
//!
//! Not here: Annex B link establishment (CAS-1; links are assumed made), hard links, full
//! resets (only RESET/WIN-RESYNC), non-ARQ "with errors" delivery (served as plain non-ARQ).

pub mod arq;
pub mod calibration;
pub mod capture;
pub mod channel;
pub mod cpdu;
pub mod crc;
pub mod dpdu;
pub mod ipnet;
pub mod missing;
pub mod modem;
pub mod net;
pub mod node;
pub mod raw;
pub mod sis_server;
pub mod spdu;
