//! `skywave demo --ships N`: a base and N ship gateways on one emulated HF frequency.
//!
//! Starts the fleet ([`skywave_gateway::fleet::Fleet`]: the production daemon code for every
//! gateway, the ships members of one STANAG 5066 group address), submits three messages to the
//! base over SMTP (one to the captain of every ship, one to the whole fleet, one to the first
//! ship alone), waits until every ship has its mail and the base has every acknowledgement, and
//! prints what went on the air: one line per transfer, then each node's transmissions.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use skywave_gateway::fleet::{
    BASE_IP, BASE_NODE, FLEET_DOMAIN, Fleet, FleetOptions, GROUP_IP, GROUP_NODE, ship_domain,
    ship_ip, ship_node,
};
use skywave_gateway::hf::Direction;

use crate::demo::{DemoArgs, count, sample, submit};

/// Runs the fleet form of `skywave demo` with `ships` ships: the base listens on
/// `--shore-port`, ship i on `--ship-port` + i - 1.
pub(crate) async fn run(d: &DemoArgs, ships: usize, dir: PathBuf) -> anyhow::Result<ExitCode> {
    let n = ships;
    let mut o = FleetOptions::new(dir.clone(), n);
    o.base_smtp = SocketAddr::from(([127, 0, 0, 1], d.shore_port));
    o.ship_smtp_port = d.ship_port;
    o.rate_bps = d.rate;
    o.channel = d.channel.clone();
    o.snr_db = d.snr;
    o.turnaround = d.turnaround_duration()?;
    o.cas1 = d.cas1;
    o.link_idle = d.link_idle_duration()?;
    o.interleaver = d.interleaver.clone();
    o.seed = d.seed;
    o.time_scale = d.time_scale;
    if d.emcon_ship {
        o.emcon = vec![n - 1];
    }
    if d.ip_multicast {
        o.ip = Some(skywave_gateway::fleet::IpNetConfig {
            loss: 0.02,
            seed: d.seed,
            ..skywave_gateway::fleet::IpNetConfig::default()
        });
    }
    let fleet = Fleet::start(&o).await.map_err(|e| {
        anyhow::anyhow!(
            "{e}\n(if a port is in use, choose others with --ship-port and --shore-port)"
        )
    })?;
    let scale = d.time_scale;
    outln!("skywave demo: a base and {n} ships on one emulated HF frequency");
    outln!(
        "  radio: {} bit/s, {} interleaver, {} channel at {} dB SNR, seed {}",
        d.rate,
        d.interleaver,
        d.channel,
        d.snr,
        d.seed
    );
    outln!(
        "  base : gw.base.example  SMTP {}  node {BASE_NODE}",
        fleet.base.bound().smtp
    );
    for i in 0..n {
        if let Some(s) = fleet.ship(i) {
            outln!(
                "  ship{}: gw.{} SMTP {}  node {}{}",
                i + 1,
                ship_domain(i),
                s.bound().smtp,
                ship_node(i),
                if o.emcon.contains(&i) {
                    "  (EMCON)"
                } else {
                    ""
                }
            );
        }
    }
    match &o.ip {
        Some(ip) => outln!(
            "  multicast over an emulated IP network ({} ms one way, {:.0} % loss, {} bit/s uplinks): base {BASE_IP}, ships {}..., group {GROUP_IP}; configs in {}",
            ip.delay.as_millis(),
            ip.loss * 100.0,
            ip.rate_bps,
            ship_ip(0),
            dir.display()
        ),
        None => outln!(
            "  the ships listen on group address {GROUP_NODE}; configs in {}",
            dir.display()
        ),
    }
    outln!();

    let captains: Vec<String> = (0..n)
        .map(|i| format!("captain@{}", ship_domain(i)))
        .collect();
    let mut to_all = sample("hq@base.example", &captains[0], 1, "shore");
    if let Some(m) = to_all.first_mut() {
        m.recipients = captains.clone();
    }
    let notice = sample(
        "hq@base.example",
        &format!("notices@{FLEET_DOMAIN}"),
        1,
        "ship",
    );
    let single = sample("ops@base.example", &captains[0], 1, "ship-single");
    outln!(
        "submitting to the base: one message ({} B) to the captain of every ship, one ({} B) to notices@{FLEET_DOMAIN}, one ({} B) to {} alone",
        to_all.first().map_or(0, |m| m.body.len()),
        notice.first().map_or(0, |m| m.body.len()),
        single.first().map_or(0, |m| m.body.len()),
        captains[0]
    );
    let base = fleet.base.bound().smtp;
    submit(base, to_all).await?;
    submit(base, notice).await?;
    submit(base, single).await?;

    let started = tokio::time::Instant::now();
    let limit = Duration::from_secs_f64(4.0 * 3600.0 / scale);
    let mut lifted = !d.emcon_ship;
    loop {
        let want = |i: usize| if i == 0 { 3 } else { 2 };
        let all = (0..n).all(|i| count(&fleet.ship_maildirs[i]) >= want(i));
        let queued = fleet
            .base
            .spool()
            .entries()
            .map_or(usize::MAX, |e| e.count());
        if all && !lifted {
            // Every ship has its mail; the EMCON ship has not said so yet.
            outln!(
                "  after {:.0} s every ship has its mail; ship{n} keeps EMCON (it transmitted {} times), so the base still waits for its acknowledgement: lifting EMCON",
                started.elapsed().as_secs_f64() * scale,
                fleet.subnet.counters().nodes[n].transmissions
            );
            if let Some(s) = fleet.ship(n - 1) {
                s.set_emcon(false);
            }
            lifted = true;
        }
        if all && lifted && queued == 0 {
            break;
        }
        if started.elapsed() > limit {
            outln!("not everything arrived within 4 hours of radio time; the rest stays queued");
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let radio = started.elapsed().as_secs_f64() * scale;
    outln!();
    outln!("transfers out of the base:");
    for r in fleet.base.hf().transfers() {
        if r.direction == Direction::Out {
            outln!(
                "  -> {} by {}: {} B of mail as {} B of {} ({} U_PDUs), {:.1} s, {}",
                r.peer,
                r.protocol,
                r.plain_bytes,
                r.wire_bytes,
                match r.protocol.as_str() {
                    "pmul" => "P_MUL PDUs",
                    "pmul-ip" => "P_MUL datagrams",
                    _ => "HMTP",
                },
                r.updus,
                // The IP network runs in real time; only the radio runs --time-scale faster.
                if r.protocol == "pmul-ip" {
                    r.elapsed()
                } else {
                    r.elapsed() * scale
                },
                r.result
            );
        }
    }
    let c = fleet.subnet.counters();
    outln!();
    outln!("on the air (the emulated channel's own counters):");
    outln!(
        "  {} transmissions, {} bytes of D_PDUs, {} lost to collisions",
        c.transmissions,
        c.bytes_on_air,
        c.collided_transmissions()
    );
    for (i, nc) in c.nodes.iter().enumerate() {
        let name = if i == 0 {
            "base".to_owned()
        } else {
            format!("ship{i}")
        };
        outln!(
            "  {name:>6}: {} transmissions, {} bytes on the air, {} non-ARQ U_PDUs received",
            nc.transmissions,
            nc.bytes_on_air,
            nc.non_arq_delivered
        );
    }
    if let Some(net) = &fleet.ip_net {
        let ic = net.counters();
        outln!(
            "on the IP network: {} datagrams, {} bytes (IP and UDP headers included), {} copies lost",
            ic.datagrams,
            ic.bytes,
            ic.lost
        );
    }
    outln!("  all mail delivered and acknowledged after {radio:.1} s of radio time");
    for (i, m) in fleet.ship_maildirs.iter().enumerate() {
        outln!("  ship{} mail: {}", i + 1, m.join("new").display());
    }
    if !d.once {
        outln!();
        outln!("The gateways keep running; send mail to the base at {base} (Ctrl-C stops).");
        let _ = tokio::signal::ctrl_c().await;
    }
    fleet.stop().await;
    Ok(ExitCode::SUCCESS)
}
