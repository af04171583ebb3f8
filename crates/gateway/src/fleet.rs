//! A base and N ship gateways on one emulated HF frequency, in one process: what
//! `skywave demo --ships N` runs, and what the fleet tests drive in virtual time.
//!
//! [`Fleet::start`] writes each gateway's configuration under one directory (`base/`,
//! `ship1/`, ...: ordinary files an administrator can read and reuse), starts one [`Subnet`]
//! with a node per gateway, the ships members of the 5066 group address [`GROUP_NODE`] and each
//! ship hearing the others through its own channel (its own SNR), and starts every gateway with
//! [`daemon::start`], reaching its node's SIS server in-process.
//!
//! The base's routing table has one HMTP peer per ship and the group `fleet` of all of them;
//! mail for `shipN.example` goes to ship N, mail for `fleet.example` to the group (every ship
//! delivers it: each lists `fleet.example` among its own domains). A message for two or more
//! ships therefore goes once, by P_MUL, and a message for one ship by HMTP (or by P_MUL when
//! that ship keeps EMCON).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use skywave_emu::ipnet::IpNet;
pub use skywave_emu::ipnet::IpNetConfig;
use skywave_emu::net::{Group, Subnet, SubnetConfig};
use skywave_sis::NodeAddress;
use tokio::sync::{Notify, watch};

use crate::clock::Clock;
use crate::config;
use crate::daemon::{self, Gateway};
use crate::demo::{
    HfToml, PairError, gateway_toml, in_process, maildir_of, modem_and_channel, with_turnaround,
    write,
};

/// The base's STANAG 5066 address.
pub const BASE_NODE: &str = "0.0.1.1";
/// The fleet's STANAG 5066 group address.
pub const GROUP_NODE: &str = "16.0.9.9";
/// The fleet's IP multicast address, when it multicasts over IP.
pub const GROUP_IP: &str = "239.192.0.1";
/// The base's address on the fleet's IP network.
pub const BASE_IP: &str = "10.9.0.1";

/// Ship `i`'s (0-based) address on the fleet's IP network.
pub fn ship_ip(i: usize) -> String {
    format!("10.9.0.{}", i + 2)
}

/// Ship `i`'s (0-based) STANAG 5066 address.
pub fn ship_node(i: usize) -> String {
    format!("0.0.2.{}", i + 1)
}

/// Unix second at which a simulation's calendar starts (2026-01-01 00:00:00 UTC): the fleet's
/// gateways date their mail from it instead of the wall clock.
pub const SIMULATION_EPOCH: u64 = 1_767_225_600;

/// `cfg` for gateway number `index` of a simulation whose calendar is `clock`: its clock starts
/// at the calendar's now and its queue ids have a salt of their own, so a run's mail (dates and
/// ids in `Received:` headers) and hence its bytes on the air are the same every time.
fn simulated(mut cfg: config::Config, clock: &Clock, index: usize) -> config::Config {
    cfg.simulation = Some(config::Simulation {
        epoch_unix: clock.unix_now(),
        id_salt: u32::try_from(index).unwrap_or(u32::MAX),
    });
    cfg
}

/// How to run the fleet.
#[derive(Debug, Clone)]
pub struct FleetOptions {
    /// Directory for every gateway's configuration and state.
    pub dir: PathBuf,
    /// Number of ships (1-200).
    pub ships: usize,
    /// The base's LAN SMTP address (port 0: any free port).
    pub base_smtp: SocketAddr,
    /// The first ship's LAN SMTP port (ship i gets this + i; 0: any free port for every ship).
    pub ship_smtp_port: u16,
    /// Modem data rate, bit/s.
    pub rate_bps: u32,
    /// Interleaver: zero, short or long.
    pub interleaver: String,
    /// `awgn` or an ITU-R profile (good, moderate, poor, ...).
    pub channel: String,
    /// SNR of every link, dB in 3 kHz.
    pub snr_db: f64,
    /// SNR at which particular ships (0-based) hear the channel, instead of `snr_db`.
    pub ship_snr_db: Vec<(usize, f64)>,
    /// (ship index, impairment): outages, fades and block losses of what that ship hears
    /// (a ship behind a headland, a ship's receiver blanked), in simulated time.
    pub ship_impairments: Vec<(usize, skywave_emu::channel::ScheduledImpairment)>,
    /// Every station's turnaround (see [`crate::demo::PairOptions::turnaround`]).
    pub turnaround: std::time::Duration,
    /// CAS-1 link making before the first ARQ data (see [`crate::demo::PairOptions::cas1`]):
    /// the base's HMTP to each ship makes that ship's link first; multicast needs none.
    pub cas1: bool,
    /// With `cas1`: a link idle this long is broken (see
    /// [`crate::demo::PairOptions::link_idle`]).
    pub link_idle: Option<std::time::Duration>,
    /// With `cas1` and `link_idle`: the most links each 5066 node holds at once (the base
    /// then serves its ships' unicast that many at a time; see
    /// [`skywave_emu::net::SubnetConfig::max_links`]).
    pub max_links: Option<usize>,
    /// Ships (0-based) that keep EMCON from the start (and the base knows it).
    pub emcon: Vec<usize>,
    /// Blind repeats of each Data_PDU in the base's multicast.
    pub repeats: u8,
    /// Ships acknowledge multicast by ARQ (`pmul_acks = "arq"`), not non-ARQ.
    pub arq_acks: bool,
    /// The base's routing table has the group (false: every ship by HMTP unicast, the
    /// baseline the fleet benchmark compares with; EMCON ships are then unreachable).
    pub multicast: bool,
    /// Seed of the emulator's random draws.
    pub seed: u64,
    /// Simulated seconds per second of tokio time (1 in virtual-time tests).
    pub time_scale: f64,
    /// First retry delay of every spool, seconds.
    pub min_backoff: u64,
    /// Multicast over an emulated IP network (a satellite or line-of-sight link) instead of
    /// the HF channel: the group is `pmul-ip`; unicast still goes by HMTP over HF.
    pub ip: Option<IpNetConfig>,
    /// Time slots on the shared frequency, this many minutes each: ship i's sessions with the
    /// base, either way, start only in its slot (a `schedule` in both routing tables), the
    /// ships taking turns in a cycle that must divide the hour. `None`: any time.
    pub slot_minutes: Option<u32>,
    /// The group's radio schedule in the base's routing table (`"*:00-*:03"`, `"06:00-07:00"`):
    /// its multicasts, their repair rounds and EMCON repeats start only in these windows.
    /// Empty: any time.
    pub group_windows: Vec<String>,
    /// With `group_windows`: multicast mail at or above this priority (`"flash"`, `"4"`) goes
    /// at any time.
    pub group_bypass: Option<String>,
    /// With `slot_minutes`: the first slot of every cycle is the base's, for its multicasts
    /// (the group's schedule, in place of `group_windows`), and the ships' slots follow it, so
    /// the cycle is one slot longer.
    pub base_slot: bool,
    /// Lines added to the base's `[[group]]` entry (`strip_headers = true`, say).
    pub group_extra: String,
}

impl FleetOptions {
    /// The fleet demo's defaults: 1200 bit/s, short interleaver, AWGN at 15 dB, one blind
    /// repeat, the base's LAN port 2526 and the ships' from 2527, real time.
    pub fn new(dir: PathBuf, ships: usize) -> Self {
        FleetOptions {
            dir,
            ships,
            base_smtp: SocketAddr::from(([127, 0, 0, 1], 2526)),
            ship_smtp_port: 2527,
            rate_bps: 1200,
            interleaver: "short".into(),
            channel: "awgn".into(),
            snr_db: 15.0,
            ship_snr_db: Vec::new(),
            ship_impairments: Vec::new(),
            turnaround: crate::demo::DEFAULT_TURNAROUND,
            cas1: false,
            link_idle: None,
            max_links: None,
            emcon: Vec::new(),
            repeats: 1,
            multicast: true,
            arq_acks: false,
            seed: 1,
            time_scale: 1.0,
            min_backoff: 30,
            ip: None,
            slot_minutes: None,
            group_windows: Vec::new(),
            group_bypass: None,
            base_slot: false,
            group_extra: String::new(),
        }
    }

    /// Ship `i`'s `schedule = [...]` line for its slot (see [`FleetOptions::slot_minutes`]), or
    /// nothing without slots.
    fn slot_schedule(&self, i: usize) -> Result<String, PairError> {
        let windows = self.slot_windows(i + usize::from(self.base_slot))?;
        if windows.is_empty() {
            return Ok(String::new());
        }
        let windows: Vec<String> = windows.iter().map(|w| format!("\"{w}\"")).collect();
        Ok(format!("schedule = [{}]\n", windows.join(", ")))
    }

    /// The windows of slot `k` of the cycle (`"*:MM-*:MM"`, one per cycle in the hour), or none
    /// without slots.
    fn slot_windows(&self, k: usize) -> Result<Vec<String>, PairError> {
        let Some(slot) = self.slot_minutes else {
            return Ok(Vec::new());
        };
        let slots = u32::try_from(self.ships + usize::from(self.base_slot)).unwrap_or(u32::MAX);
        let cycle = slot.saturating_mul(slots);
        if slot == 0 || cycle > 60 || 60 % cycle != 0 {
            let base = if self.base_slot { " and the base" } else { "" };
            return Err(PairError::Setting(format!(
                "{} ships{base} in slots of {slot} min make a cycle of {cycle} min, which must divide the hour",
                self.ships
            )));
        }
        let first = slot * u32::try_from(k).unwrap_or(0);
        Ok((0..60 / cycle)
            .map(|c| {
                let start = c * cycle + first;
                format!("*:{:02}-*:{:02}", start, (start + slot) % 60)
            })
            .collect())
    }

    fn ship_smtp(&self, i: usize) -> SocketAddr {
        let port = if self.ship_smtp_port == 0 {
            0
        } else {
            self.ship_smtp_port
                .saturating_add(u16::try_from(i).unwrap_or(u16::MAX))
        };
        SocketAddr::from(([127, 0, 0, 1], port))
    }
}

/// The running fleet.
#[derive(Debug)]
pub struct Fleet {
    /// The emulated subnetwork: node 0 the base, node i + 1 ship i.
    pub subnet: Subnet,
    /// The base's gateway.
    pub base: Gateway,
    /// The ships' gateways (`None` while a test has one stopped).
    pub ships: Vec<Option<Gateway>>,
    /// The emulated IP network, when the fleet multicasts over IP.
    pub ip_net: Option<Arc<IpNet>>,
    /// Where the base delivers its LAN mail.
    pub base_maildir: PathBuf,
    /// Where each ship delivers its LAN mail.
    pub ship_maildirs: Vec<PathBuf>,
    /// The base's configuration file.
    pub base_config: PathBuf,
    /// Each ship's configuration file.
    pub ship_configs: Vec<PathBuf>,
    sis_up: watch::Receiver<bool>,
    sis_cut: Arc<Notify>,
    _sis_up_tx: watch::Sender<bool>,
    /// The simulation's calendar: every gateway starts its clock from it (see [`simulated`]).
    clock: Clock,
}

impl Fleet {
    /// Writes the configurations and starts the emulator and every gateway.
    pub async fn start(opts: &FleetOptions) -> Result<Fleet, PairError> {
        if !opts.multicast && !opts.emcon.is_empty() {
            return Err(PairError::Setting(
                "a ship under EMCON answers nothing, so HMTP cannot reach it: EMCON ships need the multicast group".to_owned(),
            ));
        }
        if !(1..=200).contains(&opts.ships) {
            return Err(PairError::Setting(format!(
                "{} ships: a fleet has 1 to 200",
                opts.ships
            )));
        }
        let (modem, channel) =
            modem_and_channel(opts.rate_bps, &opts.interleaver, &opts.channel, opts.snr_db)?;
        let modem = with_turnaround(modem, opts.turnaround)?;
        let node = |s: &str| {
            s.parse::<NodeAddress>()
                .map_err(|e| PairError::Setting(e.to_string()))
        };
        let mut addresses = vec![node(BASE_NODE)?];
        for i in 0..opts.ships {
            addresses.push(node(&ship_node(i))?);
        }
        let mut sc = SubnetConfig::new(addresses, modem, channel);
        sc.seed = opts.seed;
        sc.time_scale = opts.time_scale;
        sc.cas1 = opts.cas1;
        sc.link_idle = opts.link_idle;
        sc.max_links = opts.max_links;
        sc.groups.push(Group {
            address: node(GROUP_NODE)?,
            members: (1..=opts.ships).collect(),
        });
        if let Some(ship) = opts
            .ship_snr_db
            .iter()
            .map(|&(s, _)| s)
            .chain(opts.ship_impairments.iter().map(|&(s, _)| s))
            .find(|&s| s >= opts.ships)
        {
            return Err(PairError::Setting(format!(
                "ship {} has no SNR or impairment to set: the fleet has {} ships",
                ship + 1,
                opts.ships
            )));
        }
        // Node 0 is the base: ship i is node i + 1.
        let snr: Vec<_> = opts.ship_snr_db.iter().map(|&(s, v)| (s + 1, v)).collect();
        let cuts: Vec<_> = opts
            .ship_impairments
            .iter()
            .map(|&(s, i)| (s + 1, i))
            .collect();
        sc.set_receiver_conditions(&snr, &cuts);
        let subnet = Subnet::start(sc).map_err(|e| PairError::Emulator(e.to_string()))?;

        let base_config = write_base(opts)?;
        let mut ship_configs = Vec::new();
        for i in 0..opts.ships {
            ship_configs.push(write_ship(opts, i)?);
        }
        let (sis_up_tx, sis_up) = watch::channel(true);
        let sis_cut = Arc::new(Notify::new());
        let clock = Clock::starting_at(SIMULATION_EPOCH);
        let base_cfg = simulated(config::load(&base_config)?, &clock, 0);
        let base_maildir = maildir_of(&base_cfg);
        let ip_net = opts.ip.clone().map(IpNet::new);
        let base = daemon::start_with(
            base_cfg,
            in_process(&subnet, 0, sis_up.clone(), Arc::clone(&sis_cut)),
            network(&ip_net),
        )
        .await
        .map_err(|source| PairError::Gateway {
            side: "base",
            source,
        })?;
        let mut fleet = Fleet {
            subnet,
            base,
            ships: Vec::new(),
            ip_net,
            base_maildir,
            ship_maildirs: Vec::new(),
            base_config,
            ship_configs,
            sis_up,
            sis_cut,
            _sis_up_tx: sis_up_tx,
            clock,
        };
        for i in 0..opts.ships {
            let cfg = simulated(config::load(&fleet.ship_configs[i])?, &fleet.clock, i + 1);
            fleet.ship_maildirs.push(maildir_of(&cfg));
            let ship = fleet.start_ship_with(i, cfg).await?;
            fleet.ships.push(Some(ship));
        }
        Ok(fleet)
    }

    async fn start_ship_with(&self, i: usize, cfg: config::Config) -> Result<Gateway, PairError> {
        daemon::start_with(
            cfg,
            in_process(
                &self.subnet,
                i + 1,
                self.sis_up.clone(),
                Arc::clone(&self.sis_cut),
            ),
            network(&self.ip_net),
        )
        .await
        .map_err(|source| PairError::Gateway {
            side: "ship",
            source,
        })
    }

    /// Stops ship `i`'s gateway (a crash, as far as the protocols can tell: what it had in
    /// memory is gone, what it had on disk stays).
    pub async fn stop_ship(&mut self, i: usize) {
        if let Some(g) = self.ships.get_mut(i).and_then(Option::take) {
            g.stop().await;
        }
    }

    /// Starts ship `i`'s gateway again from its configuration and state.
    pub async fn start_ship(&mut self, i: usize) -> Result<(), PairError> {
        let Some(path) = self.ship_configs.get(i) else {
            return Err(PairError::Setting(format!("no ship {}", i + 1)));
        };
        let cfg = simulated(config::load(path)?, &self.clock, i + 1);
        let g = self.start_ship_with(i, cfg).await?;
        self.ships[i] = Some(g);
        Ok(())
    }

    /// Ship `i`'s gateway (panics if a test stopped it).
    pub fn ship(&self, i: usize) -> Option<&Gateway> {
        self.ships.get(i).and_then(Option::as_ref)
    }

    /// Stops every gateway.
    pub async fn stop(self) {
        for s in self.ships.into_iter().flatten() {
            s.stop().await;
        }
        self.base.stop().await;
    }
}

/// The base's domain, and ship `i`'s.
pub const BASE_DOMAIN: &str = "base.example";
/// The domain every ship delivers (mail for the whole fleet).
pub const FLEET_DOMAIN: &str = "fleet.example";

/// Ship `i`'s (0-based) mail domain.
pub fn ship_domain(i: usize) -> String {
    format!("ship{}.example", i + 1)
}

/// How the gateways' P_MUL over IP travels: the fleet's emulated network, if it has one.
fn network(ip_net: &Option<Arc<IpNet>>) -> crate::hf::pmul_ip::IpNetwork {
    match ip_net {
        Some(n) => crate::hf::pmul_ip::IpNetwork::Emulated(Arc::clone(n)),
        None => crate::hf::pmul_ip::IpNetwork::Udp,
    }
}

fn write_base(opts: &FleetOptions) -> Result<PathBuf, PairError> {
    let dir = opts.dir.join("base");
    create_dir(&dir)?;
    let mut gateway = gateway_toml(
        "The base gateway of `skywave demo --ships`",
        BASE_DOMAIN,
        opts.base_smtp,
        BASE_NODE,
        opts.min_backoff,
        HfToml {
            rate_bps: opts.rate_bps,
            turnaround: opts.turnaround,
            emcon: false,
            resume: true,
            reply_timeout: None,
            delivery_timeout: None,
        },
    );
    if opts.ip.is_some() {
        gateway.push_str(&format!("\n[pmul_ip]\naddress = \"{BASE_IP}\"\n"));
    }
    let mut routes = format!(
        "# Routing table of the base of `skywave demo --ships {n}`: one HMTP peer per ship,\n\
         # and the group of them all: mail for two or more ships goes once, by P_MUL. Every\n\
         # gateway of the fleet runs this skywave, so each honours the cut marker (xcut).\n\
         [lan]\n\
         domains = [\"{BASE_DOMAIN}\", \"*.{BASE_DOMAIN}\"]\n\
         relay_networks = [\"127.0.0.0/8\", \"::1/128\"]\n",
        n = opts.ships
    );
    let mut members = Vec::new();
    for i in 0..opts.ships {
        let name = format!("ship{}", i + 1);
        let emcon = opts.emcon.contains(&i);
        routes.push_str(&format!(
            "\n[[peer]]\n\
             name = \"{name}\"\n\
             node = \"{node}\"\n\
             protocol = \"hmtp\"\n\
             skywave = true\n\
             xcut = true\n\
             compression = \"deflate\"\n\
             emcon = {emcon}\n\
             {slot}{ip}\n\
             [[route]]\n\
             match = \"{domain}\"\n\
             to = \"{name}\"\n\n\
             [[route]]\n\
             match = \"*.{domain}\"\n\
             to = \"{name}\"\n",
            node = ship_node(i),
            domain = ship_domain(i),
            slot = opts.slot_schedule(i)?,
            ip = if opts.ip.is_some() {
                format!("ip = \"{}\"\n", ship_ip(i))
            } else {
                String::new()
            },
        ));
        members.push(format!("\"{name}\""));
    }
    if !opts.multicast {
        let cfg = dir.join("skywave.toml");
        write(&cfg, &gateway)?;
        write(&dir.join("routes.toml"), &routes)?;
        return Ok(cfg);
    }
    let bearer = if opts.ip.is_some() {
        format!("bearer = \"pmul-ip\"\naddress = \"{GROUP_IP}\"")
    } else {
        format!("node = \"{GROUP_NODE}\"")
    };
    if opts.base_slot && opts.ip.is_some() {
        return Err(PairError::Setting(
            "a slot of the base's own is for multicast over HF; over IP nothing shares the frequency"
                .into(),
        ));
    }
    let mut schedule = String::new();
    let windows = if opts.base_slot {
        opts.slot_windows(0)?
    } else {
        opts.group_windows.clone()
    };
    if !windows.is_empty() {
        let windows: Vec<String> = windows.iter().map(|w| format!("\"{w}\"")).collect();
        schedule = format!("schedule = [{}]\n", windows.join(", "));
    }
    if let Some(b) = &opts.group_bypass {
        schedule.push_str(&format!("schedule_bypass = \"{b}\"\n"));
    }
    routes.push_str(&format!(
        "\n[[group]]\n\
         name = \"fleet\"\n\
         {bearer}\n\
         members = [{members}]\n\
         repeats = {repeats}\n\
         {schedule}{extra}\n\
         [[route]]\n\
         match = \"{FLEET_DOMAIN}\"\n\
         to = \"fleet\"\n",
        members = members.join(", "),
        repeats = opts.repeats,
        extra = opts.group_extra,
    ));
    let cfg = dir.join("skywave.toml");
    write(&cfg, &gateway)?;
    write(&dir.join("routes.toml"), &routes)?;
    Ok(cfg)
}

fn write_ship(opts: &FleetOptions, i: usize) -> Result<PathBuf, PairError> {
    let name = format!("ship{}", i + 1);
    let dir = opts.dir.join(&name);
    create_dir(&dir)?;
    let domain = ship_domain(i);
    let mut gateway = gateway_toml(
        &format!("Ship {} of `skywave demo --ships`", i + 1),
        &domain,
        opts.ship_smtp(i),
        &ship_node(i),
        opts.min_backoff,
        HfToml {
            rate_bps: opts.rate_bps,
            turnaround: opts.turnaround,
            emcon: opts.emcon.contains(&i),
            resume: true,
            reply_timeout: None,
            delivery_timeout: None,
        },
    );
    let mut base_ip = String::new();
    if opts.ip.is_some() {
        gateway.push_str(&format!(
            "\n[pmul_ip]\naddress = \"{}\"\njoin = [\"{GROUP_IP}\"]\n",
            ship_ip(i)
        ));
        base_ip = format!("ip = \"{BASE_IP}\"\n");
    }
    let routes = format!(
        "# Routing table of {name} of `skywave demo --ships`: its own domain and the fleet's\n\
         # are delivered here, everything else goes to the base.\n\
         [lan]\n\
         domains = [\"{domain}\", \"*.{domain}\", \"{FLEET_DOMAIN}\"]\n\
         relay_networks = [\"127.0.0.0/8\", \"::1/128\"]\n\n\
         [[peer]]\n\
         name = \"base\"\n\
         node = \"{BASE_NODE}\"\n\
         protocol = \"hmtp\"\n\
         skywave = true\n\
         xcut = true\n\
         compression = \"deflate\"\n\
         pmul_acks = \"{acks}\"\n\
         {slot}{base_ip}\n\
         [[route]]\n\
         match = \"*\"\n\
         to = \"base\"\n",
        acks = if opts.arq_acks { "arq" } else { "non-arq" },
        slot = opts.slot_schedule(i)?,
    );
    let cfg = dir.join("skywave.toml");
    write(&cfg, &gateway)?;
    write(&dir.join("routes.toml"), &routes)?;
    Ok(cfg)
}

fn create_dir(dir: &Path) -> Result<(), PairError> {
    std::fs::create_dir_all(dir).map_err(|source| PairError::Io {
        path: dir.display().to_string(),
        source,
    })
}
