//! The fleet benchmark: one base and N ships on one emulated HF frequency, HMTP unicast to each
//! ship against ACP 142 P_MUL multicast over 5066, and beside them P_MUL over an emulated IP
//! network (a satellite or line-of-sight link: [`skywave_emu::ipnet`]), in virtual time.
//!
//! Every run is the production gateway code ([`skywave_gateway::fleet::Fleet`]: spools, routing
//! tables, link schedulers, Maildir delivery) over the bundled emulator, each ship hearing the
//! channel at its own SNR ([`ship_snr`]). A run submits its workload to the base at once (for
//! `reports` every ship its report to the base instead, for `exchange` both; the ships keeping
//! time slots or not, [`FleetSpec::slot_minutes`], with a slot of the base's own for its
//! multicast when it has mail) and reports when every ship has its mail (the base every
//! report), when the base has every acknowledgement (the ships theirs), the airtime of every transmission on the channel (from the emulator's trace), the
//! transmissions and the bytes on the air. The gateways run on a fixed simulation calendar and
//! queue-id salt, so `all` and `one` runs repeat exactly for a seed; `mixed` runs, whose messages
//! reach the base one after another while its file I/O runs on real threads, can batch them
//! differently from run to run.

use std::time::Duration;

use skywave_emu::ipnet::IpNetConfig;
use skywave_gateway::fleet::{Fleet, FleetOptions, ship_domain};

use crate::runner::BenchError;

/// Which mail the base sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FleetWorkload {
    /// One message with a recipient on every ship.
    All,
    /// One message for the first ship only.
    One,
    /// One message for every ship, and one more for each ship alone.
    Mixed,
    /// The other way: every ship sends the base one message at once (noon reports), so the
    /// ships contend for the one frequency unless they keep time slots
    /// ([`FleetSpec::slot_minutes`]).
    Reports,
    /// Both at once: the base's message for every ship (`all`) and every ship's report, as at
    /// noon when orders go out and reports come in; in time slots the base's multicast keeps a
    /// slot of its own, the first of each cycle (its group's schedule).
    Exchange,
}

impl FleetWorkload {
    /// Its name on the command line and in tables.
    pub fn name(self) -> &'static str {
        match self {
            FleetWorkload::All => "all",
            FleetWorkload::One => "one",
            FleetWorkload::Mixed => "mixed",
            FleetWorkload::Reports => "reports",
            FleetWorkload::Exchange => "exchange",
        }
    }

    /// By name.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "all" => Some(FleetWorkload::All),
            "one" => Some(FleetWorkload::One),
            "mixed" => Some(FleetWorkload::Mixed),
            "reports" => Some(FleetWorkload::Reports),
            "exchange" => Some(FleetWorkload::Exchange),
            _ => None,
        }
    }

    /// Whether every ship sends the base a report.
    fn reports(self) -> bool {
        matches!(self, FleetWorkload::Reports | FleetWorkload::Exchange)
    }

    /// The base's messages, each as the indices of the ships it has a recipient on.
    fn messages(self, ships: usize) -> Vec<Vec<usize>> {
        match self {
            FleetWorkload::Reports => Vec::new(),
            FleetWorkload::All | FleetWorkload::Exchange => vec![(0..ships).collect()],
            FleetWorkload::One => vec![vec![0]],
            FleetWorkload::Mixed => {
                let mut v = vec![(0..ships).collect::<Vec<_>>()];
                v.extend((0..ships).map(|i| vec![i]));
                v
            }
        }
    }
}

/// One fleet run.
#[derive(Debug, Clone, PartialEq)]
pub struct FleetSpec {
    /// Ships.
    pub ships: usize,
    /// The mail.
    pub workload: FleetWorkload,
    /// P_MUL multicast through the group (false: HMTP to each ship).
    pub multicast: bool,
    /// The last this many ships keep EMCON (multicast only); their EMCON is lifted once every
    /// ship, they too, has its mail.
    pub emcon: usize,
    /// Size of each message, bytes (a corpus message of about this size).
    pub size: usize,
    /// Modem rate, bit/s.
    pub rate_bps: u32,
    /// SNR of the best ship, dB (see [`ship_snr`]).
    pub snr_db: f64,
    /// Seed.
    pub seed: u64,
    /// Multicast over this emulated IP network instead of HF (with `multicast`).
    pub ip: Option<IpNetConfig>,
    /// Every station's turnaround; `None`: the emulator's default (150 ms).
    pub turnaround: Option<Duration>,
    /// CAS-1 link making before the first ARQ data (HMTP to each ship; P_MUL needs no link).
    pub cas1: bool,
    /// With `cas1`: links idle this long are broken, and made again for the next data
    /// ([`skywave_emu::net::SubnetConfig::link_idle`]).
    pub link_idle: Option<Duration>,
    /// With `cas1` and `link_idle`: the most links each node holds at once
    /// ([`skywave_emu::net::SubnetConfig::max_links`]).
    pub max_links: Option<usize>,
    /// (ship index, impairment): outages, fades and block losses of what that ship hears
    /// (`fleet --outage SHIP@START+LENGTH`).
    pub ship_impairments: Vec<(usize, skywave_emu::channel::ScheduledImpairment)>,
    /// Time slots of this many minutes: each ship's sessions with the base start only in its
    /// slot, a `schedule` in both routing tables
    /// ([`skywave_gateway::fleet::FleetOptions::slot_minutes`]); `None`: any time.
    pub slot_minutes: Option<u32>,
}

/// Ship `i`'s SNR when the best hears `best` dB: ships in four rings 3 dB apart, as ships at
/// different ranges from the base are.
pub fn ship_snr(best: f64, i: usize) -> f64 {
    best - 3.0 * (i % 4) as f64
}

/// What a run measured.
#[derive(Debug, Clone, PartialEq)]
pub struct FleetResult {
    /// Messages every ship should have had, and had, at the end.
    pub expected: usize,
    /// Delivered.
    pub delivered: usize,
    /// Seconds from submission until every ship had its mail (`None`: not within the limit).
    pub all_delivered_s: Option<f64>,
    /// Seconds until the base had every acknowledgement (its spool empty).
    pub done_s: Option<f64>,
    /// Seconds of transmission on the channel, every node.
    pub airtime_s: f64,
    /// Seconds of transmission by the base.
    pub base_airtime_s: f64,
    /// Transmissions, every node.
    pub transmissions: u64,
    /// D_PDU bytes on the air, every node.
    pub bytes_on_air: u64,
    /// Transmissions lost to a collision
    /// ([`skywave_emu::net::Counters::collided_transmissions`]).
    pub collided: u64,
    /// Datagrams on the IP network (IP bearer only).
    pub ip_datagrams: u64,
    /// Bytes on the IP network, IP and UDP headers included (IP bearer only).
    pub ip_bytes: u64,
}

/// Longest run, simulated.
const LIMIT: Duration = Duration::from_secs(6 * 3600);

/// Runs one fleet spec in a paused-clock runtime.
pub fn run_fleet(spec: &FleetSpec) -> Result<FleetResult, BenchError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .enable_io()
        .start_paused(true)
        .build()
        .map_err(BenchError::Runtime)?;
    rt.block_on(run(spec))
}

async fn run(spec: &FleetSpec) -> Result<FleetResult, BenchError> {
    let dir = tempfile::tempdir().map_err(BenchError::Runtime)?;
    let mut o = FleetOptions::new(dir.path().to_path_buf(), spec.ships);
    o.base_smtp = "127.0.0.1:0"
        .parse()
        .map_err(|_| BenchError::Fleet("address".into()))?;
    o.ship_smtp_port = 0;
    o.rate_bps = spec.rate_bps;
    o.channel = "awgn".into();
    o.snr_db = spec.snr_db;
    o.ship_snr_db = (0..spec.ships)
        .map(|i| (i, ship_snr(spec.snr_db, i)))
        .collect();
    o.seed = spec.seed;
    o.multicast = spec.multicast;
    o.emcon = (spec.ships.saturating_sub(spec.emcon)..spec.ships).collect();
    o.min_backoff = 60;
    o.ip = spec.ip.clone();
    if let Some(t) = spec.turnaround {
        o.turnaround = t;
    }
    o.cas1 = spec.cas1;
    o.link_idle = spec.link_idle;
    o.max_links = spec.max_links;
    o.ship_impairments = spec.ship_impairments.clone();
    o.slot_minutes = spec.slot_minutes;
    let messages = spec.workload.messages(spec.ships);
    // In slots, the base's multicast over HF keeps a slot of its own.
    o.base_slot =
        spec.slot_minutes.is_some() && spec.multicast && spec.ip.is_none() && !messages.is_empty();
    let fleet = Fleet::start(&o)
        .await
        .map_err(|e| BenchError::Fleet(e.to_string()))?;
    let mut expected = vec![0usize; spec.ships];
    for (n, ships) in messages.iter().enumerate() {
        let rcpts: Vec<String> = ships
            .iter()
            .map(|&i| format!("captain@{}", ship_domain(i)))
            .collect();
        for &i in ships {
            expected[i] += 1;
        }
        let body = message(spec, n, &rcpts);
        let refs: Vec<&str> = rcpts.iter().map(String::as_str).collect();
        fleet
            .base
            .submit("hq@base.example", &refs, &body)
            .await
            .map_err(|r| BenchError::Fleet(format!("the base refused the mail: {r}")))?;
    }
    let reports = if spec.workload.reports() {
        spec.ships
    } else {
        0
    };
    for i in 0..reports {
        let Some(ship) = fleet.ship(i) else { continue };
        let from = format!("captain@{}", ship_domain(i));
        let body = report(spec, i, &from);
        ship.submit(&from, &["hq@base.example"], &body)
            .await
            .map_err(|r| BenchError::Fleet(format!("ship {} refused its report: {r}", i + 1)))?;
    }
    let start = tokio::time::Instant::now();
    let mut all_delivered = None;
    let mut done = None;
    let mut lifted = spec.emcon == 0;
    while start.elapsed() < LIMIT {
        let all = (0..spec.ships).all(|i| count(&fleet.ship_maildirs[i]) >= expected[i])
            && count(&fleet.base_maildir) >= reports;
        if all && all_delivered.is_none() {
            all_delivered = Some(start.elapsed().as_secs_f64());
        }
        // EMCON ends once every ship, the silent ones included, has its mail.
        if !lifted && all {
            for &i in &o.emcon {
                if let Some(s) = fleet.ship(i) {
                    s.set_emcon(false);
                }
            }
            lifted = true;
        }
        // The ships' spools hold their reports.
        let queued = fleet.base.spool().entries().map_or(1, |e| e.count())
            + (0..reports)
                .filter_map(|i| fleet.ship(i))
                .map(|s| s.spool().entries().map_or(1, |e| e.count()))
                .sum::<usize>();
        if all && lifted && queued == 0 {
            done = Some(start.elapsed().as_secs_f64());
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let delivered = (0..spec.ships)
        .map(|i| count(&fleet.ship_maildirs[i]).min(expected[i]))
        .sum::<usize>()
        + count(&fleet.base_maildir).min(reports);
    measured(
        fleet,
        start,
        expected.iter().sum::<usize>() + reports,
        delivered,
        all_delivered,
        done,
        o.turnaround,
    )
    .await
}

/// What a run of `fleet` measured once its mail is delivered (or the limit passed): the
/// emulator's counters and trace, then the fleet stopped.
async fn measured(
    fleet: Fleet,
    start: tokio::time::Instant,
    expected: usize,
    delivered: usize,
    all_delivered: Option<f64>,
    done: Option<f64>,
    turnaround: Duration,
) -> Result<FleetResult, BenchError> {
    // The link's closing exchange counts too: the 5066 ACK a station owes for the last data it
    // received goes a turnaround after that data, whether or not the run's look (once a
    // second) found every spool empty before it began. Without this wait a few octets more or
    // less in a session moved that ACK in or out of the figures.
    if done.is_some() {
        tokio::time::sleep(turnaround * 2 + Duration::from_secs(3)).await;
    }
    // A transmission still on the air when the run is done counts whole: the base takes a
    // reply D_PDU as its interleaver block is decoded, so its spool can empty while the ship is
    // still keyed (its trace record is written when it unkeys). Waiting for what has started to
    // end is bounded by the longest transmission (a new one may start meanwhile and is counted
    // too).
    let settle = start.elapsed() + skywave_emu::node::MAX_TRANSMISSION;
    while fleet.subnet.trace().len()
        < usize::try_from(fleet.subnet.counters().transmissions).unwrap_or(usize::MAX)
        && start.elapsed() < settle
    {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let c = fleet.subnet.counters();
    let ip = fleet
        .ip_net
        .as_ref()
        .map(|n| n.counters())
        .unwrap_or_default();
    let trace = fleet.subnet.trace();
    let secs = |r: &skywave_emu::net::TraceRecord| (r.end - r.start).as_secs_f64();
    let result = FleetResult {
        expected,
        delivered,
        all_delivered_s: all_delivered,
        done_s: done,
        // Folded from +0.0: an empty trace (the IP bearer's) is 0 s, not the -0 `sum` gives.
        airtime_s: trace.iter().map(secs).fold(0.0, |a, b| a + b),
        base_airtime_s: trace
            .iter()
            .filter(|r| r.sender == 0)
            .map(secs)
            .fold(0.0, |a, b| a + b),
        transmissions: c.transmissions,
        bytes_on_air: c.bytes_on_air,
        collided: c.collided_transmissions(),
        ip_datagrams: ip.datagrams,
        ip_bytes: ip.bytes,
    };
    fleet.stop().await;
    Ok(result)
}

/// Ship `i`'s report: a corpus message of about `spec.size` bytes from its captain to the base.
fn report(spec: &FleetSpec, i: usize, from: &str) -> Vec<u8> {
    use skywave_compress::corpus;
    let body =
        corpus::message_of_size(0x5EA0 ^ (i as u64) ^ spec.seed, spec.size).unwrap_or_default();
    corpus::set_headers(
        &body,
        &[
            ("From", format!("<{from}>")),
            ("To", "<hq@base.example>".to_owned()),
            (
                "Message-ID",
                format!("<{i}.{}.report@{}>", spec.seed, ship_domain(i)),
            ),
        ],
    )
}

/// Message `n` of a run: a corpus message of about `spec.size` bytes (headers, MIME, as mail
/// is) with the run's addresses and a Message-ID of its own.
fn message(spec: &FleetSpec, n: usize, rcpts: &[String]) -> Vec<u8> {
    use skywave_compress::corpus;
    let body =
        corpus::message_of_size(0xF1EE7 ^ (n as u64) ^ spec.seed, spec.size).unwrap_or_default();
    corpus::set_headers(
        &body,
        &[
            ("From", "<hq@base.example>".to_owned()),
            ("To", rcpts.join(", ")),
            (
                "Message-ID",
                format!("<{n}.{}.fleet@base.example>", spec.seed),
            ),
        ],
    )
}

fn count(maildir: &std::path::Path) -> usize {
    std::fs::read_dir(maildir.join("new")).map_or(0, |d| d.count())
}

/// One row of the fleet table.
#[derive(Debug, Clone, PartialEq)]
pub struct FleetRow {
    /// What ran.
    pub spec: FleetSpec,
    /// What it measured (`Err`: why it could not run, e.g. EMCON ships by unicast).
    pub result: Result<FleetResult, String>,
}

impl FleetSpec {
    /// The scenario's name in tables: `hmtp-unicast`, `pmul-multicast` (over 5066) or
    /// `pmul-ip` (over the emulated IP network), with `, N-min slots` when the ships keep time
    /// slots.
    pub fn scenario(&self) -> String {
        let name = match (self.multicast, &self.ip) {
            (true, Some(_)) => "pmul-ip",
            (true, None) => "pmul-multicast",
            (false, _) => "hmtp-unicast",
        };
        match self.slot_minutes {
            Some(m) => format!("{name}, {m}-min slots"),
            None => name.to_owned(),
        }
    }
}

fn opt(v: Option<f64>) -> String {
    v.map_or_else(|| "-".to_owned(), |s| format!("{s:.1}"))
}

/// The rows as a Markdown table.
pub fn fleet_markdown(rows: &[FleetRow]) -> String {
    let mut s = String::from(
        "| ships | workload | scenario | EMCON ships | size B | delivered | every ship has it, s | all acked, s | airtime, s | base airtime, s | transmissions | bytes on air | lost to collisions | IP datagrams | IP bytes |\n\
         |---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for r in rows {
        let p = &r.spec;
        match &r.result {
            Ok(m) => s.push_str(&format!(
                "| {} | {} | {} | {} | {} | {}/{} | {} | {} | {:.1} | {:.1} | {} | {} | {} | {} | {} |\n",
                p.ships,
                p.workload.name(),
                p.scenario(),
                p.emcon,
                p.size,
                m.delivered,
                m.expected,
                opt(m.all_delivered_s),
                opt(m.done_s),
                m.airtime_s,
                m.base_airtime_s,
                m.transmissions,
                m.bytes_on_air,
                m.collided,
                m.ip_datagrams,
                m.ip_bytes
            )),
            Err(e) => s.push_str(&format!(
                "| {} | {} | {} | {} | {} | - | - | - | - | - | - | - | {e} | - | - |\n",
                p.ships,
                p.workload.name(),
                p.scenario(),
                p.emcon,
                p.size
            )),
        }
    }
    s
}

/// The rows as CSV.
pub fn fleet_csv(rows: &[FleetRow]) -> String {
    let mut s = String::from(
        "ships,workload,scenario,emcon_ships,size,rate_bps,best_snr_db,seed,expected,delivered,all_delivered_s,done_s,airtime_s,base_airtime_s,transmissions,bytes_on_air,lost_to_collisions,ip_datagrams,ip_bytes,error\n",
    );
    for r in rows {
        let p = &r.spec;
        let head = format!(
            "{},{},{},{},{},{},{},{}",
            p.ships,
            p.workload.name(),
            p.scenario(),
            p.emcon,
            p.size,
            p.rate_bps,
            p.snr_db,
            p.seed
        );
        match &r.result {
            Ok(m) => s.push_str(&format!(
                "{head},{},{},{},{},{:.3},{:.3},{},{},{},{},{},\n",
                m.expected,
                m.delivered,
                m.all_delivered_s
                    .map_or(String::new(), |v| format!("{v:.3}")),
                m.done_s.map_or(String::new(), |v| format!("{v:.3}")),
                m.airtime_s,
                m.base_airtime_s,
                m.transmissions,
                m.bytes_on_air,
                m.collided,
                m.ip_datagrams,
                m.ip_bytes
            )),
            Err(e) => s.push_str(&format!("{head},,,,,,,,,,,,\"{}\"\n", e.replace('"', "'"))),
        }
    }
    s
}

/// Figures of the rows without EMCON ships: time until every ship has its mail and the
/// channel's airtime against the number of ships, one line per scenario, one figure per
/// workload; returns the files written.
pub fn fleet_plots(
    rows: &[FleetRow],
    dir: &std::path::Path,
) -> Result<Vec<std::path::PathBuf>, crate::plot::PlotError> {
    let mut files = Vec::new();
    for w in [
        FleetWorkload::All,
        FleetWorkload::One,
        FleetWorkload::Mixed,
        FleetWorkload::Reports,
        FleetWorkload::Exchange,
    ] {
        let mut time = crate::plot::Series::new();
        let mut air = crate::plot::Series::new();
        for r in rows
            .iter()
            .filter(|r| r.spec.workload == w && r.spec.emcon == 0)
        {
            let Ok(m) = &r.result else { continue };
            let x = r.spec.ships as f64;
            if let Some(t) = m.all_delivered_s {
                time.entry(r.spec.scenario()).or_default().push((x, t));
            }
            air.entry(r.spec.scenario())
                .or_default()
                .push((x, m.airtime_s));
        }
        if time.values().map(Vec::len).sum::<usize>() < 2 {
            continue;
        }
        let p = dir.join(format!("fleet-time_{}.svg", w.name()));
        crate::plot::draw(
            &p,
            &format!(
                "Fleet, workload \"{}\": time until every ship has its mail",
                w.name()
            ),
            "ships",
            "seconds",
            &time,
            false,
        )?;
        files.push(p);
        let p = dir.join(format!("fleet-airtime_{}.svg", w.name()));
        crate::plot::draw(
            &p,
            &format!("Fleet, workload \"{}\": airtime on the channel", w.name()),
            "ships",
            "seconds of transmission",
            &air,
            false,
        )?;
        files.push(p);
    }
    Ok(files)
}
