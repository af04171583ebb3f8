//! `skywave codec` end to end: runs the real `skywave` binary on stdin/stdout and files.
//!
//! The binary is located (and built when missing) by `skywave_e2e::bin`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

fn skywave() -> PathBuf {
    skywave_e2e::bin("skywave")
}

fn run(args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(skywave())
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    let data = stdin.to_vec();
    let writer = std::thread::spawn(move || {
        // The child may exit early on bad input; a broken pipe is fine then.
        let _ = input.write_all(&data);
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    out
}

fn ok(args: &[&str], stdin: &[u8]) -> Vec<u8> {
    let out = run(args, stdin);
    assert!(
        out.status.success(),
        "skywave {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> Self {
        let p =
            std::env::temp_dir().join(format!("skywave-codec-cli-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn compress_decompress_round_trip_every_scheme() {
    let dir = TempDir::new("rt");
    let out = dir.0.join("corpus");
    let msg = ok(
        &[
            "codec",
            "corpus",
            "--out",
            out.to_str().unwrap(),
            "--count",
            "4",
        ],
        b"",
    );
    assert!(String::from_utf8_lossy(&msg).contains("wrote 4 messages"));
    let mut files: Vec<PathBuf> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert_eq!(files.len(), 4);
    let text: Vec<u8> = files
        .iter()
        .flat_map(|f| std::fs::read(f).unwrap())
        .collect();

    for scheme in ["lzw9", "lzw12", "lzw16", "deflate", "gzip"] {
        let mut args = vec!["codec", "compress", "--scheme", scheme];
        if scheme != "gzip" {
            args.extend(["--flush-every", "1000"]);
        }
        let packed = ok(&args, &text);
        assert!(packed.len() < text.len(), "{scheme}");
        assert_eq!(
            ok(&["codec", "decompress"], &packed),
            text,
            "{scheme} detected"
        );
        assert_eq!(
            ok(&["codec", "decompress", "--scheme", scheme], &packed),
            text,
            "{scheme} checked"
        );
    }

    // A scheme other than the stream's is refused with a clear message.
    let lzw9 = ok(&["codec", "compress", "--scheme", "lzw9"], &text);
    let out = run(&["codec", "decompress", "--scheme", "lzw12"], &lzw9);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("expected lzw12"));
    let out = run(&["codec", "decompress", "--scheme", "deflate"], &lzw9);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("expected zlib"));

    // The stats table covers every scheme and the session stream.
    let mut args = vec!["codec", "stats"];
    let names: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
    args.extend(names.iter().map(String::as_str));
    let table = String::from_utf8(ok(&args, b"")).unwrap();
    for needle in [
        "lzw9",
        "lzw12",
        "lzw16",
        "deflate",
        "gzip",
        "one session stream",
        "msg-004.eml",
    ] {
        assert!(table.contains(needle), "{needle} missing from:\n{table}");
    }
    args.push("--markdown");
    let md = String::from_utf8(ok(&args, b"")).unwrap();
    assert!(md.contains("| per message, median ratio |"), "{md}");
}

#[test]
fn reference_vector_and_bad_input() {
    // Reference section 3.3, first vector, byte for byte through the CLI.
    let out = ok(
        &["codec", "compress", "--scheme", "lzw12"],
        b"TOBEORNOTTOBEORTOBEORNOT",
    );
    assert_eq!(
        out,
        [
            0x03, 0x0c, 0x54, 0x9e, 0x08, 0x29, 0xf2, 0x44, 0x8a, 0x93, 0x27, 0x54, 0x04, 0x12,
            0x34, 0xb8, 0xb0, 0xe0, 0xc1, 0x84
        ]
    );
    let bad = run(&["codec", "decompress"], &[0xff, 0x00, 0x01]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("unknown stream scheme"));
    let bomb = ok(
        &["codec", "compress", "--scheme", "deflate"],
        &vec![0u8; 4 << 20],
    );
    let capped = run(&["codec", "decompress", "--max-output", "100000"], &bomb);
    assert!(!capped.status.success());
    assert!(String::from_utf8_lossy(&capped.stderr).contains("limit of 100000 bytes"));
    let gz = run(
        &[
            "codec",
            "compress",
            "--scheme",
            "gzip",
            "--flush-every",
            "10",
        ],
        b"x",
    );
    assert!(!gz.status.success());
}
