//! Compression throughput on the synthetic mail corpus: compress and decompress per scheme, with
//! weezl (12-bit LZW, LSB order) as the yardstick for our JNOS LZW.
//!
//! Run with `cargo bench -p skywave-microbench --bench compress`. Throughput is in bytes of
//! plain text per second for both directions, so compress and decompress figures compare.

#![allow(missing_docs, clippy::unwrap_used)]

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use skywave_compress::corpus;
use skywave_compress::{
    Limits, LzwDecoder, Scheme, StreamDecoder, StreamEncoder, gzip_compress, gzip_decompress,
};
use weezl::BitOrder;

/// All messages through one session stream, flushed after each message.
fn session(scheme: Scheme, messages: &[Vec<u8>]) -> Vec<u8> {
    let mut enc = StreamEncoder::for_scheme(scheme).unwrap();
    let mut wire = Vec::new();
    for m in messages {
        enc.push(m).unwrap();
        enc.flush().unwrap();
        wire.extend(enc.take_output());
    }
    wire
}

fn bench(c: &mut Criterion) {
    let messages = corpus::standard_corpus(corpus::DEFAULT_SEED, corpus::DEFAULT_COUNT);
    let joined: Vec<u8> = messages.concat();
    let total = joined.len() as u64;
    let stream_schemes = [
        Scheme::Lzw(9),
        Scheme::Lzw(12),
        Scheme::Lzw(16),
        Scheme::Deflate,
    ];

    let mut g = c.benchmark_group("compress");
    g.throughput(Throughput::Bytes(total));
    g.sample_size(10);
    g.warm_up_time(Duration::from_secs(1));
    g.measurement_time(Duration::from_secs(3));
    for scheme in stream_schemes {
        g.bench_function(scheme.to_string(), |b| {
            b.iter(|| black_box(session(scheme, black_box(&messages))))
        });
    }
    g.bench_function("gzip", |b| {
        b.iter(|| {
            for m in &messages {
                black_box(gzip_compress(black_box(m), 9).unwrap());
            }
        })
    });
    g.bench_function("weezl12", |b| {
        b.iter(|| {
            let mut e = weezl::encode::Encoder::new(BitOrder::Lsb, 8);
            black_box(e.encode(black_box(&joined)).unwrap())
        })
    });
    g.finish();

    let mut g = c.benchmark_group("decompress");
    g.throughput(Throughput::Bytes(total));
    g.sample_size(10);
    g.warm_up_time(Duration::from_secs(1));
    g.measurement_time(Duration::from_secs(3));
    for scheme in stream_schemes {
        let wire = session(scheme, &messages);
        g.bench_function(scheme.to_string(), |b| {
            b.iter(|| {
                let mut d = StreamDecoder::detect(Limits::unlimited());
                d.feed(black_box(&wire)).unwrap();
                black_box(d.take_output())
            })
        });
    }
    let gz: Vec<Vec<u8>> = messages
        .iter()
        .map(|m| gzip_compress(m, 9).unwrap())
        .collect();
    g.bench_function("gzip", |b| {
        b.iter(|| {
            for f in &gz {
                black_box(gzip_decompress(black_box(f), Limits::unlimited()).unwrap());
            }
        })
    });
    // Our LZW decoder straight, without the detection wrapper, beside weezl's.
    let lzw12 = session(Scheme::Lzw(12), &messages);
    g.bench_function("lzw12-direct", |b| {
        b.iter(|| {
            let mut d = LzwDecoder::new(Limits::unlimited());
            d.feed(black_box(&lzw12)).unwrap();
            black_box(d.take_output())
        })
    });
    let weezl_stream = weezl::encode::Encoder::new(BitOrder::Lsb, 8)
        .encode(&joined)
        .unwrap();
    g.bench_function("weezl12", |b| {
        b.iter(|| {
            let mut d = weezl::decode::Decoder::new(BitOrder::Lsb, 8);
            black_box(d.decode(black_box(&weezl_stream)).unwrap())
        })
    });
    g.finish();

    // Compression ratios of the same run, for the record.
    let ours = session(Scheme::Lzw(12), &messages).len();
    eprintln!(
        "corpus {} bytes: lzw12 session {} bytes ({:.2}:1), weezl12 {} bytes ({:.2}:1)",
        total,
        ours,
        total as f64 / ours as f64,
        weezl_stream.len(),
        total as f64 / weezl_stream.len() as f64
    );
}

criterion_group!(benches, bench);
criterion_main!(benches);
