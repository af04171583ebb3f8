//! Encode and decode throughput of the SIS codec for the two primitives that carry mail:
//! S_UNIDATA_REQUEST and S_UNIDATA_INDICATION, with U_PDUs of 200 bytes (open5066's MTU) and
//! 2048 bytes (the standard MTU). Throughput is in frame bytes.

use std::hint::black_box;

use bytes::Bytes;
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use skywave_sis::{
    Decoder, NodeAddress, Primitive, Priority, SapId, ServiceType, Ttl, TxMode, UnidataIndication,
    UnidataRequest,
};

fn primitives(len: usize) -> [(&'static str, Primitive); 2] {
    let updu = Bytes::from((0..len).map(|i| (i % 251) as u8).collect::<Vec<u8>>());
    let dest = NodeAddress::new(0x0123_4567).unwrap_or_default();
    let src = NodeAddress::new(9).unwrap_or_default();
    let prio = Priority::new(5).unwrap_or_default();
    let request = Primitive::UnidataRequest(UnidataRequest {
        priority: prio,
        dest_sap: SapId::HMTP,
        dest,
        mode: ServiceType::ARQ_NODE_CONFIRM,
        ttl: Ttl::from_secs(120).unwrap_or_default(),
        updu: updu.clone(),
    });
    let indication = Primitive::UnidataIndication(UnidataIndication {
        priority: prio,
        dest_sap: SapId::HMTP,
        dest: src,
        tx_mode: TxMode::Arq,
        src_sap: SapId::HMTP,
        src: dest,
        updu,
        ..Default::default()
    });
    [
        ("unidata_request", request),
        ("unidata_indication", indication),
    ]
}

fn bench(c: &mut Criterion) {
    for len in [200usize, 2048] {
        for (name, p) in primitives(len) {
            let frame = p.to_bytes().unwrap_or_default();
            let mut group = c.benchmark_group(format!("sis/{name}"));
            group.throughput(Throughput::Bytes(frame.len() as u64));
            let mut out = Vec::with_capacity(frame.len());
            group.bench_with_input(BenchmarkId::new("encode", len), &p, |b, p| {
                b.iter(|| {
                    out.clear();
                    black_box(p).encode(&mut out).unwrap_or_default();
                    black_box(out.len())
                })
            });
            group.bench_with_input(BenchmarkId::new("decode", len), &frame, |b, frame| {
                let mut d = Decoder::new();
                b.iter(|| {
                    d.push(black_box(frame));
                    black_box(d.next().ok().flatten())
                })
            });
            group.finish();
        }
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
