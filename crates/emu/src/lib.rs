//! The bundled HF emulator: channel, MIL-STD-188-110 modem and STANAG 5066 nodes in virtual time.
//!
//! Stands in for radios, modems and 5066 servers in the demo, the end-to-end tests and the
//! benchmarks, so it must behave like the real thing where it matters for mail: time on the
//! air, link turnarounds, errors that depend on SNR and fading, ARQ retransmissions.
//!
//! The physical and protocol layers ([`channel`] to [`node`]) are sans-IO and deterministic:
//! no clocks, no sockets, no tokio. Time is a `std::time::Duration` since the start of the
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
//! - [`arq`]: the sans-IO Annex C selective-repeat ARQ core for one link (sender and receiver),
//!   with DROP C_PDU and DELIVER IN ORDER (an as-they-arrive C_PDU goes up once whole).
//! - [`node`]: one STANAG 5066 node, sans-IO: its clients' bindings and queues (priority,
//!   TTL in the queue, in the ARQ and, as the DATA S_PDU's time to die, at the receiving
//!   node; the default maximum TTL for U_PDUs sent with TTL 0; the wait for a node delivery
//!   confirmation; flow control; optional duplicate filter), an ARQ link per peer with
//!   DATA-ACK, RESET/WIN-RESYNC and link loss, expedited ARQ, non-ARQ to individual and group
//!   addresses, data-rate change and counters. SIS requests, received D_PDU bytes and time
//!   in; one transmission's D_PDUs (planned on the modem) and the SIS primitives for its
//!   clients out.
//! - [`net`]: the discrete-event scheduler that drives the nodes, as quinn drives
//!   quinn-proto: tokio time (so virtual in paused tests), the shared half-duplex air and its
//!   collisions, a channel per ordered pair of nodes and every block's fate from one seeded
//!   RNG, who keys up when (addressees answering in turn, the response timeout, random
//!   carrier-sense back-off), each group member hearing through its own channel, the clients'
//!   channels, the counters, the per-transmission trace and the pcap.
//! - [`missing`]: how a check that needs an outside tool or `../shared` skips on a developer's
//!   machine and fails under `scripts/test.sh`.
//! - [`sis_server`]: each node's Annex A SIS server, in process or on TCP.
//! - [`capture`]: pcap of every D_PDU put on the air, for Wireshark's `s5066dts` dissector.
//! - [`raw`]: raw-modem mode (sans-IO): IP datagrams in AX.25-like frames straight over the
//!   half-duplex modem with p-persistent CSMA and no ARQ, as JNOS ran TCP/IP over HF.
//! - [`survey`]: what the modem alone does to frames of one size on a channel (blocks
//!   damaged, frames lost), sans-IO, for `skywave-bench modem`.
//! - [`ipnet`]: not HF: an emulated IP network (each host's uplink rate, one-way delay, seeded
//!   loss per copy, multicast to every subscriber) in tokio time, for P_MUL over UDP/IP beside
//!   HF in the fleet benchmark.
//!
//! The layers up to [`node`] are sans-IO (no clocks, no sockets); [`net`] and [`sis_server`]
//! are the async shell around them.
//!
//! Resets: a sender whose ACKs keep falling outside its transmit window (its peer lost its
//! receive state) resets its window and sends RESET/WIN-RESYNC with RESET RX WIN CMND, and the
//! peer answers RESET ACK. A node that restarted ([`net::Subnet::restart_node`]: its clients
//! disconnected, everything it held lost, deaf and refusing clients while down) sends FULL
//! RESET CMD before its first ARQ exchange with each peer, which puts both of the peer's ARQ
//! machines for it back at FSN 0 and is answered RESET ACK. A receiver runs Annex C's
//! synchronisation tests (§C.6.3.2, on the TX WIN UWE and LWE flags and every FSN) on each
//! DATA frame; a frame that fails shows the peer's transmit window out of step with its
//! receive window: it discards the peer's data unacknowledged and sends RESET TX WIN RQST,
//! which the peer answers, as Annex C says, with a reset of its transmit window and RESET RX
//! WIN CMND.
//!
//! Giving up (built): a U_PDU whose TTL runs out in the ARQ is discarded, its unacknowledged
//! frames sent with DROP C_PDU so that the receiver discards its part too, and rejected to a
//! client that asked for a confirm (TTL expired); one that arrives after its time to die is
//! discarded by the receiving node; a node with [`net::SubnetConfig::confirm_wait`] tells a
//! client whose confirm has not come in that time "destination node not responding" and lets
//! the U_PDU go on; a node whose ARQ data to a peer goes
//! unanswered for 1 + [`node::DEFAULT_LINK_RETRIES`] transmissions in a row (configurable,
//! or off) declares the link lost, discards and rejects the ARQ U_PDUs for that peer, reports
//! it ([`net::Subnet::watch_links`]) and starts the next contact with a RESET/WIN-RESYNC.
//!
//! Annex B link making (CAS-1) when [`net::SubnetConfig::cas1`] is set: a PHYSICAL LINK
//! REQUEST, answered by ACCEPTED, in EXPEDITED NON-ARQ DATA D_PDUs before the first ARQ data to
//! a peer and again after the link was declared lost; off by default (links are taken as made,
//! as ALE or an operator makes them). With [`net::SubnetConfig::link_idle`] too, the node whose
//! request made a link breaks it once it has idled that long (PHYSICAL LINK BREAK, BREAK
//! CONFIRM), and the next data makes it again. With [`net::SubnetConfig::max_links`] too, a
//! node holds at most that many links: it answers a request beyond them with PHYSICAL LINK
//! REJECTED (the caller keeps its data and asks again later) and breaks an idle link of its
//! own for a peer that waits. With [`net::SubnetConfig::link_first_data`], a called node
//! aborts a new link that carries no DATA in time. A node answers ARQ data on a link it has
//! not made with a WARNING ("not connected"), and the peer makes the link and sends the data
//! again; ARQ data from a peer whose ACCEPTED was lost makes the link.
//!
//! Hard-link sessions (Annex A): a client's S_HARD_LINK_ESTABLISH of type 0, 1 or 2 is agreed
//! between the two nodes with the hard-link S_PDUs on the expedited ARQ (the called type 2
//! client asked with S_HARD_LINK_INDICATION), judged by rank and priority against the link a
//! node may already hold (at most one), and while it is up each node sends only to the other
//! (type 2: only the two clients' data); terminated by its client, pre-empted, or ended with
//! its lost link (`node::hard`).
//!
//! With CAS-1 the physical link under a hard link is exclusive (Annex B): other nodes' requests
//! are rejected ("supporting exclusive link") and both nodes break their other links until it
//! ends.
//!
//! Not here: REJECTED "broadcast-only node" (no node is), a BREAK for link loss ("lost" above is the node's own verdict), the
//! transmit-window reset request (above), the second way Annex C offers to skip a
//! dropped C_PDU (a RESET/WIN-RESYNC instead of DROP frames). Non-ARQ delivery "with errors"
//! is built (`node`): to a client bound with transmission mode 3, a non-ARQ U_PDU damaged or
//! incomplete when its reception window closes is delivered with its blocks listed.

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
pub mod survey;
