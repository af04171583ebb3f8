//! The 8BITMIME downgrade (`skywave_smtp::downgrade::seven_bit`) on a message of 1 MiB: 8-bit
//! text made quoted-printable, 8-bit octets made base64, and a multipart holding both, each
//! beside the bare encoder of the same octets (the quoted_printable and base64 crates), so that
//! the cost of the MIME walk shows as a ratio. A 7-bit message is the fourth case: it is
//! returned as it is, after one scan.
//!
//! Run with `cargo bench -p skywave-microbench --bench mime`. Throughput is in octets of the
//! original message per second.

#![allow(missing_docs, clippy::unwrap_used)]

use std::hint::black_box;
use std::time::Duration;

use base64::Engine as _;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use skywave_smtp::downgrade::seven_bit;

const SIZE: usize = 1 << 20;

/// About 1 MiB of text in lines of 72 characters, one in six of them 8-bit (UTF-8).
fn text() -> Vec<u8> {
    let line =
        "Wind 270\u{b0} 25 kn, sea 4, visibility good; Gr\u{fc}\u{df}e an Bord, Kurs 090.\r\n";
    line.repeat(SIZE / line.len() + 1).into_bytes()
}

/// About 1 MiB of octets (no CR or LF, as SMTP would have turned them into line ends).
fn octets() -> Vec<u8> {
    (0..SIZE)
        .map(|i| (i * 131 % 251) as u8)
        .map(|b| if b == b'\r' || b == b'\n' { b'.' } else { b })
        .collect()
}

fn message(ctype: &str, body: &[u8]) -> Vec<u8> {
    let mut m = format!(
        "From: a@ship.test\r\nTo: b@shore.test\r\nSubject: bench\r\nMIME-Version: 1.0\r\n\
         Content-Type: {ctype}\r\nContent-Transfer-Encoding: 8bit\r\n\r\n"
    )
    .into_bytes();
    m.extend_from_slice(body);
    m
}

fn multipart(text: &[u8], octets: &[u8]) -> Vec<u8> {
    let mut m = b"From: a@ship.test\r\nTo: b@shore.test\r\nSubject: bench\r\nMIME-Version: 1.0\r\n\
        Content-Type: multipart/mixed; boundary=\"=_b\"\r\n\r\n--=_b\r\n\
        Content-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: 8bit\r\n\r\n"
        .to_vec();
    m.extend_from_slice(&text[..text.len() / 2]);
    m.extend_from_slice(
        b"\r\n--=_b\r\nContent-Type: application/octet-stream\r\nContent-Transfer-Encoding: binary\r\n\r\n",
    );
    m.extend_from_slice(&octets[..octets.len() / 2]);
    m.extend_from_slice(b"\r\n--=_b--\r\n");
    m
}

fn bench(c: &mut Criterion) {
    let text = text();
    let octets = octets();
    let cases = [
        (
            "text/quoted-printable",
            message("text/plain; charset=utf-8", &text),
        ),
        (
            "octets/base64",
            message("application/octet-stream", &octets),
        ),
        ("multipart", multipart(&text, &octets)),
        ("7-bit", message("text/plain", &vec![b'x'; SIZE])),
    ];
    let mut g = c.benchmark_group("mime");
    g.sample_size(10);
    g.warm_up_time(Duration::from_secs(1));
    g.measurement_time(Duration::from_secs(3));
    for (name, m) in &cases {
        g.throughput(Throughput::Bytes(m.len() as u64));
        g.bench_function(format!("seven_bit {name}"), |b| {
            b.iter(|| black_box(seven_bit(black_box(m)).unwrap()))
        });
    }
    g.throughput(Throughput::Bytes(text.len() as u64));
    g.bench_function("baseline quoted_printable::encode", |b| {
        b.iter(|| black_box(quoted_printable::encode(black_box(&text))))
    });
    g.throughput(Throughput::Bytes(octets.len() as u64));
    g.bench_function("baseline base64 encode", |b| {
        b.iter(|| black_box(base64::engine::general_purpose::STANDARD.encode(black_box(&octets))))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
