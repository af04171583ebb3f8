//! The emulated STANAG 5066 link the HF-native scenarios run over, and the plumbing they share:
//! a two-node [`Subnet`] (ship = node 0, shore = node 1) built from a [`Condition`], real SIS
//! clients bound on in-process connections, an outbox per client that respects the node's flow
//! control, the watch on the link's loss, the paused tokio runtime each run gets, and the
//! counters a [`RunResult`] takes.
//!
//! The U_PDUs carry no TTL (TTL 0: the nodes' default maximum TTL, none unless the condition
//! sets one, [`Condition::default_ttl`]). Where nothing gets through, the emulated node gives up
//! on its link ([`skywave_emu::net::SubnetConfig::link_retries`], left at its default) and
//! discards the U_PDUs it held for the peer. The HMTP scenario's session then fails, and the
//! ship tries again after its spool's backoff, as a gateway does, going on from where the
//! shore's node had it (its outbox counts what that node confirmed); the TCP scenarios go on as a
//! real TCP would; CFTP resends by its own timer. A run stops when its stack gives up or at
//! [`time_limit`].
//!
//! Sits between the scenario runners ([`crate::hmtp5066`], [`crate::cftp5066`]) and the emulator
//! crate: nothing here knows about mail.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use skywave_emu::channel::ChannelConfig;
use skywave_emu::modem::{DataRate, Generation, Interleaver, ModemConfig};
use skywave_emu::net::{Counters, LinkEvent, NodeLinkEvent, Subnet, SubnetConfig};
use skywave_sis::client::{ConfirmedPrefix, Delivery, Events, SendError};
use skywave_sis::{
    Client, ClientConfig, Confirmation, NodeAddress, Priority, SapId, ServiceType, Ttl,
    UnidataRequest,
};
use tokio::sync::mpsc;

use crate::model::{Condition, RunResult, Workload};
use crate::runner::BenchError;
use crate::workload::total_bytes;

/// STANAG 5066 address of the ship (node 0, the sending side): 1.2.3.4.
pub const SHIP: u32 = 0x0102_0304;
/// STANAG 5066 address of the shore (node 1, the receiving side): 1.5.6.7.
pub const SHORE: u32 = 0x0105_0607;

/// Node index of the ship in the subnetwork.
pub(crate) const SHIP_NODE: usize = 0;
/// Node index of the shore in the subnetwork.
pub(crate) const SHORE_NODE: usize = 1;

/// Priority of every U_PDU the benchmark sends (routine traffic).
const PRIORITY: u8 = 5;

/// U_PDUs the IP client Isode measured through (NC3A's, Annex F.12) held while its node had
/// flow off; it dropped the rest ("datagrams the IP client could not hand to a flow-controlled
/// 5066 server were dropped", `calibration/isode-ip-over-5066.csv`). The UDP flood and the
/// `isode-stock` TCP profile run through it.
pub const IP_CLIENT_HOLD: usize = 1;

/// Parses an interleaver name as the emulator CLI and [`Condition::interleaver`] spell it:
/// `zero`, `short`, `long` (110A and 110B), and the 110B-only `ultra-short`, `very-short`,
/// `medium`, `very-long`.
pub fn parse_interleaver(name: &str) -> Option<Interleaver> {
    match name.trim().to_ascii_lowercase().replace('_', "-").as_str() {
        "zero" | "z" => Some(Interleaver::Zero),
        "ultra-short" | "us" => Some(Interleaver::UltraShort),
        "very-short" | "vs" => Some(Interleaver::VeryShort),
        "short" | "s" => Some(Interleaver::Short),
        "medium" | "m" => Some(Interleaver::Medium),
        "long" | "l" => Some(Interleaver::Long),
        "very-long" | "vl" => Some(Interleaver::VeryLong),
        _ => None,
    }
}

/// The modem of a condition (rate and interleaver, the emulator's default timings), of the
/// condition's generation or else the RM6 one.
pub fn modem_config(cond: &Condition) -> Result<ModemConfig, BenchError> {
    modem_config_for(cond, Generation::Rm6)
}

/// The modem of a condition whose scenario uses `default` when the condition names no
/// generation (and the RM6 modem where `default` has no such rate: 110A stops at 2400 bit/s).
pub fn modem_config_for(cond: &Condition, default: Generation) -> Result<ModemConfig, BenchError> {
    let modem = base_modem(cond)?;
    let generation = cond.modem.unwrap_or(if default.supports(modem.rate) {
        default
    } else {
        Generation::Rm6
    });
    modem
        .with_generation(generation)
        .map_err(|e| BenchError::Condition(e.to_string()))
}

fn base_modem(cond: &Condition) -> Result<ModemConfig, BenchError> {
    let rate = DataRate::from_bps(cond.rate_bps).ok_or_else(|| {
        BenchError::Condition(format!(
            "{} bit/s is not a MIL-STD-188-110A/B data rate (75, 150, 300, 600, 1200, 2400, 3200, 4800, 6400, 8000, 9600)",
            cond.rate_bps
        ))
    })?;
    let interleaver = parse_interleaver(&cond.interleaver).ok_or_else(|| {
        BenchError::Condition(format!(
            "unknown interleaver {:?} (zero, ultra-short, very-short, short, medium, long, very-long)",
            cond.interleaver
        ))
    })?;
    let modem =
        ModemConfig::new(rate, interleaver).map_err(|e| BenchError::Condition(e.to_string()))?;
    match cond.turnaround {
        Some(t) => modem
            .with_turnaround(t)
            .map_err(|e| BenchError::Condition(e.to_string())),
        None => Ok(modem),
    }
}

/// The channel of a condition: `awgn`, or a Watterson profile named in
/// `calibration/channel-profiles.csv`, with the condition's drift and impairments.
pub fn channel_config(cond: &Condition) -> Result<ChannelConfig, BenchError> {
    if !cond.snr_db.is_finite() {
        return Err(BenchError::Condition(format!(
            "SNR {} dB is not a number",
            cond.snr_db
        )));
    }
    let mut channel = if cond.channel.trim().eq_ignore_ascii_case("awgn") {
        ChannelConfig::awgn(cond.snr_db)
    } else {
        ChannelConfig::watterson(cond.snr_db, cond.channel.trim())
            .map_err(|e| BenchError::Condition(format!("channel {:?}: {e}", cond.channel)))?
    };
    channel.drift = cond.changes.drift;
    channel.impairments = cond.changes.impairments.clone();
    Ok(channel)
}

/// The two-node subnetwork of a condition, with the emulator's defaults (window 128, MTU 2048,
/// 127.5 s longest transmission) and the condition's seed and segment size.
pub fn subnet_config(cond: &Condition) -> Result<SubnetConfig, BenchError> {
    let mut cfg = SubnetConfig::new(
        vec![address(SHIP)?, address(SHORE)?],
        modem_config(cond)?,
        channel_config(cond)?,
    );
    cfg.seed = cond.seed;
    cfg.segment_size = cond.segment_size;
    cfg.cas1 = cond.cas1;
    cfg.link_idle = cond.link_idle;
    cfg.default_ttl = cond.default_ttl;
    Ok(cfg)
}

/// The longest TTL an S_UNIDATA_REQUEST can ask for (20 bits of 2-second units).
pub const MAX_TTL: Duration = Duration::from_secs(Ttl::MAX_UNITS as u64 * 2);

/// The TTL the IP client asks for under `cond` ([`Condition::ip_ttl`]; TTL 0, the nodes'
/// default, without one), rounded up to whole 2-second units.
pub fn ip_ttl(cond: &Condition) -> Result<Ttl, BenchError> {
    let Some(t) = cond.ip_ttl else {
        return Ok(Ttl::INFINITE);
    };
    if t.is_zero() || t > MAX_TTL {
        return Err(BenchError::Condition(format!(
            "IP client TTL {:.1} s is outside 0 (exclusive) to {} s",
            t.as_secs_f64(),
            MAX_TTL.as_secs()
        )));
    }
    let secs = u32::try_from(t.as_secs() + u64::from(t.subsec_nanos() > 0)).unwrap_or(u32::MAX);
    Ttl::from_secs(secs).map_err(|e| BenchError::Condition(format!("IP client TTL: {e}")))
}

fn address(bits: u32) -> Result<NodeAddress, BenchError> {
    NodeAddress::new(bits).map_err(|e| BenchError::Condition(format!("node address: {e}")))
}

/// Tells a scenario when a node of its subnetwork declared the link lost: from then on the
/// session's U_PDUs that were in the ARQ are gone (the HMTP scenario ends its session there and
/// retries later).
pub(crate) struct LinkWatch {
    rx: mpsc::UnboundedReceiver<NodeLinkEvent>,
}

impl LinkWatch {
    /// Watches `subnet` from now on.
    pub(crate) fn new(subnet: &Subnet) -> Self {
        Self {
            rx: subnet.watch_links(),
        }
    }

    /// Resolves at the next link loss (never, once the subnetwork is gone). Cancel-safe: a
    /// `select!` may drop it and call again.
    pub(crate) async fn lost(&mut self) -> NodeLinkEvent {
        loop {
            match self.rx.recv().await {
                Some(ev) if matches!(ev.event, LinkEvent::Lost { .. }) => return ev,
                Some(_) => {}
                None => std::future::pending::<()>().await,
            }
        }
    }
}

/// Simulated time after which a run stops and reports what it delivered so far: an hour plus
/// twenty times the workload's bare airtime at the condition's rate. A run that reaches it on a
/// poor channel is a result (fewer messages delivered), not an error.
pub fn time_limit(cond: &Condition, work: &Workload) -> Duration {
    let bits = total_bytes(work) as f64 * 8.0;
    let airtime = bits / f64::from(cond.rate_bps.max(1));
    Duration::from_secs(3600) + Duration::from_secs_f64((airtime * 20.0).min(1.0e7))
}

/// A current-thread tokio runtime with the clock paused: every run gets its own, so runs are
/// independent, and simulated hours pass in milliseconds.
pub(crate) fn block_on_paused<F: Future>(f: F) -> Result<F::Output, BenchError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .map_err(BenchError::Runtime)?;
    Ok(rt.block_on(f))
}

/// The std clock reading that follows tokio's (paused) clock, for the sans-IO sessions.
pub(crate) fn std_now() -> std::time::Instant {
    tokio::time::Instant::now().into_std()
}

/// Connects a real SIS client to node `node` over an in-process pipe and binds `sap` (ARQ, no
/// confirmation requested): the client, its events and the MTU the node granted.
pub(crate) async fn bind(
    subnet: &Subnet,
    node: usize,
    sap: SapId,
) -> Result<(Client, Events, usize), BenchError> {
    bind_with(subnet, node, ClientConfig::new(sap, ServiceType::ARQ)).await
}

/// [`bind`] with the client's whole configuration (its SAP, service, queue and filter).
pub(crate) async fn bind_with(
    subnet: &Subnet,
    node: usize,
    cfg: ClientConfig,
) -> Result<(Client, Events, usize), BenchError> {
    let s = subnet.clone();
    let connector = move || {
        let s = s.clone();
        async move { Ok::<_, std::io::Error>(s.connect_in_process(node)) }
    };
    let sap = cfg.sap;
    let (client, bound, events) = Client::connect(connector, cfg)
        .await
        .map_err(|e| BenchError::Sis(format!("binding SAP {} on node {node}: {e}", sap.get())))?;
    Ok((client, events, usize::from(bound.mtu)))
}

/// U_PDUs an [`Outbox`] keeps submitted and unconfirmed at once: enough for any burst the ARQ
/// can put in one transmission (128 frames of at most 1023 bytes is 64 U_PDUs of 2048), well
/// under the SIS client's own queue limit (1024).
const IN_FLIGHT: usize = 256;

/// Hands U_PDUs to one SIS client in order, as the gateway's SIS bearer does: all at once, up
/// to [`IN_FLIGHT`] unconfirmed (the client queues them while the node has flow off). A longer
/// submission waits for the oldest confirmation, so the client's queue never overflows, and a
/// session longer than one U_PDU still fills its first transmission. (Waiting for each U_PDU's
/// confirmation before the next, as this once did, cost a whole ARQ round trip per U_PDU.)
///
/// U_PDUs belong to a submission ([`Outbox::next_submission`]): those of one that was given up
/// and that the outbox still holds are dropped, as the node discards what it held of a session
/// when it gives the link up. An outbox that asks for node delivery confirmation
/// ([`Outbox::confirming`]) counts the U_PDUs of the submission in progress that the peer's
/// node confirmed, in order from the first ([`Outbox::confirmed`]), as the gateway's SIS bearer
/// does for `XRESUME`.
#[derive(Debug, Clone)]
pub(crate) struct Outbox {
    tx: mpsc::UnboundedSender<(u64, Vec<u8>)>,
    error: Arc<Mutex<Option<String>>>,
    tally: Arc<Mutex<Tally>>,
}

/// What the peer's node confirmed of an outbox's submission in progress.
#[derive(Debug, Default)]
struct Tally {
    /// The submission in progress.
    submission: u64,
    /// Its U_PDUs the peer's node confirmed, in order from the first.
    confirmed: ConfirmedPrefix,
}

impl Tally {
    /// Counts how one U_PDU of `submission` ended (one of an earlier submission counts for
    /// nothing); `Err` for what ends the run.
    fn settle(
        &mut self,
        submission: u64,
        r: Result<Delivery, SendError>,
        confirming: bool,
    ) -> Result<(), String> {
        let current = submission == self.submission;
        match r {
            Ok(d) if current => self.confirmed.record(&d),
            Ok(_) => {}
            // With confirmations asked, the node's rejection is how a link loss (or a TTL) ends
            // the submission: the scenario sees the loss itself and goes on.
            Err(SendError::Rejected(_)) if confirming => {
                if current {
                    self.confirmed.stop();
                }
            }
            Err(e) => return Err(e.to_string()),
        }
        Ok(())
    }
}

impl Outbox {
    /// An outbox sending from `client` to node `dest`, SAP `sap`, in the bind's service (no
    /// confirmation asked).
    pub(crate) fn new(client: Client, dest: u32, sap: SapId) -> Result<Self, BenchError> {
        Self::start(client, dest, sap, ServiceType::DEFAULT)
    }

    /// An outbox that asks for node delivery confirmation of every U_PDU (ARQ, in order: Annex
    /// F's service for HMTP, and the gateway's), so that [`Outbox::confirmed`] counts.
    pub(crate) fn confirming(client: Client, dest: u32, sap: SapId) -> Result<Self, BenchError> {
        Self::start(client, dest, sap, ServiceType::ARQ_NODE_CONFIRM)
    }

    fn start(client: Client, dest: u32, sap: SapId, mode: ServiceType) -> Result<Self, BenchError> {
        let dest = address(dest)?;
        let priority =
            Priority::new(PRIORITY).map_err(|e| BenchError::Condition(format!("priority: {e}")))?;
        let confirming = mode.confirmation != Confirmation::None;
        let (tx, mut rx) = mpsc::unbounded_channel::<(u64, Vec<u8>)>();
        let error = Arc::new(Mutex::new(None));
        let tally = Arc::new(Mutex::new(Tally::default()));
        let err = Arc::clone(&error);
        let counts = Arc::clone(&tally);
        tokio::spawn(async move {
            let fail = |e: String| {
                let mut slot = err.lock().unwrap_or_else(|p| p.into_inner());
                slot.get_or_insert(format!("SIS submission failed: {e}"));
            };
            let settle = |(submission, r): (u64, Result<Delivery, SendError>)| {
                let mut t = counts.lock().unwrap_or_else(|p| p.into_inner());
                if let Err(e) = t.settle(submission, r, confirming) {
                    fail(e);
                }
            };
            let current = || counts.lock().unwrap_or_else(|p| p.into_inner()).submission;
            let mut pending = std::collections::VecDeque::new();
            loop {
                // Take the next U_PDU, or the oldest confirmation when the window is full or
                // nothing is waiting.
                let next = if pending.len() >= IN_FLIGHT {
                    None
                } else if pending.is_empty() {
                    match rx.recv().await {
                        Some(u) => Some(u),
                        None => break,
                    }
                } else {
                    match rx.try_recv() {
                        Ok(u) => Some(u),
                        Err(mpsc::error::TryRecvError::Disconnected) => break,
                        Err(mpsc::error::TryRecvError::Empty) => {
                            tokio::select! {
                                // A fixed order keeps runs repeatable (select! otherwise polls at random).
                                biased;
                                u = rx.recv() => match u {
                                    Some(u) => Some(u),
                                    None => break,
                                },
                                r = wait_oldest(&mut pending) => {
                                    if let Some(r) = r {
                                        settle(r);
                                    }
                                    continue;
                                }
                            }
                        }
                    }
                };
                let Some((submission, updu)) = next else {
                    if let Some(r) = wait_oldest(&mut pending).await {
                        settle(r);
                    }
                    continue;
                };
                if submission != current() {
                    // Its submission was given up before it reached the node.
                    continue;
                }
                let req = UnidataRequest {
                    priority,
                    dest_sap: sap,
                    dest,
                    mode,
                    ttl: Ttl::INFINITE,
                    updu: Bytes::from(updu),
                };
                match client.send_unidata(req) {
                    Ok(p) => pending.push_back((submission, p)),
                    Err(e) => fail(e.to_string()),
                }
            }
            while let Some(r) = wait_oldest(&mut pending).await {
                settle(r);
            }
        });
        Ok(Self { tx, error, tally })
    }

    fn tally(&self) -> std::sync::MutexGuard<'_, Tally> {
        self.tally.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues one U_PDU, of the submission in progress.
    pub(crate) fn send(&self, updu: Vec<u8>) -> Result<(), BenchError> {
        let submission = self.tally().submission;
        self.tx
            .send((submission, updu))
            .map_err(|_| BenchError::Sis("the outbox task ended".into()))
    }

    /// Ends the submission in progress (what the outbox still holds of it is dropped) and starts
    /// the next, with nothing confirmed.
    pub(crate) fn next_submission(&self) {
        let mut t = self.tally();
        *t = Tally {
            submission: t.submission + 1,
            ..Tally::default()
        };
    }

    /// The U_PDUs of the submission in progress that the peer's node confirmed, in order from
    /// the first (always 0 unless [`Outbox::confirming`]).
    pub(crate) fn confirmed(&self) -> usize {
        self.tally().confirmed.count()
    }

    /// The first submission error, if any.
    pub(crate) fn error(&self) -> Option<String> {
        self.error.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// Waits for the oldest unconfirmed U_PDU's confirmation (or rejection): its submission and how
/// it ended; `None` when nothing is pending.
async fn wait_oldest(
    pending: &mut std::collections::VecDeque<(u64, skywave_sis::client::Pending)>,
) -> Option<(u64, Result<Delivery, SendError>)> {
    let (submission, p) = pending.front_mut()?;
    let submission = *submission;
    let r = p.await;
    pending.pop_front();
    Some((submission, r))
}

/// Waits (in simulated time) until the channel has been quiet for a minute, so that the
/// counters include the exchange's trailing acknowledgements; bounded to an hour.
pub(crate) async fn settle(subnet: &Subnet) -> Counters {
    let mut before = subnet.counters();
    for _ in 0..60 {
        tokio::time::sleep(Duration::from_secs(60)).await;
        let now = subnet.counters();
        if now.transmissions == before.transmissions && now.busy_until <= subnet.now() {
            return now;
        }
        before = now;
    }
    before
}

/// Copies the channel counters into a result.
pub(crate) fn fill_counters(result: &mut RunResult, c: &Counters) {
    result.transmissions = c.transmissions;
    result.bytes_on_air = c.bytes_on_air;
    result.retransmissions = c.retransmissions;
}

/// Seconds and throughput of a run, computed as the workload's measure says.
///
/// - Isode: from submission to the delivery of the last message; throughput is the delivered
///   messages' bits over that time.
/// - NTIA: the whole exchange (`session`: submission to the sender knowing every outcome, the
///   analogue of first SYN to last ACK); throughput is the delivered attachments' bits over it.
pub(crate) fn measure(
    work: &Workload,
    deliveries: &[Option<Duration>],
    session: Duration,
) -> (f64, f64) {
    use crate::model::Measure;
    let delivered: Vec<(usize, Duration)> = deliveries
        .iter()
        .enumerate()
        .filter_map(|(i, d)| d.map(|d| (i, d)))
        .collect();
    match work.measure {
        Measure::IsodeMessage => {
            let all = delivered.len() == work.messages.len();
            let seconds = if all {
                delivered
                    .iter()
                    .map(|(_, d)| *d)
                    .max()
                    .unwrap_or(session)
                    .as_secs_f64()
            } else {
                session.as_secs_f64()
            };
            let bits: f64 = delivered
                .iter()
                .filter_map(|(i, _)| work.messages.get(*i))
                .map(|m| m.body.len() as f64 * 8.0)
                .sum();
            (seconds, rate(bits, seconds))
        }
        Measure::NtiaAttachment { attachment_bytes } => {
            let seconds = session.as_secs_f64();
            let bits = (attachment_bytes * delivered.len()) as f64 * 8.0;
            (seconds, rate(bits, seconds))
        }
    }
}

fn rate(bits: f64, seconds: f64) -> f64 {
    // An empty float sum is -0.0: nothing delivered is plain 0.
    if seconds > 0.0 && bits > 0.0 {
        bits / seconds
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Measure, Message};
    use skywave_sis::{UnidataConfirm, UnidataRejectReason, UnidataRejected};

    fn cond(channel: &str, rate: u32, il: &str) -> Condition {
        Condition {
            channel: channel.into(),
            snr_db: 20.0,
            rate_bps: rate,
            interleaver: il.into(),
            seed: 3,
            segment_size: crate::sweep::DEFAULT_SEGMENT,
            modem: None,
            turnaround: None,
            cas1: false,
            link_idle: None,
            default_ttl: None,
            ip_ttl: None,
            changes: Default::default(),
        }
    }

    #[test]
    fn conditions_map_to_the_emulator() {
        let c = subnet_config(&cond("awgn", 1200, "short")).unwrap();
        assert_eq!(c.seed, 3);
        assert_eq!(c.modem.rate, DataRate::Bps1200);
        assert_eq!(c.modem.interleaver, Interleaver::Short);
        assert_eq!(c.segment_size, 1023);
        let mut small = cond("awgn", 1200, "short");
        small.segment_size = 200;
        assert_eq!(subnet_config(&small).unwrap().segment_size, 200);
        assert!(subnet_config(&cond("good", 2400, "long")).is_ok());
        assert!(subnet_config(&cond("poor", 9600, "very-long")).is_ok());
        for bad in [
            cond("awgn", 1300, "short"),
            cond("awgn", 1200, "medium"),
            cond("awgn", 1200, "sideways"),
            cond("no-such-channel", 1200, "short"),
        ] {
            let e = subnet_config(&bad).unwrap_err();
            assert!(matches!(e, BenchError::Condition(_)), "{e}");
        }
        let mut nan = cond("awgn", 1200, "short");
        nan.snr_db = f64::NAN;
        assert!(subnet_config(&nan).is_err());
        // The turnaround is the modem's switching time, for the 5066 subnetwork and the raw
        // modem alike; longer than a transmission may last is refused.
        assert_eq!(
            subnet_config(&cond("awgn", 1200, "short"))
                .unwrap()
                .modem
                .switching_time,
            Duration::from_millis(150)
        );
        let mut slow = cond("awgn", 1200, "short");
        slow.turnaround = Some(Duration::from_secs(5));
        assert_eq!(
            subnet_config(&slow).unwrap().modem.switching_time,
            Duration::from_secs(5)
        );
        let raw = modem_config_for(&slow, skywave_emu::modem::Generation::Mil110aMinimum).unwrap();
        assert_eq!(raw.switching_time, Duration::from_secs(5));
        slow.turnaround = Some(Duration::from_secs(128));
        let e = subnet_config(&slow).unwrap_err();
        assert!(e.to_string().contains("turnaround 128.0 s"), "{e}");
    }

    #[test]
    fn measures_follow_the_publications() {
        let m = |n| Message {
            from: "a@b".into(),
            to: vec!["c@d".into()],
            body: vec![b'x'; n],
        };
        let isode = Workload {
            messages: vec![m(100), m(300)],
            measure: Measure::IsodeMessage,
            nominal_bytes: 100,
        };
        let d = [Some(Duration::from_secs(4)), Some(Duration::from_secs(8))];
        let (s, t) = measure(&isode, &d, Duration::from_secs(10));
        assert_eq!(s, 8.0);
        assert_eq!(t, 400.0 * 8.0 / 8.0);
        // Not all delivered: the whole run's time, the delivered bits.
        let (s, t) = measure(&isode, &[None, d[1]], Duration::from_secs(10));
        assert_eq!((s, t), (10.0, 300.0 * 8.0 / 10.0));
        let ntia = Workload {
            measure: Measure::NtiaAttachment {
                attachment_bytes: 50,
            },
            ..isode
        };
        let (s, t) = measure(&ntia, &d, Duration::from_secs(10));
        assert_eq!((s, t), (10.0, 100.0 * 8.0 / 10.0));
        assert_eq!(measure(&ntia, &[None, None], Duration::ZERO), (0.0, 0.0));
    }

    #[test]
    fn interleaver_names() {
        assert_eq!(parse_interleaver("Very_Long"), Some(Interleaver::VeryLong));
        assert_eq!(parse_interleaver(" zero "), Some(Interleaver::Zero));
        assert_eq!(parse_interleaver("x"), None);
    }

    fn confirmed() -> Result<Delivery, SendError> {
        Ok(Delivery::Confirmed(UnidataConfirm {
            dest_sap: SapId::HMTP,
            dest: NodeAddress::new(SHORE).unwrap(),
            updu_part: Bytes::new(),
        }))
    }

    fn rejected() -> Result<Delivery, SendError> {
        Err(SendError::Rejected(UnidataRejected {
            reason: UnidataRejectReason::DestinationNodeNotResponding,
            dest_sap: SapId::HMTP,
            dest: NodeAddress::new(SHORE).unwrap(),
            updu_part: Bytes::new(),
        }))
    }

    #[test]
    fn a_tally_counts_confirmations_in_order_from_the_first() {
        let mut t = Tally::default();
        for _ in 0..3 {
            t.settle(0, confirmed(), true).unwrap();
        }
        assert_eq!(t.confirmed.count(), 3);
        // The node gave the link up: the rest are rejected, and a confirmation after a gap
        // (none comes, but a count must not skip one) does not count.
        t.settle(0, rejected(), true).unwrap();
        t.settle(0, confirmed(), true).unwrap();
        assert_eq!(t.confirmed.count(), 3);
        // A U_PDU written without a confirmation says nothing either.
        let mut t = Tally::default();
        t.settle(0, Ok(Delivery::Sent), true).unwrap();
        t.settle(0, confirmed(), true).unwrap();
        assert_eq!(t.confirmed.count(), 0);
    }

    #[test]
    fn a_tally_counts_only_the_submission_in_progress() {
        let mut t = Tally {
            submission: 2,
            ..Tally::default()
        };
        t.settle(1, confirmed(), true).unwrap();
        t.settle(1, rejected(), true).unwrap();
        assert_eq!((t.confirmed.count(), t.confirmed.unbroken()), (0, true));
        t.settle(2, confirmed(), true).unwrap();
        assert_eq!(t.confirmed.count(), 1);
    }

    #[test]
    fn a_rejection_ends_the_run_only_where_no_confirmation_was_asked() {
        let mut t = Tally::default();
        assert!(t.settle(0, rejected(), true).is_ok());
        assert!(t.settle(0, rejected(), false).is_err());
        assert!(t.settle(0, Err(SendError::Closed), true).is_err());
    }
}
