#!/usr/bin/env python3
"""Issue 12's candidates for short mail, measured on the corpus (needs the `zstd` CLI).

One-message HMTP sessions (client stream and server replies, as skywave writes them) for every
corpus message under 2 kB, compressed as each candidate would: deflate as today, deflate and zstd
with skywave's written dictionary (crates/compress/data/mail-dict-v1.txt), and zstd and deflate
with a dictionary of the same size *trained* (`zstd --train`) on another seed of the corpus.
The trained one learns the corpus generator's own names and sentences, so its gain on this
synthetic corpus overstates what it would do on real mail.

Run from the repository root after `cargo build -p skywave`:
    python3 scripts/dictionary-study.py
"""
import glob, os, subprocess, tempfile, zlib

SKYWAVE = "target/debug/skywave"
DICT = "crates/compress/data/mail-dict-v1.txt"
SERVER = (b"250-gw.shore.example\r\n250-PIPELINING\r\n250-SIZE 10485760\r\n250-8BITMIME\r\n"
          b"250-ENHANCEDSTATUSCODES\r\n250-MT-PRIORITY\r\n250 HELP\r\n250 2.1.0 Ok\r\n"
          b"250 2.1.5 Ok\r\n354 End data with <CR><LF>.<CR><LF>\r\n"
          b"250 2.0.0 Ok: queued as 006B06800600000007624E88\r\n"
          b"221 2.0.0 gw.shore.example closing connection\r\n")


def client(m):
    return (b"EHLO gw.ship.example\r\nMAIL FROM:<alice@ship.example> SIZE=%d\r\n"
            b"RCPT TO:<ops@shore.example>\r\nDATA\r\n" % len(m)) + m + b".\r\nQUIT\r\n"


def zstd(data, d=None):
    args = ["zstd", "-19", "-c", "-q", "--no-check"] + (["-D", d] if d else [])
    return len(subprocess.run(args, input=data, capture_output=True, check=True).stdout)


def deflate(data, d=None):
    c = zlib.compressobj(9, zlib.DEFLATED, 15, 9, zlib.Z_DEFAULT_STRATEGY, **({"zdict": d} if d else {}))
    return len(c.compress(data) + c.flush(zlib.Z_SYNC_FLUSH))


def main():
    tmp = tempfile.mkdtemp()
    train, test, samples = (os.path.join(tmp, x) for x in ("train", "test", "samples"))
    subprocess.run([SKYWAVE, "codec", "corpus", "--out", train, "--seed", "1", "--count", "400"],
                   check=True, capture_output=True)
    subprocess.run([SKYWAVE, "codec", "corpus", "--out", test], check=True, capture_output=True)
    os.makedirs(samples)
    for i, f in enumerate(sorted(glob.glob(train + "/*.eml"))):
        m = open(f, "rb").read()
        if len(m) < 4000:
            open(f"{samples}/c{i}", "wb").write(client(m))
            open(f"{samples}/s{i}", "wb").write(SERVER)
    trained = os.path.join(tmp, "trained")
    size = os.path.getsize(DICT)
    subprocess.run(["zstd", "--train", "-q", f"--maxdict={size}", "-o", trained]
                   + glob.glob(samples + "/*"), check=True)
    written, learnt = open(DICT, "rb").read(), open(trained, "rb").read()
    rows = {k: 0 for k in ["plain", "deflate (today)", "zstd -19", "deflate + written v1",
                           "zstd + written v1", "deflate + trained", "zstd + trained"]}
    n = 0
    for f in sorted(glob.glob(test + "/*.eml")):
        m = open(f, "rb").read()
        if len(m) >= 2000:
            continue
        n += 1
        for text in (client(m), SERVER):
            rows["plain"] += len(text)
            rows["deflate (today)"] += deflate(text)
            rows["zstd -19"] += zstd(text)
            rows["deflate + written v1"] += deflate(text, written)
            rows["zstd + written v1"] += zstd(text, DICT)
            rows["deflate + trained"] += deflate(text, learnt)
            rows["zstd + trained"] += zstd(text, trained)
    base = rows["deflate (today)"]
    print(f"{n} one-message sessions (corpus messages under 2 kB), bytes both ways; dictionaries of {size} bytes")
    print("| candidate | bytes | against deflate today |")
    print("|---|---:|---:|")
    for k, v in rows.items():
        print(f"| {k} | {v} | {100.0 * (v / base - 1):+.1f} % |")


if __name__ == "__main__":
    main()
