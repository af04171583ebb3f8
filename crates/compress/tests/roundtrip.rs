//! Round trips of every scheme (random data, random maxbits, random flush points, corpus
//! messages), chunking independence of the LZW encoder, detection, and decompression bombs.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use proptest::prelude::*;
use skywave_compress::corpus;
use skywave_compress::{
    DecompressError, DeflateDecoder, DeflateEncoder, LimitKind, Limits, LzwDecoder, LzwEncoder,
    Scheme, StreamDecoder, StreamEncoder, StreamKind, gzip_compress, gzip_decompress,
};

/// Sends `data` through a stream encoder with flushes after the given cut points, decoding each
/// transmission as it arrives, fed to the decoder in `feed_step`-byte pieces.
fn stream_round_trip(scheme: Scheme, data: &[u8], cuts: &[usize], feed_step: usize) -> Vec<u8> {
    let mut enc = StreamEncoder::for_scheme(scheme).unwrap();
    let mut dec = StreamDecoder::detect(Limits::default());
    let mut got = Vec::new();
    let mut pos = 0;
    let mut points: Vec<usize> = cuts.iter().map(|c| c % (data.len() + 1)).collect();
    points.sort_unstable();
    points.push(data.len());
    for p in points {
        enc.push(&data[pos..p]).unwrap();
        enc.flush().unwrap();
        pos = p;
        let transmission = enc.take_output();
        for piece in transmission.chunks(feed_step.max(1)) {
            dec.feed(piece).unwrap();
        }
        // After each flush everything sent so far is decodable.
        got.extend(dec.take_output());
        assert_eq!(got, &data[..p]);
    }
    dec.finish().unwrap();
    assert_eq!(dec.kind(), scheme.stream_kind());
    got
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn lzw_round_trip(
        data in proptest::collection::vec(any::<u8>(), 0..6000),
        bits in 9u8..=16,
        cuts in proptest::collection::vec(any::<usize>(), 0..8),
        step in 1usize..64,
    ) {
        prop_assert_eq!(stream_round_trip(Scheme::Lzw(bits), &data, &cuts, step), data);
    }

    #[test]
    fn lzw_round_trip_low_entropy(
        data in proptest::collection::vec(prop_oneof![Just(b'a'), Just(b'b'), Just(b'\r'), Just(b'\n')], 0..40_000),
        bits in 9u8..=16,
        cuts in proptest::collection::vec(any::<usize>(), 0..8),
    ) {
        prop_assert_eq!(stream_round_trip(Scheme::Lzw(bits), &data, &cuts, 17), data);
    }

    #[test]
    fn deflate_round_trip(
        data in proptest::collection::vec(any::<u8>(), 0..6000),
        cuts in proptest::collection::vec(any::<usize>(), 0..8),
        step in 1usize..64,
    ) {
        prop_assert_eq!(stream_round_trip(Scheme::Deflate, &data, &cuts, step), data);
    }

    #[test]
    fn gzip_round_trip(data in proptest::collection::vec(any::<u8>(), 0..6000), level in 0u32..=9) {
        let gz = gzip_compress(&data, level).unwrap();
        prop_assert_eq!(gzip_decompress(&gz, Limits::default()).unwrap(), data);
    }

    /// The encoder's bytes depend only on the input and the flush points, not on how the input
    /// was cut into `push` calls.
    #[test]
    fn lzw_output_independent_of_chunking(
        data in proptest::collection::vec(prop_oneof![any::<u8>(), Just(b'e'), Just(b' ')], 0..20_000),
        bits in 9u8..=16,
        sizes in proptest::collection::vec(1usize..300, 1..20),
    ) {
        let mut whole = LzwEncoder::new(bits).unwrap();
        whole.push(&data);
        whole.flush();
        let expected = whole.take_output();

        let mut pieces = LzwEncoder::new(bits).unwrap();
        let mut got = Vec::new();
        let mut pos = 0;
        let mut i = 0;
        while pos < data.len() {
            let n = sizes[i % sizes.len()].min(data.len() - pos);
            pieces.push(&data[pos..pos + n]);
            if i % 3 == 0 {
                got.extend(pieces.take_output());
            }
            pos += n;
            i += 1;
        }
        pieces.flush();
        got.extend(pieces.take_output());
        prop_assert_eq!(got, expected);
    }

    /// Arbitrary bytes never panic any decoder, and never exceed the cap.
    #[test]
    fn decoders_survive_garbage(data in proptest::collection::vec(any::<u8>(), 0..2000)) {
        let limits = Limits::single(1 << 16);
        let mut l = LzwDecoder::new(limits);
        let _ = l.feed(&data);
        prop_assert!(l.output_len() <= 1 << 16);
        let mut d = DeflateDecoder::new(limits);
        let _ = d.feed(&data);
        prop_assert!(d.output_len() <= 1 << 16);
        let _ = gzip_decompress(&data, limits);
        let mut s = StreamDecoder::detect(limits);
        let _ = s.feed(&data);
    }
}

#[test]
fn corpus_messages_round_trip_one_session_per_scheme() {
    let msgs = corpus::standard_corpus(corpus::DEFAULT_SEED, 24);
    for scheme in [
        Scheme::Lzw(9),
        Scheme::Lzw(12),
        Scheme::Lzw(16),
        Scheme::Deflate,
    ] {
        let mut enc = StreamEncoder::for_scheme(scheme).unwrap();
        let mut dec = StreamDecoder::detect(Limits::default());
        for m in &msgs {
            dec.start_message();
            enc.push(m).unwrap();
            enc.flush().unwrap();
            dec.feed(&enc.take_output()).unwrap();
            assert_eq!(&dec.take_output(), m, "{scheme}");
        }
        dec.finish().unwrap();
    }
    for m in &msgs {
        let gz = gzip_compress(m, 9).unwrap();
        assert_eq!(&gzip_decompress(&gz, Limits::default()).unwrap(), m);
    }
}

#[test]
fn session_stream_beats_separate_messages() {
    let msgs = corpus::standard_corpus(corpus::DEFAULT_SEED, 16);
    for scheme in [Scheme::Lzw(16), Scheme::Deflate] {
        let mut separate = 0;
        for m in &msgs {
            let mut e = StreamEncoder::for_scheme(scheme).unwrap();
            e.push(m).unwrap();
            e.flush().unwrap();
            separate += e.take_output().len();
        }
        let mut e = StreamEncoder::for_scheme(scheme).unwrap();
        let mut session = 0;
        for m in &msgs {
            e.push(m).unwrap();
            e.flush().unwrap();
            session += e.take_output().len();
        }
        assert!(session < separate, "{scheme}: {session} >= {separate}");
    }
}

#[test]
fn deflate_stream_framing() {
    let mut e = DeflateEncoder::new(9);
    e.push(b"EHLO ship.example\r\n").unwrap();
    e.flush().unwrap();
    let t1 = e.take_output();
    assert_eq!(t1[0], 0x78);
    let mut d = DeflateDecoder::new(Limits::default());
    d.feed(&t1).unwrap();
    assert_eq!(d.take_output(), b"EHLO ship.example\r\n");
    d.finish().unwrap();
    // Each transmission decodes whole on its own arrival, although a partial flush may leave
    // bits of its empty block to lead the next one.
    let text = corpus::message_of_size(1, 5000).unwrap();
    let mut sent = Vec::new();
    for (i, part) in text.chunks(700).enumerate() {
        e.push(part).unwrap();
        e.flush().unwrap();
        let t = e.take_output();
        assert!(!t.is_empty(), "transmission {i}");
        d.feed(&t).unwrap();
        sent.extend_from_slice(part);
        assert_eq!(d.take_output(), part, "transmission {i}");
    }
    // A transmission cut in the middle gives a prefix of its text, never a wrong byte.
    e.push(&text).unwrap();
    e.flush().unwrap();
    let t2 = e.take_output();
    d.feed(&t2[..t2.len() / 2]).unwrap();
    let got = d.take_output();
    assert!(
        got.len() < text.len() && text.starts_with(&got),
        "{}",
        got.len()
    );
    d.finish().unwrap();
}

#[test]
fn a_partial_flush_costs_less_than_a_sync_flush() {
    // The sync flush's empty stored block is 4-5 bytes; the partial flush's 10-bit block at
    // most 2 (module docs of skywave_compress::deflate).
    let text = b"EHLO ship.example\r\nMAIL FROM:<a@b.example>\r\n";
    let mut ours = DeflateEncoder::new(9);
    ours.push(text).unwrap();
    ours.flush().unwrap();
    let mut sync = flate2::Compress::new(flate2::Compression::new(9), true);
    let mut out = Vec::with_capacity(1024);
    sync.compress_vec(text, &mut out, flate2::FlushCompress::Sync)
        .unwrap();
    assert!(out.ends_with(&[0, 0, 0xff, 0xff]));
    let saved = out.len() - ours.output_len();
    assert!(
        (3..=5).contains(&saved),
        "{} against {}",
        ours.output_len(),
        out.len()
    );
}

#[test]
fn deflate_rejects_garbage_and_trailing_data() {
    let mut d = DeflateDecoder::new(Limits::default());
    assert!(matches!(
        d.feed(&[0x78, 0x00, 1, 2, 3]),
        Err(DecompressError::Zlib(_))
    ));
    // A finished zlib stream followed by more bytes.
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    std::io::Write::write_all(&mut z, b"hello").unwrap();
    let mut done = z.finish().unwrap();
    done.extend_from_slice(b"xyz");
    let mut d = DeflateDecoder::new(Limits::default());
    assert_eq!(d.feed(&done), Err(DecompressError::ZlibTrailingData(3)));
}

#[test]
fn gzip_errors_are_clear() {
    let gz = gzip_compress(b"CFTP mail-file\n", 9).unwrap();
    assert_eq!(&gz[..2], &[0x1f, 0x8b]);
    assert!(matches!(
        gzip_decompress(&[], Limits::default()),
        Err(DecompressError::Gzip(_))
    ));
    assert!(matches!(
        gzip_decompress(b"hello", Limits::default()),
        Err(DecompressError::Gzip(_))
    ));
    // Truncated.
    assert!(matches!(
        gzip_decompress(&gz[..gz.len() - 3], Limits::default()),
        Err(DecompressError::Gzip(_))
    ));
    // Bad CRC.
    let mut bad = gz.clone();
    let n = bad.len();
    bad[n - 6] ^= 0xff;
    assert!(matches!(
        gzip_decompress(&bad, Limits::default()),
        Err(DecompressError::Gzip(_))
    ));
    // Concatenated members are one file (RFC 1952).
    let mut two = gz.clone();
    two.extend(gzip_compress(b"second\n", 1).unwrap());
    assert_eq!(
        gzip_decompress(&two, Limits::default()).unwrap(),
        b"CFTP mail-file\nsecond\n"
    );
    // Trailing garbage after a member.
    let mut trailing = gz.clone();
    trailing.extend_from_slice(b"junk");
    assert!(gzip_decompress(&trailing, Limits::default()).is_err());
}

#[test]
fn detection_and_expected_scheme() {
    let mut enc = StreamEncoder::for_scheme(Scheme::Lzw(12)).unwrap();
    enc.push(b"HELO a\r\n").unwrap();
    enc.flush().unwrap();
    let lzw = enc.take_output();
    let mut d = StreamDecoder::expecting(StreamKind::Zlib, Limits::default());
    assert!(matches!(
        d.feed(&lzw),
        Err(DecompressError::SchemeMismatch { .. })
    ));
    let mut d = StreamDecoder::detect(Limits::default());
    d.feed(&lzw).unwrap();
    assert_eq!(d.kind(), Some(StreamKind::Lzw));
    assert_eq!(d.lzw_maxbits(), Some(12));
    let mut d = StreamDecoder::detect(Limits::default());
    d.feed(b"EHLO ship\r\n").unwrap();
    assert_eq!(d.kind(), Some(StreamKind::Plain));
    assert_eq!(d.take_output(), b"EHLO ship\r\n");
    let mut d = StreamDecoder::detect(Limits::default());
    assert!(matches!(
        d.feed(&[0xff, 0]),
        Err(DecompressError::Detect(_))
    ));
    assert!(StreamEncoder::for_scheme(Scheme::Gzip).is_err());
}

/// 64 MiB of zeros compresses to a few kilobytes in every scheme; a 1 MiB cap stops each
/// decoder with a clear error and bounded memory.
#[test]
fn bombs_hit_the_cap() {
    let zeros = vec![0u8; 64 << 20];
    let cap = 1 << 20;
    let limits = Limits::single(cap);
    let expected = DecompressError::LimitExceeded {
        kind: LimitKind::Stream,
        limit: cap,
    };

    for bits in [9u8, 12, 16] {
        let mut e = LzwEncoder::new(bits).unwrap();
        e.push(&zeros[..16 << 20]);
        e.flush();
        let bomb = e.take_output();
        let mut d = LzwDecoder::new(limits);
        assert_eq!(d.feed(&bomb), Err(expected.clone()), "lzw{bits}");
        assert!(d.output_len() as u64 <= cap);
    }

    let mut e = DeflateEncoder::new(9);
    e.push(&zeros).unwrap();
    e.flush().unwrap();
    let bomb = e.take_output();
    assert!(bomb.len() < 100_000);
    let mut d = DeflateDecoder::new(limits);
    assert_eq!(d.feed(&bomb), Err(expected.clone()));
    assert!(d.output_len() as u64 <= cap);

    let gz = gzip_compress(&zeros, 9).unwrap();
    assert!(gz.len() < 100_000);
    assert_eq!(gzip_decompress(&gz, limits), Err(expected.clone()));

    let mut d = StreamDecoder::detect(limits);
    assert_eq!(d.feed(&bomb), Err(expected));

    // The per-message cap is separate, and restarts with each message.
    let mut e = DeflateEncoder::new(9);
    let mut d = DeflateDecoder::new(Limits {
        max_stream_bytes: u64::MAX,
        max_message_bytes: 100_000,
    });
    for _ in 0..5 {
        d.start_message();
        e.push(&zeros[..90_000]).unwrap();
        e.flush().unwrap();
        d.feed(&e.take_output()).unwrap();
    }
    e.push(&zeros[..100_001]).unwrap();
    e.flush().unwrap();
    d.start_message();
    assert_eq!(
        d.feed(&e.take_output()),
        Err(DecompressError::LimitExceeded {
            kind: LimitKind::Message,
            limit: 100_000
        })
    );
}
