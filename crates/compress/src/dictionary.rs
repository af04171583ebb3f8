//! Preset dictionaries for deflate (RFC 1950 `FDICT`): text a short message's session stream is
//! likely to repeat, given to the compressor before the first byte so that even a one-message
//! session has history to refer back to.
//!
//! Why: a session stream of one small message has nothing earlier in its 32 KiB window, so
//! deflate codes its headers and the SMTP commands around it almost literally; a 386-byte message
//! still put about 326 bytes on the air. With a dictionary of SMTP protocol text, header field
//! names and the usual shapes of `Received:`, DKIM, MIME and `Authentication-Results:` fields,
//! and common English words, those become back references.
//!
//! How a receiver knows: the zlib header's `FDICT` flag and `DICTID` (the Adler-32 of the
//! dictionary), standard RFC 1950. A decoder that knows the id uses the dictionary
//! ([`DeflateDecoder`](crate::deflate::DeflateDecoder) does so by itself); one that does not
//! reports [`DecompressError::UnknownDictionary`](crate::error::DecompressError), so a peer with
//! another version fails cleanly rather than decoding garbage. Senders use a dictionary only
//! towards a peer that advertised its id (see the hmtp crate).
//!
//! Reproducible: the dictionary is [`build_mail_v1`]'s output, written from this source (not
//! trained on the benchmark corpus); `skywave codec dictionary --out FILE` writes it, and a test
//! checks the embedded copy `data/mail-dict-v1.txt` byte for byte. A new version is a new
//! file and id; old ids stay known so that peers on either version still understand each other.

/// The embedded mail dictionary, version 1 (see the module docs).
pub const MAIL_V1: &[u8] = include_bytes!("../data/mail-dict-v1.txt");

/// Every dictionary this build knows, newest first.
pub const KNOWN: &[&[u8]] = &[MAIL_V1];

/// RFC 1950's Adler-32 of `data`: the `DICTID` of a dictionary.
pub fn adler32(data: &[u8]) -> u32 {
    const MOD: u32 = 65_521;
    let (mut a, mut b) = (1u32, 0u32);
    // 5552 bytes is the most that can be summed before `b` could overflow 32 bits.
    for chunk in data.chunks(5552) {
        for &x in chunk {
            a += u32::from(x);
            b += a;
        }
        a %= MOD;
        b %= MOD;
    }
    (b << 16) | a
}

/// The id (`DICTID`) of [`MAIL_V1`].
pub fn mail_v1_id() -> u32 {
    adler32(MAIL_V1)
}

/// The known dictionary with this id.
pub fn by_id(id: u32) -> Option<&'static [u8]> {
    KNOWN.iter().copied().find(|d| adler32(d) == id)
}

/// Builds the version-1 mail dictionary. Deflate codes a nearer match more cheaply, so the text
/// runs from the least to the most likely: English words, then MIME and header shapes, then the
/// SMTP dialogue of a session (what every session repeats).
pub fn build_mail_v1() -> Vec<u8> {
    let mut d = String::new();
    // The most frequent words of written English (general frequency lists), then common
    // phrases of business mail: text almost any message's body shares.
    d.push_str(
        "people year way day man thing woman life child world school state family student \
         group country problem hand part place case week company system program question work \
         government number night point home water room mother area money story fact month lot \
         right study book eye job word business issue side kind head house service friend \
         father power hour game line end member law car city community name president team \
         minute idea kid body information back parent face others level office door health \
         person art war history party result change morning reason research girl guy moment \
         air teacher force education good new first last long great little own other old \
         right big high different small large next early young important few public bad same \
         able be have do say get make go know take see come think look want give use find \
         tell ask work seem feel try leave call need become put mean keep let begin help \
         talk turn start show hear play run move like live believe hold bring happen write \
         provide sit stand lose pay meet include continue set learn lead understand watch \
         follow stop create speak read allow add spend grow open walk win offer remember \
         consider appear buy wait serve die send expect build stay fall cut reach remain \
         suggest raise pass sell require report decide pull \r\n\
         I hope you are well. I am writing to let you know that we have \
         Could you please check whether the Could you confirm that As discussed, \
         As agreed, Following our conversation, Further to your message, Please find \
         attached the I spoke to on the phone and will need to be before the end of the \
         month. Let me know if you need anything else. Thank you for your help. \
         Many thanks, Kind regards, Best regards, Best wishes, Regards, Thanks, Cheers, \r\n",
    );
    // Maritime operations: what ships and shore stations write about.
    d.push_str(
        "anchorage berth pilot tug chandler customs immigration agent charterer owner \
         bunkers lube oil fresh water provisions stores spare parts repair repaired \
         maintenance inspection survey surveyor certificate class flag state drill safety \
         generator main engine auxiliary pump cooling crane winch hatch cover \
         hull propeller rudder radar gyro compass satellite radio antenna \
         forecast storm swell visibility fog ice routing passage \
         voyage ETA ETD noon report daily weekly monthly log sensor data readings \
         medical crew change sign on sign off shore leave \r\n",
    );
    // Common English words of short business and operational mail.
    d.push_str(
        "please would could should will shall have has had been being were was are is the \
         this that these those there their they them then than with within without from into \
         onto about above after again against all also and any because before below between \
         both but by can did does doing down during each few for further here how just more \
         most no nor not now of off on once only or other our out over own same so some such \
         to too under until up very what when where which while who why you your yours we us \
         today tomorrow yesterday morning afternoon evening week month year time date day \
         thanks thank regards best kind dear hello hi team all please find attached report \
         update information request confirm confirmed schedule arrival departure port harbour \
         ship vessel crew master captain officer engine deck bridge cargo fuel water weather \
         wind sea position course speed knots miles station office agent delivery order \
         invoice payment contract meeting call phone email message mail attachment document \
         file copy sent received expected required available possible necessary following \
         note notice issue problem question answer reply soon as possible let me know if you \
         have any questions, I will send the new ones as soon as they are available. \r\n",
    );
    // MIME structure.
    d.push_str(
        "This is a multi-part message in MIME format.\r\n\
         Content-Type: multipart/mixed;\r\n\tboundary=\"\r\n\
         Content-Type: multipart/alternative;\r\n\tboundary=\"\r\n\
         Content-Type: text/html; charset=UTF-8\r\nContent-Transfer-Encoding: quoted-printable\r\n\
         <!DOCTYPE html>\r\n<html>\r\n<head>\r\n<meta http-equiv=\"Content-Type\" content=\"text/html; charset=UTF-8\">\r\n</head>\r\n<body>\r\n<p></p>\r\n</body>\r\n</html>\r\n\
         Content-Type: application/pdf; name=\"\r\n\
         Content-Type: application/octet-stream; name=\"\r\n\
         Content-Type: image/jpeg; name=\"\r\n\
         Content-Disposition: attachment; filename=\"\r\n\
         Content-Transfer-Encoding: base64\r\n\r\n\
         Content-Type: text/plain; charset=\"us-ascii\"\r\nContent-Transfer-Encoding: 7bit\r\n\
         Content-Type: text/plain; charset=UTF-8; format=flowed\r\nContent-Transfer-Encoding: 7bit\r\n\
         Content-Type: text/plain; charset=UTF-8\r\nContent-Transfer-Encoding: 8bit\r\n\
         MIME-Version: 1.0\r\n",
    );
    // Header fields and the usual shapes of their values.
    d.push_str(
        "Authentication-Results: mx1.;\r\n\tdkim=pass (2048-bit key) header.d= header.s= header.b=;\r\n\
         \tspf=pass smtp.mailfrom=;\r\n\tdmarc=pass (p=quarantine dis=none) header.from=\r\n\
         DKIM-Signature: v=1; a=rsa-sha256; c=relaxed/relaxed; d=;\r\n\ts=; t=;\r\n\
         \th=from:to:subject:date:message-id:mime-version:content-type;\r\n\tbh==;\r\n\tb=\r\n\
         Received: from mail- (mail- [])\r\n\tby mx (Postfix) with ESMTPS id \r\n\tfor <>; \r\n\
         Received: from [] (port-.dyn.) by smtp.\r\n\t(Postfix) with ESMTPSA id ;\r\n\
         User-Agent: Mozilla Thunderbird\r\nX-Mailer: Microsoft Outlook 16.0\r\n\
         Thread-Topic: \r\nThread-Index: \r\nIn-Reply-To: <\r\nReferences: <\r\nReply-To: \r\n\
         Cc: \r\nX-Priority: 3\r\nImportance: normal\r\nMT-Priority: 0\r\n\
         Mon, Tue, Wed, Thu, Fri, Sat, Sun, Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec 2025 2026 2027 \
         +0000 (UTC)\r\n.example.com .example.org .example.net mail. smtp. mx1. mx2.\r\n\
         Subject: Re: Fwd: \r\nDate: \r\nMessage-ID: <\r\nTo: \r\nFrom: \r\n",
    );
    // The SMTP dialogue of an HMTP session, both directions: commands and skywave's replies.
    d.push_str(
        "250-PIPELINING\r\n250-SIZE 10485760\r\n250-8BITMIME\r\n250-ENHANCEDSTATUSCODES\r\n\
         250-MT-PRIORITY\r\n250-HELP\r\n250 HELP\r\n\
         354 End data with <CR><LF>.<CR><LF>\r\n\
         250 2.1.0 Ok\r\n250 2.1.5 Ok\r\n250 2.0.0 Ok: queued as \r\n221 2.0.0 gw. closing connection\r\n\
         Received: from gw.\r\n\tby gw. (skywave) with ESMTP id \r\n\tfor <>; \r\n\
         EHLO gw.\r\nMAIL FROM:<> BODY=8BITMIME SIZE=\r\nRCPT TO:<>\r\nDATA\r\n\r\n.\r\nQUIT\r\n",
    );
    d.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_dictionary_is_the_generated_one() {
        assert!(
            MAIL_V1 == build_mail_v1().as_slice(),
            "crates/compress/data/mail-dict-v1.txt is stale: rewrite it with \
             `skywave codec dictionary --out crates/compress/data/mail-dict-v1.txt`, and give \
             a changed dictionary a new version instead of changing v1"
        );
        // A zlib dictionary is useful up to the 32 KiB window.
        assert!(MAIL_V1.len() < 32 * 1024);
    }

    #[test]
    fn adler32_matches_rfc_1950_examples() {
        assert_eq!(adler32(b""), 1);
        // The classic test vector ("Wikipedia" is 0x11E60398).
        assert_eq!(adler32(b"Wikipedia"), 0x11E6_0398);
        // Long input exercises the deferred modulo.
        let long = vec![0xFFu8; 100_000];
        let (mut a, mut b) = (1u64, 0u64);
        for &x in &long {
            a = (a + u64::from(x)) % 65_521;
            b = (b + a) % 65_521;
        }
        assert_eq!(adler32(&long), ((b << 16) | a) as u32);
    }

    use crate::deflate::{DEFAULT_LEVEL, DeflateDecoder, DeflateEncoder};
    use crate::error::DecompressError;
    use crate::limits::Limits;

    /// The two streams of a one-message HMTP session as skywave writes them.
    fn session(message: &[u8]) -> (Vec<u8>, Vec<u8>) {
        let mut client = format!(
            "EHLO gw.ship.example\r\nMAIL FROM:<alice@ship.example> SIZE={}\r\nRCPT TO:<ops@shore.example>\r\nDATA\r\n",
            message.len()
        )
        .into_bytes();
        client.extend_from_slice(message);
        client.extend_from_slice(b".\r\nQUIT\r\n");
        let server = b"250-gw.shore.example\r\n250-PIPELINING\r\n250-SIZE 10485760\r\n250-8BITMIME\r\n250-ENHANCEDSTATUSCODES\r\n250-MT-PRIORITY\r\n250 HELP\r\n250 2.1.0 Ok\r\n250 2.1.5 Ok\r\n354 End data with <CR><LF>.<CR><LF>\r\n250 2.0.0 Ok: queued as 006B06800600000007624E88\r\n221 2.0.0 gw.shore.example closing connection\r\n".to_vec();
        (client, server)
    }

    fn deflated(text: &[u8], dictionary: Option<&[u8]>) -> Vec<u8> {
        let mut e = match dictionary {
            Some(d) => DeflateEncoder::with_dictionary(DEFAULT_LEVEL, d).unwrap(),
            None => DeflateEncoder::new(DEFAULT_LEVEL),
        };
        e.push(text).unwrap();
        e.flush().unwrap();
        e.take_output()
    }

    #[test]
    fn a_dictionary_stream_round_trips_and_names_its_dictionary() {
        let (client, _) = session(b"Subject: hi\r\n\r\nAll well.\r\n");
        let wire = deflated(&client, Some(MAIL_V1));
        // RFC 1950: CMF 0x78, FLG with FDICT (0x20), then DICTID big-endian.
        assert_eq!(wire[0], 0x78);
        assert_ne!(wire[1] & 0x20, 0);
        assert_eq!(
            u32::from_be_bytes([wire[2], wire[3], wire[4], wire[5]]),
            mail_v1_id()
        );
        let mut d = DeflateDecoder::new(Limits::default());
        // Byte by byte: the header may arrive split across U_PDUs.
        for b in &wire {
            d.feed(std::slice::from_ref(b)).unwrap();
        }
        d.finish().unwrap();
        assert_eq!(d.take_output(), client);
        assert_eq!(d.dictionary(), Some(mail_v1_id()));
    }

    #[test]
    fn a_stream_with_an_unknown_dictionary_is_refused_by_name() {
        let wire = deflated(b"EHLO x\r\n", Some(b"another dictionary, another version"));
        let mut d = DeflateDecoder::new(Limits::default());
        let id = adler32(b"another dictionary, another version");
        assert_eq!(d.feed(&wire), Err(DecompressError::UnknownDictionary(id)));
    }

    /// Issue 12's measure: the bytes of one-message sessions (both directions) for the corpus's
    /// messages under 2 kB, deflate with and without the dictionary. Deterministic (seeded
    /// corpus); `cargo test -p skywave-compress dictionary -- --nocapture` prints the table.
    #[test]
    fn the_dictionary_cuts_short_sessions_by_a_quarter_or_more() {
        let corpus = crate::corpus::standard_corpus(
            crate::corpus::DEFAULT_SEED,
            crate::corpus::DEFAULT_COUNT,
        );
        let (mut n, mut plain, mut without, mut with) = (0usize, 0usize, 0usize, 0usize);
        println!("| message bytes | session plain | deflate | deflate + dictionary v1 | saved |");
        println!("|---:|---:|---:|---:|---:|");
        for m in corpus.iter().filter(|m| m.len() < 2000) {
            let (c, s) = session(m);
            let a = deflated(&c, None).len() + deflated(&s, None).len();
            let b = deflated(&c, Some(MAIL_V1)).len() + deflated(&s, Some(MAIL_V1)).len();
            println!(
                "| {} | {} | {a} | {b} | {:.0} % |",
                m.len(),
                c.len() + s.len(),
                100.0 * (1.0 - b as f64 / a as f64)
            );
            n += 1;
            plain += c.len() + s.len();
            without += a;
            with += b;
        }
        let saved = 1.0 - with as f64 / without as f64;
        println!(
            "| all {n} | {plain} | {without} | {with} | {:.1} % |",
            100.0 * saved
        );
        assert!(n >= 20, "{n} short messages");
        assert!(saved >= 0.25, "saved {:.1} %", 100.0 * saved);
    }

    #[test]
    fn dictionaries_are_found_by_id() {
        assert_eq!(by_id(mail_v1_id()), Some(MAIL_V1));
        assert_eq!(by_id(mail_v1_id() ^ 1), None);
    }
}
