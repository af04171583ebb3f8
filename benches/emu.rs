//! Emulator speed: simulated seconds per wall-clock second, in paused virtual time. Criterion's
//! throughput line reads "elem/s": each element is one simulated second, so it is the speed-up
//! over real time (issue 13 asks for more than 10,000x).
//!
//! - `saturated_1200_bps_link`: a saturated 1200 bit/s ARQ link (two nodes, AWGN 8 dB, short
//!   interleaver, 300 U_PDUs of 2000 bytes through the real SIS client).
//! - `scenario/...`: whole `skywave-bench` runs of the scenarios the fidelity work added or
//!   changed, each timed over its own simulated session: SMTP over TCP (`jnos-1998`, on
//!   skywave's TCP) on the 110A-minimum raw modem through Watterson fading, SMTP over TCP
//!   over the 5066 IP client on a fading channel, an HMTP session whose link is lost at 0 dB, and a CFTP batch of bundles.

// A benchmark: a failure to set up is a bug worth a panic.
#![allow(clippy::expect_used, clippy::panic)]

use std::time::Duration;

use bytes::Bytes;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use skywave_bench::model::{Condition, Scenario, TcpProfile};
use skywave_bench::runner::run_detailed;
use skywave_bench::workload::isode;
use skywave_emu::channel::ChannelConfig;
use skywave_emu::modem::{DataRate, Interleaver, ModemConfig};
use skywave_emu::net::{Subnet, SubnetConfig};
use skywave_sis::client::{Delivery, Event};
use skywave_sis::{
    Client, ClientConfig, NodeAddress, Priority, SapId, ServiceType, Ttl, UnidataRequest,
};

const U_PDUS: usize = 300;
const LEN: usize = 2000;

/// Runs the transfer once; returns the simulated time the channel was busy.
fn saturated_link() -> Duration {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("runtime");
    rt.block_on(async {
        let (a, b) = (
            NodeAddress::new(0x0102_0304).expect("address"),
            NodeAddress::new(0x0105_0607).expect("address"),
        );
        let modem = ModemConfig::new(DataRate::Bps1200, Interleaver::Short).expect("modem");
        let mut cfg = SubnetConfig::new(vec![a, b], modem, ChannelConfig::awgn(8.0));
        cfg.seed = 9;
        let subnet = Subnet::start(cfg).expect("subnet");
        let connect = |node: usize| {
            let s = subnet.clone();
            let connector = move || {
                let s = s.clone();
                async move { Ok::<_, std::io::Error>(s.connect_in_process(node)) }
            };
            let cfg = ClientConfig::new(SapId::new(3).expect("sap"), ServiceType::ARQ_NODE_CONFIRM);
            Client::connect(connector, cfg)
        };
        let (ca, _, _ea) = connect(0).await.expect("client A");
        let (_cb, _, mut eb) = connect(1).await.expect("client B");
        let pending: Vec<_> = (0..U_PDUS)
            .map(|i| {
                let mut v = format!("U_PDU {i:05} ").into_bytes();
                v.resize(LEN, b'a' + (i % 26) as u8);
                ca.send_unidata(UnidataRequest {
                    priority: Priority::new(5).expect("priority"),
                    dest_sap: SapId::new(3).expect("sap"),
                    dest: b,
                    mode: ServiceType::DEFAULT,
                    ttl: Ttl::INFINITE,
                    updu: Bytes::from(v),
                })
                .expect("submit")
            })
            .collect();
        let mut got = 0;
        while got < U_PDUS {
            match eb.recv().await {
                Some(Event::Unidata(_)) => got += 1,
                Some(_) => {}
                None => panic!("events ended after {got} U_PDUs"),
            }
        }
        for p in pending {
            assert!(matches!(p.await, Ok(Delivery::Confirmed(_))));
        }
        subnet.counters().busy_until
    })
}

/// One `skywave-bench` run: (name, scenario, channel, SNR dB, rate, interleaver, message
/// bytes, messages, TCP profile).
type ScenarioCase = (
    &'static str,
    &'static str,
    &'static str,
    f64,
    u32,
    &'static str,
    usize,
    usize,
    TcpProfile,
);

const SCENARIOS: [ScenarioCase; 4] = [
    (
        "smtp_tcp_modem_110a_2400_good_15db",
        "smtp-tcp-modem",
        "good",
        15.0,
        2400,
        "short",
        14_025,
        1,
        TcpProfile::Jnos1998,
    ),
    (
        "smtp_tcp_5066_1200_good_5db",
        "smtp-tcp-5066",
        "good",
        5.0,
        1200,
        "short",
        14_025,
        1,
        TcpProfile::BestCase,
    ),
    (
        "hmtp_5066_2400_good_0db_link_lost",
        "hmtp-5066-deflate",
        "good",
        0.0,
        2400,
        "short",
        14_025,
        1,
        TcpProfile::BestCase,
    ),
    (
        "cftp_5066_300_long_100x386_bundles",
        "cftp-5066",
        "awgn",
        30.0,
        300,
        "long",
        386,
        100,
        TcpProfile::BestCase,
    ),
];

/// Runs one case; returns the simulated session time.
fn scenario_run(case: &ScenarioCase) -> Duration {
    let (_, scenario, channel, snr_db, rate_bps, interleaver, size, messages, profile) = *case;
    let scenario: Scenario = scenario.parse().expect("scenario");
    let cond = Condition {
        channel: channel.into(),
        snr_db,
        rate_bps,
        interleaver: interleaver.into(),
        seed: 1,
        segment_size: skywave_bench::sweep::DEFAULT_SEGMENT,
        modem: None,
        turnaround: None,
        cas1: false,
        link_idle: None,
        default_ttl: None,
        ip_ttl: None,
        changes: Default::default(),
    };
    let work = isode(size, messages, 1).expect("workload");
    let d = run_detailed(scenario, &cond, &profile.settings(rate_bps), &work).expect("run");
    Duration::from_secs_f64(d.session_seconds)
}

fn bench(c: &mut Criterion) {
    let simulated = saturated_link();
    let mut g = c.benchmark_group("emulator");
    g.sample_size(10);
    g.throughput(Throughput::Elements(simulated.as_secs()));
    g.bench_function("saturated_1200_bps_link_simulated_seconds", |b| {
        b.iter(saturated_link)
    });
    g.finish();
    let mut g = c.benchmark_group("scenario");
    g.sample_size(10);
    for case in &SCENARIOS {
        let simulated = scenario_run(case);
        g.throughput(Throughput::Elements(simulated.as_secs().max(1)));
        g.bench_function(case.0, |b| b.iter(|| scenario_run(case)));
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
