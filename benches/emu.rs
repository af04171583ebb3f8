//! Emulator speed: simulated seconds per wall-clock second for a saturated 1200 bit/s ARQ link
//! (two nodes, AWGN 8 dB, short interleaver, 300 U_PDUs of 2000 bytes through the real SIS
//! client), in paused virtual time. Criterion's throughput line reads "elem/s": each element is
//! one simulated second, so it is the speed-up over real time.

// A benchmark: a failure to set up is a bug worth a panic.
#![allow(clippy::expect_used, clippy::panic)]

use std::time::Duration;

use bytes::Bytes;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
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

fn bench(c: &mut Criterion) {
    let simulated = saturated_link();
    let mut g = c.benchmark_group("emulator");
    g.sample_size(10);
    g.throughput(Throughput::Elements(simulated.as_secs()));
    g.bench_function("saturated_1200_bps_link_simulated_seconds", |b| {
        b.iter(saturated_link)
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
