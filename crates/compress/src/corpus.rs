//! A reproducible synthetic mail corpus for tests and benchmarks.
//!
//! Every message is generated from a seed by a small SplitMix64 generator of our own (so the bytes
//! never change with a dependency's version), and looks like Internet mail as it is carried today:
//! chains of `Received:` headers, `DKIM-Signature`, `Authentication-Results`, `Message-ID`, `Date`,
//! MIME multipart/alternative with an HTML twin of the text, multipart/mixed with base64
//! attachments (text-like and binary-like), and English prose bodies recombined from original
//! fragments written for this module. Lines end in CRLF, as on the SMTP wire.
//!
//! - [`standard_corpus`]: a set of messages whose sizes span 300 bytes to 150 kB, biased towards
//!   the small messages that dominate real mail;
//! - [`message_of_size`]: one message of an exact size (the Isode benchmark needs 386, 1867,
//!   14025 and 135604 bytes, see [`ISODE_SIZES`]);
//! - [`message_with_text_attachment`]: a mail carrying a text file of an exact size (NTIA's 1024
//!   and 51200 bytes, see [`NTIA_ATTACHMENT_SIZES`]).

use std::fmt::Write as _;

/// The seed used by `skywave codec corpus` and the benchmarks unless told otherwise.
pub const DEFAULT_SEED: u64 = 0x5EED_5EED;
/// Number of messages in the standard corpus used by the benchmarks and the README table.
pub const DEFAULT_COUNT: usize = 64;
/// Message sizes (bytes) of Isode's SMTP-over-IP-over-HF measurements.
pub const ISODE_SIZES: [usize; 4] = [386, 1867, 14025, 135604];
/// Attachment sizes (bytes) of the NTIA JNOS measurements.
pub const NTIA_ATTACHMENT_SIZES: [usize; 2] = [1024, 51200];
/// Smallest message [`message_of_size`] can make (no display names, minimal headers and a short line of text).
pub const MIN_MESSAGE_SIZE: usize = 300;
/// Smallest size in the standard corpus.
pub const STANDARD_MIN_SIZE: usize = 300;
/// Largest size in the standard corpus.
pub const STANDARD_MAX_SIZE: usize = 150_000;

/// A requested message size cannot be met.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot make a {requested}-byte message: the smallest is {MIN_MESSAGE_SIZE} bytes")]
pub struct CorpusError {
    /// The size asked for.
    pub requested: usize,
}

/// How a message's body is built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// One text/plain part.
    Plain,
    /// multipart/alternative: text/plain and an HTML rendering of the same text.
    Alternative,
    /// multipart/mixed: text and a base64 text attachment (a log or report).
    TextAttachment,
    /// multipart/mixed: text and a base64 binary-like attachment (mostly incompressible).
    BinaryAttachment,
}

/// How [`message_with_text_attachment`] encodes the attached file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttachmentEncoding {
    /// As is, `Content-Transfer-Encoding: 7bit` (as 1990s mail carried text files).
    SevenBit,
    /// base64, as today's mail user agents send any attachment.
    Base64,
}

/// SplitMix64: tiny, fast and fixed forever, which is what a reproducible corpus needs.
#[derive(Debug, Clone)]
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Rng(seed ^ 0x6A09_E667_F3BC_C908)
    }

    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0); the modulo bias is irrelevant here.
    fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % (n.max(1) as u64)) as usize
    }

    fn range(&mut self, lo: usize, hi_inclusive: usize) -> usize {
        lo + self.below(hi_inclusive - lo + 1)
    }

    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }

    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items.get(self.below(items.len())).copied().unwrap_or("")
    }

    fn fork(&mut self) -> Rng {
        Rng(self.next_u64())
    }
}

const FIRST_NAMES: &[&str] = &[
    "Anna", "Ben", "Carla", "David", "Elena", "Farid", "Grace", "Hugo", "Ingrid", "James", "Kofi",
    "Laura", "Mateo", "Nadia", "Oscar", "Priya", "Quentin", "Rosa", "Samuel", "Tomas", "Ursula",
    "Victor", "Wen", "Yusuf", "Zoe", "Martin", "Helen", "Peter", "Sofia", "Liam",
];
const LAST_NAMES: &[&str] = &[
    "Andersen",
    "Brooks",
    "Castillo",
    "Dimitrov",
    "Eriksen",
    "Fischer",
    "Garcia",
    "Haddad",
    "Ivanova",
    "Jensen",
    "Kowalski",
    "Lindqvist",
    "Moreau",
    "Novak",
    "Okafor",
    "Petrov",
    "Quinn",
    "Rossi",
    "Schmidt",
    "Tanaka",
    "Umarov",
    "Varga",
    "Walsh",
    "Xavier",
    "Young",
    "Zeller",
];
const DOMAINS: &[&str] = &[
    "northwind-shipping.example",
    "harbourline.example",
    "meridian-marine.example",
    "coastguard-ops.example",
    "polar-research.example",
    "mail.bluewater.example",
    "fleet.seaways.example",
    "relief-logistics.example",
];
const PROVIDERS: &[&str] = &[
    "mailrelay.example",
    "outbound.mx.example",
    "smtp-out.example",
];
const MAILERS: &[&str] = &[
    "Mozilla Thunderbird 128.3.1",
    "Microsoft Outlook 16.0",
    "Apple Mail (2.3776)",
    "Roundcube Webmail/1.6.9",
    "Evolution 3.52.4",
];
const PORTS: &[&str] = &[
    "Bergen",
    "Rotterdam",
    "Valparaiso",
    "Reykjavik",
    "Cape Town",
    "Halifax",
    "Dakar",
    "Darwin",
    "Tromso",
    "Lisbon",
    "Mombasa",
    "Punta Arenas",
];
const VESSELS: &[&str] = &[
    "Aurora Borealis",
    "Sea Lark",
    "Northern Light",
    "Kestrel",
    "Albatross",
    "Polar Star",
    "Marlin",
    "Hope of Dawn",
];
const DAYS: &[&str] = &[
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
];

const SUBJECTS: &[&str] = &[
    "Crew change at {port}",
    "Re: Spare parts for the generator",
    "Weekly position report",
    "Fuel figures for {day}",
    "Re: Re: Schedule for the {port} call",
    "Weather routing update",
    "Fwd: Customs paperwork",
    "Minutes of {day}'s safety meeting",
    "Radio check results",
    "Re: Provisions order",
    "Photos from the {vessel}",
    "Maintenance plan, next quarter",
    "Question about the invoice",
    "Re: Shore leave",
    "Sensor data from station 4",
];

const GREETINGS: &[&str] = &[
    "Hi {first},",
    "Dear {first},",
    "Hello all,",
    "Good morning {first},",
    "{first},",
    "Hi team,",
];
const CLOSINGS: &[&str] = &[
    "Best regards,",
    "Thanks,",
    "Kind regards,",
    "Cheers,",
    "All the best,",
    "Regards,",
];

/// Original sentences, recombined into paragraphs. Placeholders: {first} {name} {port} {vessel}
/// {day} {num} {time}.
const SENTENCES: &[&str] = &[
    "We left {port} a little after {time} and the swell has been kinder than the forecast promised.",
    "The port agent confirmed that the berth will be free on {day}, although the pilot may be late.",
    "Could you check whether the spare impeller for the cooling pump was ever shipped?",
    "I have attached the figures from the last watch, with the fuel consumption broken down by engine.",
    "The generator on the port side tripped twice during the night, both times under light load.",
    "As far as we can tell the fault is in the voltage regulator rather than the alternator itself.",
    "Please let {first} know that the crew list has changed and the new one is at the bottom of this mail.",
    "Our average speed since the last report is close to {num} knots, which keeps us on schedule.",
    "The radio link was poor this morning, so this message may arrive later than usual.",
    "If the weather holds we should reach the anchorage before dark on {day}.",
    "The cook asks whether fresh vegetables can be delivered with the rest of the provisions.",
    "We ran the fire drill on {day} and it went well, apart from one stiff valve on deck three.",
    "I would rather not change the schedule again unless the charterer insists on it.",
    "The survey team finished the second transect and the samples are stored in the cold room.",
    "Thank you for the quick answer yesterday; it saved us a long discussion on board.",
    "There is still no word from customs about the paperwork we sent last week.",
    "The barometer has been falling slowly since noon and the wind has backed to the south west.",
    "We will keep a listening watch on the usual frequency every evening at {time} UTC.",
    "{name} has agreed to take over the night watch until the second officer is fit again.",
    "The new software on the navigation computer needs a licence key, which nobody seems to have.",
    "I have asked the chief engineer to write a short note on the repairs for the insurers.",
    "Nothing urgent here, but I wanted you to have the numbers before the weekly call.",
    "The satellite terminal is still out of service, so the HF radio is our only link for now.",
    "Would it be possible to move the crew change to {port} instead?",
    "The children send their love and say the garden is full of snow again.",
    "Please find the updated maintenance plan below; the changes are marked with an asterisk.",
    "We used about {num} tonnes of fuel since {day}, a little more than planned because of the head sea.",
    "The hatch covers were inspected and two seals will have to be replaced at the next port.",
    "I spoke to {name} on the phone and the invoice will be corrected before the end of the month.",
    "The ice charts show open water to the north, but the forecasters are not confident about it.",
    "Everyone on board is well, and morale is good despite the long passage.",
    "We still need a signed copy of the contract before the cargo can be released.",
    "The water maker is producing less than usual, probably because the membranes are getting old.",
    "I suggest we order the parts now and have them waiting for us in {port}.",
    "Let me know if you need anything else from our side before the meeting on {day}.",
    "The data logger on station four stopped writing at {time} and restarted by itself an hour later.",
    "We have started to send the daily reports in a shorter format to save air time.",
    "Air time on the radio is precious, so please keep replies short and leave out the quoted text.",
    "The medical kit was checked against the list and everything is in date except two bandages.",
    "A fishing fleet is working close to our route, so we will keep a sharp lookout tonight.",
    "The harbour master asked for our arrival time again; I gave him {time} local time.",
    "There was a short power cut in the laboratory, but the freezers stayed below the limit.",
    "I am forwarding the message from the agency because it concerns the whole crew.",
    "We would appreciate it if the next delivery could include printer paper and coffee.",
    "The engine room temperatures are back to normal after the cleaning of the heat exchanger.",
    "The draft readings at departure were slightly different from the ones in the loading plan.",
    "It took three attempts to connect this morning, but the mail went through at the end.",
    "As discussed, the annual inspection will take place during the stay in {port}.",
    "{first}, could you confirm that the revised budget has been approved by the office?",
    "The deck crew repainted the railings on the starboard side while the weather was calm.",
    "Our position at noon was about {num} miles west of the light, steering south by east.",
    "The wind instrument on the mast is giving odd readings and will need to be recalibrated.",
    "A small leak in the hydraulic line of the crane has been repaired with a temporary clamp.",
    "I will call you on the satellite phone as soon as it works again.",
    "The scientists ask for another day at the station to repeat the measurements.",
    "All certificates are valid for at least six more months, so nothing needs renewing yet.",
    "The pilot boarded at {time} and we were alongside less than two hours later.",
    "The stores list is attached; the items in the second column are the urgent ones.",
    "We saw a pod of whales this afternoon, which was a welcome change from the grey sea.",
    "Please remember that all mail to the ship goes over the radio and large files will wait.",
    "The backup battery bank was tested under load and held for just over {num} minutes.",
    "I have not heard from {name} since {day}, so I assume the plan has not changed.",
    "Could the office send the new charts as soon as they are available?",
    "The noon report is below, in the same format as last week.",
    "Visibility dropped to less than a mile for most of the morning watch.",
    "The second engineer will leave the ship in {port} and fly home the next day.",
    "There is a problem with the galley extractor fan, and it is getting noisy.",
    "We have plenty of fresh water but the diesel reserve is lower than I would like.",
    "Thank you all for the hard work during the storm; the ship came through without damage.",
    "The samples for the laboratory ashore are packed and labelled for the next port.",
    "If the link stays this poor we may have to hold the routine traffic until tomorrow.",
    "I have updated the contact list and removed the people who have left the company.",
    "The trial of the new antenna was promising, with clearer signals on the lower bands.",
    "Please treat the attached report as confidential until it has been reviewed.",
    "We expect to stay in port for about {num} hours, depending on the cargo work.",
    "The tug was booked for {time}, but the agent says it may come earlier.",
    "Someone on the night watch saw lights to the north that did not show on the radar.",
    "It would help if future messages kept attachments small, as each one costs minutes on air.",
];

const HEADLINES: &[&str] = &[
    "NOON REPORT",
    "FUEL",
    "CREW",
    "MAINTENANCE",
    "WEATHER",
    "CARGO",
    "STORES",
    "REMARKS",
];

fn fill(template: &str, rng: &mut Rng) -> String {
    let mut out = String::with_capacity(template.len() + 16);
    let mut rest = template;
    while let Some(start) = rest.find('{') {
        out.push_str(&rest[..start]);
        let after = &rest[start..];
        let Some(end) = after.find('}') else {
            out.push_str(after);
            return out;
        };
        let key = &after[1..end];
        match key {
            "first" => out.push_str(rng.pick(FIRST_NAMES)),
            "name" => {
                let f = rng.pick(FIRST_NAMES);
                let l = rng.pick(LAST_NAMES);
                let _ = write!(out, "{f} {l}");
            }
            "port" => out.push_str(rng.pick(PORTS)),
            "vessel" => out.push_str(rng.pick(VESSELS)),
            "day" => out.push_str(rng.pick(DAYS)),
            "num" => {
                let n = rng.range(3, 240);
                let _ = write!(out, "{n}");
            }
            "time" => {
                let h = rng.below(24);
                let m = rng.below(12) * 5;
                let _ = write!(out, "{h:02}{m:02}");
            }
            other => {
                out.push('{');
                out.push_str(other);
                out.push('}');
            }
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    out
}

/// Wraps words into CRLF lines of at most `width` characters.
fn wrap(text: &str, width: usize, prefix: &str, out: &mut String) {
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.len() + 1 + word.len() > width {
            out.push_str(prefix);
            out.push_str(&line);
            out.push_str("\r\n");
            line.clear();
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        out.push_str(prefix);
        out.push_str(&line);
        out.push_str("\r\n");
    }
}

fn paragraph(rng: &mut Rng) -> String {
    let n = rng.range(2, 6);
    let mut p = String::new();
    for i in 0..n {
        if i > 0 {
            p.push(' ');
        }
        let s = rng.pick(SENTENCES);
        p.push_str(&fill(s, rng));
    }
    p
}

/// Mail-body text of any length: a greeting and as many paragraphs (sometimes with a structured
/// report block) as needed, then a closing, often a signature and sometimes a quoted earlier
/// message. The body is cut mid-sentence to the exact length and the ending appended.
struct ProseStream {
    rng: Rng,
    buf: String,
    tail: String,
}

impl ProseStream {
    fn new(mut rng: Rng) -> Self {
        let greeting = fill(rng.pick(GREETINGS), &mut rng);
        let buf = format!("{greeting}\r\n\r\n");
        let mut tail = String::from("\r\n");
        let closing = rng.pick(CLOSINGS);
        let first = rng.pick(FIRST_NAMES);
        let last = rng.pick(LAST_NAMES);
        let _ = write!(tail, "{closing}\r\n{first}\r\n");
        if rng.chance(60) {
            let vessel = rng.pick(VESSELS);
            let _ = write!(
                tail,
                "\r\n-- \r\n{first} {last}\r\nMaster, MV {vessel}\r\nHF mail only, please keep messages short\r\n"
            );
        }
        if rng.chance(30) {
            let day = rng.pick(DAYS);
            let f = rng.pick(FIRST_NAMES);
            let l = rng.pick(LAST_NAMES);
            let _ = write!(tail, "\r\nOn {day}, {f} {l} wrote:\r\n");
            let quoted = rng.range(1, 3);
            for i in 0..quoted {
                if i > 0 {
                    tail.push_str(">\r\n");
                }
                let p = paragraph(&mut rng);
                wrap(&p, 70, "> ", &mut tail);
            }
        }
        ProseStream { rng, buf, tail }
    }

    /// At least `n` bytes of greeting and paragraphs.
    fn body(&mut self, n: usize) -> &str {
        // Each round adds a paragraph, so this ends.
        while self.buf.len() < n {
            let p = paragraph(&mut self.rng);
            wrap(&p, 72, "", &mut self.buf);
            self.buf.push_str("\r\n");
            if self.rng.chance(15) {
                report_block(&mut self.rng, &mut self.buf);
                self.buf.push_str("\r\n");
            }
        }
        &self.buf
    }

    /// Exactly `n` bytes of text ending in CRLF (n >= 2).
    fn exact(&mut self, n: usize) -> Vec<u8> {
        let tail = if n >= self.tail.len() + 64 {
            self.tail.clone()
        } else {
            String::new()
        };
        let body_len = n - tail.len();
        let mut text = self.body(body_len).as_bytes()[..body_len].to_vec();
        end_with_crlf(&mut text);
        text.extend_from_slice(tail.as_bytes());
        text
    }
}

fn report_block(rng: &mut Rng, out: &mut String) {
    let head = rng.pick(HEADLINES);
    let _ = write!(out, "{head}\r\n");
    let lines = rng.range(3, 8);
    for _ in 0..lines {
        let lat = rng.range(10, 70);
        let latm = rng.range(0, 59);
        let lon = rng.range(1, 170);
        let lonm = rng.range(0, 59);
        let kn = rng.range(40, 160);
        let fuel = rng.range(80, 600);
        let h = rng.below(24);
        let _ = write!(
            out,
            "{h:02}00Z  POS {lat:02}{latm:02}N {lon:03}{lonm:02}W  SOG {}.{} KN  FUEL {fuel} T  WIND {} {}\r\n",
            kn / 10,
            kn % 10,
            rng.pick(&["N", "NE", "E", "SE", "S", "SW", "W", "NW"]),
            rng.range(1, 9),
        );
    }
}

/// `len` pseudo-random bytes from `seed`: what no compression shrinks (a chart, a photo, an
/// encrypted file), for the tests and benchmarks that need mail whose size is its airtime.
pub fn noise(seed: u64, len: usize) -> Vec<u8> {
    let mut rng = Rng::new(seed ^ 0x004E_015E);
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        out.extend_from_slice(&rng.next_u64().to_le_bytes());
    }
    out.truncate(len);
    out
}

/// A text file of exactly `len` bytes (CRLF lines; the last line is cut at the size): a position
/// and engine log with remarks, like the reports ships attach.
pub fn text_attachment(seed: u64, len: usize) -> Vec<u8> {
    let mut rng = Rng::new(seed ^ 0x7E57);
    let mut s = String::with_capacity(len + 256);
    s.push_str("SHIP REPORT LOG\r\nGenerated by the bridge logging system\r\n\r\n");
    // Each round adds text, so this ends.
    while s.len() < len {
        if rng.chance(25) {
            let p = paragraph(&mut rng);
            wrap(&p, 72, "", &mut s);
            s.push_str("\r\n");
        } else {
            report_block(&mut rng, &mut s);
            s.push_str("\r\n");
        }
    }
    let mut bytes = s.into_bytes();
    bytes.truncate(len);
    end_with_crlf(&mut bytes);
    bytes
}

/// Makes the last two bytes CRLF (for len >= 2) without changing the length, and never leaves a
/// bare CR.
fn end_with_crlf(bytes: &mut [u8]) {
    let n = bytes.len();
    if n >= 2 {
        bytes[n - 2] = b'\r';
        bytes[n - 1] = b'\n';
        if n >= 3 && bytes[n - 3] == b'\r' {
            bytes[n - 3] = b'.';
        }
    } else if n == 1 {
        bytes[0] = b'\n';
    }
}

/// Bytes that look like a compressed image or document: mostly random, with some structured
/// runs, so deflate gains little on them, as on real attachments.
fn binary_blob(rng: &mut Rng, len: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(len + 64);
    v.extend_from_slice(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR");
    // Each round adds at least one byte, so this ends.
    while v.len() < len {
        if rng.chance(85) {
            let n = rng.range(64, 1024);
            for _ in 0..n / 8 {
                v.extend_from_slice(&rng.next_u64().to_le_bytes());
            }
        } else {
            let b = (rng.next_u64() & 0xFF) as u8;
            let n = rng.range(8, 200);
            v.extend(std::iter::repeat_n(b, n));
        }
    }
    v.truncate(len);
    v
}

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// base64 in lines of 76 characters with CRLF, as MIME requires.
fn base64_lines(data: &[u8], out: &mut String) {
    let mut col = 0;
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        let chars = [
            B64[(n >> 18) as usize & 63],
            B64[(n >> 12) as usize & 63],
            if chunk.len() > 1 {
                B64[(n >> 6) as usize & 63]
            } else {
                b'='
            },
            if chunk.len() > 2 {
                B64[n as usize & 63]
            } else {
                b'='
            },
        ];
        for c in chars {
            out.push(char::from(c));
        }
        col += 4;
        if col == 76 {
            out.push_str("\r\n");
            col = 0;
        }
    }
    if col != 0 {
        out.push_str("\r\n");
    }
}

fn random_b64(rng: &mut Rng, n: usize) -> String {
    (0..n).map(|_| char::from(B64[rng.below(64)])).collect()
}

fn token(rng: &mut Rng, n: usize) -> String {
    const ALNUM: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ";
    (0..n)
        .map(|_| char::from(ALNUM[rng.below(ALNUM.len())]))
        .collect()
}

/// RFC 5322 date for a Unix time (UTC).
fn rfc5322_date(t: u64) -> String {
    let days = t / 86_400;
    let secs = t % 86_400;
    // Civil-from-days (proleptic Gregorian), after H. Hinnant's well-known algorithm.
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    let wd = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"][(days % 7) as usize];
    let mon = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ][(m - 1) as usize];
    format!(
        "{wd}, {d} {mon} {y} {:02}:{:02}:{:02} +0000",
        secs / 3600,
        secs % 3600 / 60,
        secs % 60
    )
}

fn ip(rng: &mut Rng) -> String {
    format!(
        "{}.{}.{}.{}",
        rng.range(11, 223),
        rng.below(256),
        rng.below(256),
        rng.range(1, 254)
    )
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum HeaderLevel {
    Bare,
    Minimal,
    Medium,
    Full,
}

struct Party {
    name: String,
    addr: String,
    domain: &'static str,
}

fn party(rng: &mut Rng) -> Party {
    let f = rng.pick(FIRST_NAMES);
    let l = rng.pick(LAST_NAMES);
    let domain = rng.pick(DOMAINS);
    Party {
        name: format!("{f} {l}"),
        addr: format!(
            "{}.{}@{domain}",
            f.to_ascii_lowercase(),
            l.to_ascii_lowercase()
        ),
        domain,
    }
}

/// The header block (ending in the blank line) for a message with the given content headers.
fn headers(rng: &mut Rng, level: HeaderLevel, content: &str) -> String {
    let from = party(rng);
    let to = party(rng);
    let t = 1_735_689_600 + rng.below(330 * 86_400) as u64;
    let date = rfc5322_date(t);
    let mut h = String::new();
    if level >= HeaderLevel::Medium {
        let _ = write!(h, "Return-Path: <{}>\r\n", from.addr);
        let hops = if level == HeaderLevel::Full {
            rng.range(2, 4)
        } else {
            1
        };
        let mut hop_t = t + rng.range(2, 40) as u64;
        for hop in 0..hops {
            let qid = token(rng, 12);
            let when = rfc5322_date(hop_t);
            if hop + 1 == hops {
                let _ = write!(
                    h,
                    "Received: from [{}] (port-{}.dyn.{}) by smtp.{}\r\n\t(Postfix) with ESMTPSA id {qid};\r\n\t{when}\r\n",
                    ip(rng),
                    rng.range(1000, 65000),
                    from.domain,
                    from.domain
                );
            } else {
                let prov = rng.pick(PROVIDERS);
                let n = rng.range(1, 40);
                let a = ip(rng);
                let _ = write!(
                    h,
                    "Received: from mail-{n}.{prov} (mail-{n}.{prov} [{a}])\r\n\tby mx{}.{} (Postfix) with ESMTPS id {qid}\r\n\tfor <{}>; {when}\r\n",
                    rng.range(1, 3),
                    to.domain,
                    to.addr
                );
            }
            hop_t = hop_t.saturating_sub(rng.range(1, 5) as u64);
        }
    }
    if level == HeaderLevel::Full {
        let _ = write!(
            h,
            "Authentication-Results: mx1.{};\r\n\tdkim=pass (2048-bit key) header.d={} header.s=s{} header.b={};\r\n\tspf=pass smtp.mailfrom={};\r\n\tdmarc=pass (p=quarantine dis=none) header.from={}\r\n",
            to.domain,
            from.domain,
            rng.range(2020, 2025),
            random_b64(rng, 8),
            from.domain,
            from.domain
        );
        let bh = random_b64(rng, 43);
        let b = random_b64(rng, 342);
        let _ = write!(
            h,
            "DKIM-Signature: v=1; a=rsa-sha256; c=relaxed/relaxed; d={};\r\n\ts=s{}; t={t};\r\n\th=from:to:subject:date:message-id:mime-version:content-type;\r\n\tbh={bh}=;\r\n\tb=",
            from.domain,
            rng.range(2020, 2025),
        );
        for (i, chunk) in b.as_bytes().chunks(70).enumerate() {
            if i > 0 {
                h.push_str("\r\n\t ");
            }
            h.push_str(&String::from_utf8_lossy(chunk));
        }
        h.push_str("==\r\n");
    }
    if level == HeaderLevel::Bare {
        let _ = write!(h, "From: {}\r\nTo: {}\r\n", from.addr, to.addr);
    } else {
        let _ = write!(h, "From: {} <{}>\r\n", from.name, from.addr);
        let _ = write!(h, "To: {} <{}>\r\n", to.name, to.addr);
    }
    if level == HeaderLevel::Full && rng.chance(40) {
        let cc = party(rng);
        let _ = write!(h, "Cc: {} <{}>\r\n", cc.name, cc.addr);
    }
    let subject = fill(rng.pick(SUBJECTS), rng);
    let _ = write!(h, "Subject: {subject}\r\n");
    let _ = write!(h, "Date: {date}\r\n");
    let _ = write!(
        h,
        "Message-ID: <{}.{}@{}>\r\n",
        token(rng, 16).to_ascii_lowercase(),
        t,
        from.domain
    );
    if level >= HeaderLevel::Medium {
        if subject.starts_with("Re:") {
            let _ = write!(
                h,
                "In-Reply-To: <{}@{}>\r\nReferences: <{}@{}>\r\n",
                token(rng, 20).to_ascii_lowercase(),
                to.domain,
                token(rng, 20).to_ascii_lowercase(),
                to.domain
            );
        }
        let mailer = rng.pick(MAILERS);
        let _ = write!(h, "User-Agent: {mailer}\r\nMIME-Version: 1.0\r\n");
        h.push_str(content);
    }
    h.push_str("\r\n");
    h
}

fn html_of(text: &str) -> String {
    let mut html = String::from(
        "<!DOCTYPE html>\r\n<html>\r\n<head>\r\n<meta http-equiv=\"Content-Type\" content=\"text/html; charset=UTF-8\">\r\n</head>\r\n<body style=\"font-family: Calibri, Arial, sans-serif; font-size: 11pt;\">\r\n",
    );
    for para in text.split("\r\n\r\n") {
        let joined: String = para.split("\r\n").collect::<Vec<_>>().join(" ");
        if joined.trim().is_empty() {
            continue;
        }
        let escaped = joined
            .replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;");
        html.push_str("<p class=\"MsoNormal\">");
        wrap(&escaped, 76, "", &mut html);
        html.push_str("</p>\r\n");
    }
    html.push_str("</body>\r\n</html>\r\n");
    html
}

/// A message of exactly `size` bytes in the given style (downgraded to a simpler style if the
/// size is too small for it).
pub fn message_of_size_with_style(
    seed: u64,
    size: usize,
    style: Style,
) -> Result<Vec<u8>, CorpusError> {
    if size < MIN_MESSAGE_SIZE {
        return Err(CorpusError { requested: size });
    }
    let mut rng = Rng::new(seed);
    let level = if size >= 4000 {
        HeaderLevel::Full
    } else if size >= 1200 {
        HeaderLevel::Medium
    } else {
        HeaderLevel::Minimal
    };
    let style = match style {
        Style::TextAttachment | Style::BinaryAttachment if size < 5000 => Style::Plain,
        Style::Alternative if size < 2500 || level == HeaderLevel::Minimal => Style::Plain,
        s => s,
    };
    let boundary = format!("----=_Part_{}_{}", rng.range(100, 999), token(&mut rng, 10));
    let content = match style {
        Style::Plain => {
            if rng.chance(50) {
                "Content-Type: text/plain; charset=UTF-8; format=flowed\r\nContent-Transfer-Encoding: 7bit\r\n".to_string()
            } else {
                "Content-Type: text/plain; charset=\"us-ascii\"\r\nContent-Transfer-Encoding: 7bit\r\n".to_string()
            }
        }
        Style::Alternative => {
            format!("Content-Type: multipart/alternative;\r\n\tboundary=\"{boundary}\"\r\n")
        }
        Style::TextAttachment | Style::BinaryAttachment => {
            format!("Content-Type: multipart/mixed;\r\n\tboundary=\"{boundary}\"\r\n")
        }
    };
    let mut hdr_rng = rng.fork();
    let mut header = headers(&mut hdr_rng, level, &content);
    if header.len() + 40 > size {
        // Only reachable at the smallest sizes: fall back to the minimal header set.
        let mut r = rng.fork();
        header = headers(&mut r, HeaderLevel::Bare, "");
    }
    let text_part_head =
        "Content-Type: text/plain; charset=UTF-8\r\nContent-Transfer-Encoding: 7bit\r\n\r\n";
    let mut prose = ProseStream::new(rng.fork());
    let (prefix, suffix) = match style {
        Style::Plain => (header, String::new()),
        Style::Alternative => {
            // Text and HTML share the prose; the text part absorbs the exact size.
            let budget = size.saturating_sub(header.len() + 600);
            let estimate = budget * 10 / 23;
            let html_source = prose
                .body(estimate)
                .get(..estimate)
                .unwrap_or("")
                .to_string();
            let html = html_of(&html_source);
            let prefix = format!(
                "{header}This is a multi-part message in MIME format.\r\n\r\n--{boundary}\r\n{text_part_head}"
            );
            let suffix = format!(
                "\r\n--{boundary}\r\nContent-Type: text/html; charset=UTF-8\r\nContent-Transfer-Encoding: 7bit\r\n\r\n{html}\r\n--{boundary}--\r\n"
            );
            (prefix, suffix)
        }
        Style::TextAttachment | Style::BinaryAttachment => {
            let budget = size.saturating_sub(header.len() + 700);
            let share = rng.range(55, 90);
            let raw = budget * share / 100 * 57 / 78;
            let (ctype, name, data) = if style == Style::TextAttachment {
                (
                    "text/plain; charset=us-ascii",
                    format!("report-{}.txt", rng.range(100, 999)),
                    text_attachment(rng.next_u64(), raw),
                )
            } else {
                let mut r = rng.fork();
                (
                    "image/png",
                    format!("IMG_{}.png", rng.range(1000, 9999)),
                    binary_blob(&mut r, raw),
                )
            };
            let mut b64 = String::with_capacity(data.len() * 4 / 3 + 64);
            base64_lines(&data, &mut b64);
            let prefix = format!(
                "{header}This is a multi-part message in MIME format.\r\n\r\n--{boundary}\r\n{text_part_head}"
            );
            let suffix = format!(
                "\r\n--{boundary}\r\nContent-Type: {ctype}; name=\"{name}\"\r\nContent-Disposition: attachment; filename=\"{name}\"\r\nContent-Transfer-Encoding: base64\r\n\r\n{b64}\r\n--{boundary}--\r\n"
            );
            (prefix, suffix)
        }
    };
    let fixed = prefix.len() + suffix.len();
    if fixed + 2 > size {
        // The structured forms leave room by construction; this is the plain fallback.
        if style != Style::Plain {
            return message_of_size_with_style(seed, size, Style::Plain);
        }
        return Err(CorpusError { requested: size });
    }
    let text_len = size - fixed;
    let text = prose.exact(text_len);
    let mut msg = Vec::with_capacity(size);
    msg.extend_from_slice(prefix.as_bytes());
    msg.extend_from_slice(&text);
    msg.extend_from_slice(suffix.as_bytes());
    debug_assert_eq!(msg.len(), size);
    Ok(msg)
}

/// A message of exactly `size` bytes, its style chosen by the seed.
pub fn message_of_size(seed: u64, size: usize) -> Result<Vec<u8>, CorpusError> {
    let mut rng = Rng::new(seed.rotate_left(17) ^ 0x5717E);
    let style = match rng.below(100) {
        0..45 => Style::Plain,
        45..70 => Style::Alternative,
        70..85 => Style::TextAttachment,
        _ => Style::BinaryAttachment,
    };
    message_of_size_with_style(seed, size, style)
}

/// The sizes of the standard corpus: the two ends (300 bytes and 150 kB) and the rest drawn from
/// a log-uniform law skewed towards small messages.
pub fn standard_sizes(seed: u64, count: usize) -> Vec<usize> {
    let mut rng = Rng::new(seed ^ 0x51_2E5);
    let lo = (STANDARD_MIN_SIZE as f64).ln();
    let hi = (STANDARD_MAX_SIZE as f64).ln();
    (0..count)
        .map(|i| match i {
            0 => STANDARD_MIN_SIZE,
            1 => STANDARD_MAX_SIZE,
            _ => {
                let u = rng.unit().powf(1.6);
                ((lo + (hi - lo) * u).exp() as usize).clamp(STANDARD_MIN_SIZE, STANDARD_MAX_SIZE)
            }
        })
        .collect()
}

/// The standard corpus: `count` messages from `seed` (see [`standard_sizes`]).
pub fn standard_corpus(seed: u64, count: usize) -> Vec<Vec<u8>> {
    standard_sizes(seed, count)
        .into_iter()
        .enumerate()
        .map(|(i, size)| {
            let s = seed.wrapping_add((i as u64).wrapping_mul(0x9E37_79B9));
            // Sizes are at least STANDARD_MIN_SIZE > MIN_MESSAGE_SIZE, so this cannot fail;
            // an empty message would only show up as a test failure.
            message_of_size(s, size).unwrap_or_default()
        })
        .collect()
}

/// A mail (short covering note) carrying a text file of exactly `attachment_len` bytes, like the
/// NTIA measurements' 1024 and 51200-byte attachments. Returns the message and the attached file.
pub fn message_with_text_attachment(
    seed: u64,
    attachment_len: usize,
    encoding: AttachmentEncoding,
) -> (Vec<u8>, Vec<u8>) {
    let mut rng = Rng::new(seed ^ 0xA77A);
    let file = text_attachment(rng.next_u64(), attachment_len);
    let boundary = format!("----=_NextPart_{}", token(&mut rng, 12));
    let content = format!("Content-Type: multipart/mixed;\r\n\tboundary=\"{boundary}\"\r\n");
    let mut hr = rng.fork();
    let header = headers(&mut hr, HeaderLevel::Medium, &content);
    let mut note = String::new();
    let greeting = fill(rng.pick(GREETINGS), &mut rng);
    let _ = write!(note, "{greeting}\r\n\r\n");
    let p = paragraph(&mut rng);
    wrap(&p, 72, "", &mut note);
    note.push_str("\r\nThe report is attached.\r\n\r\nRegards,\r\n");
    note.push_str(rng.pick(FIRST_NAMES));
    note.push_str("\r\n");
    let (cte, body) = match encoding {
        AttachmentEncoding::SevenBit => ("7bit", String::from_utf8_lossy(&file).into_owned()),
        AttachmentEncoding::Base64 => {
            let mut b = String::new();
            base64_lines(&file, &mut b);
            ("base64", b)
        }
    };
    let msg = format!(
        "{header}This is a multi-part message in MIME format.\r\n\r\n--{boundary}\r\nContent-Type: text/plain; charset=us-ascii\r\nContent-Transfer-Encoding: 7bit\r\n\r\n{note}\r\n--{boundary}\r\nContent-Type: text/plain; charset=us-ascii; name=\"report.txt\"\r\nContent-Disposition: attachment; filename=\"report.txt\"\r\nContent-Transfer-Encoding: {cte}\r\n\r\n{body}\r\n--{boundary}--\r\n"
    );
    (msg.into_bytes(), file)
}

/// `message` as it arrives from a large Internet mail provider: the header fields its path
/// adds in front (trace, DKIM signatures, ARC seals, SPF and authentication results, the
/// provider's `X-` fields), some 4.4 kB, about 2.3 kB of it base64 signatures that no
/// compression shrinks. The sizes and shapes are those of a Gmail message of 2024-2025:
/// 2048-bit RSA signatures (344 base64 characters), folded at 78 columns. For the airtime a
/// gateway spends on them, and what `strip_headers` saves.
pub fn from_the_internet(seed: u64, message: &[u8]) -> Vec<u8> {
    let mut rng = Rng::new(seed ^ 0x01A7_E4E7);
    let mut signatures = Rng::new(seed ^ 0x5160_0000);
    let mut b64 = |n: usize| {
        let mut s = String::new();
        base64_lines(&noise(signatures.next_u64(), n * 3 / 4), &mut s);
        s.retain(|c| c != '\r' && c != '\n');
        s.truncate(n);
        s
    };
    // A signature folded as providers fold it: 78-column lines, continuation by a tab.
    let folded = |name: &str, head: &str, sig: &str| {
        let mut out = format!("{name}: {head}");
        let mut line = out.len() - out.rfind('\n').map_or(0, |i| i + 1);
        for c in sig.chars() {
            if line >= 78 {
                out.push_str("\r\n\t");
                line = 8;
            }
            out.push(c);
            line += 1;
        }
        out.push_str("\r\n");
        out
    };
    let (t, ip) = (1_796_000_000 + rng.below(1_000_000), rng.range(2, 250));
    let date = "Tue, 01 Dec 2026 08:14:07 -0800 (PST)";
    let mut h = String::new();
    h.push_str(&format!(
        "Received: by 2002:a05:7300:8d0b:b0:1a2:3b4c:5d6e with SMTP id q11csp{}dyc;\r\n\t{date}\r\n",
        rng.range(100_000, 999_999)
    ));
    h.push_str(&format!(
        "X-Received: by 2002:a17:906:6a1b:b0:a9a:1d2e:3f40 with SMTP id a27mr{}ejk.{}.{};\r\n\t{date}\r\n",
        rng.range(1_000_000, 9_999_999),
        rng.range(10, 99),
        t
    ));
    h.push_str(&folded(
        "ARC-Seal",
        &format!("i=1; a=rsa-sha256; t={t}; cv=none;\r\n\td=google.com; s=arc-20240605;\r\n\tb="),
        &b64(344),
    ));
    h.push_str(&folded(
        "ARC-Message-Signature",
        &format!(
            "i=1; a=rsa-sha256; c=relaxed/relaxed; d=google.com; s=arc-20240605;\r\n\t\
             h=to:subject:message-id:date:from:mime-version:dkim-signature;\r\n\tbh={};\r\n\tfh={};\r\n\tb=",
            b64(44),
            b64(44)
        ),
        &b64(344),
    ));
    let results = format!(
        "mx.google.com;\r\n       dkim=pass header.i=@example.com header.s=20230601 header.b={};\r\n\
         \x20      spf=pass (google.com: domain of alice@example.com designates 209.85.220.{ip} as permitted sender) smtp.mailfrom=alice@example.com;\r\n\
         \x20      dmarc=pass (p=NONE sp=QUARANTINE dis=NONE) header.from=example.com\r\n",
        b64(8)
    );
    h.push_str(&format!("ARC-Authentication-Results: i=1; {results}"));
    h.push_str("Return-Path: <alice@example.com>\r\n");
    h.push_str(&format!(
        "Received: from mail-sor-f41.google.com (mail-sor-f41.google.com. [209.85.220.{ip}])\r\n\
         \x20       by mx.google.com with SMTPS id 4fb4d7f45d1cf-5d0c{}sa{}.{}.2024.12.01.08.14.07\r\n\
         \x20       for <ops@shore.example>\r\n        (Google Transport Security);\r\n        {date}\r\n",
        rng.range(1000, 9999),
        rng.range(100_000, 999_999),
        rng.range(10, 99)
    ));
    h.push_str(&format!(
        "Received-SPF: pass (google.com: domain of alice@example.com designates 209.85.220.{ip} as permitted sender) client-ip=209.85.220.{ip};\r\n"
    ));
    h.push_str(&format!("Authentication-Results: {results}"));
    h.push_str(&folded(
        "DKIM-Signature",
        &format!(
            "v=1; a=rsa-sha256; c=relaxed/relaxed;\r\n\td=example.com; s=20230601; t={t}; x={}; darn=shore.example;\r\n\t\
             h=to:subject:message-id:date:from:mime-version:from:to:cc:subject\r\n\t :date:message-id:reply-to;\r\n\tbh={};\r\n\tb=",
            t + 604_800,
            b64(44)
        ),
        &b64(344),
    ));
    h.push_str(&folded(
        "X-Google-DKIM-Signature",
        &format!(
            "v=1; a=rsa-sha256; c=relaxed/relaxed;\r\n\td=1e100.net; s=20230601; t={t}; x={};\r\n\t\
             h=to:subject:message-id:date:from:mime-version:x-gm-message-state\r\n\t :from:to:cc:subject:date:message-id:reply-to;\r\n\tbh={};\r\n\tb=",
            t + 604_800,
            b64(44)
        ),
        &b64(344),
    ));
    h.push_str(&folded("X-Gm-Message-State", "", &b64(104)));
    h.push_str(&folded("X-Gm-Gg", "", &b64(236)));
    h.push_str(&folded("X-Google-Smtp-Source", "", &b64(88)));
    h.push_str(&format!(
        "X-Received: by 2002:a05:6402:3511:b0:5d0:e5f6:a7b8 with SMTP id 4fb4d7f45d1cf-5d0e6f7a8b9mr{}a12.{}.{};\r\n        {date}\r\n",
        rng.range(1_000_000, 9_999_999),
        rng.range(10, 99),
        t
    ));
    let mut out = h.into_bytes();
    out.extend_from_slice(message);
    out
}

/// `message` with these header fields set: an existing field of that name (with its folded
/// continuation lines) is replaced, a missing one is added at the end of the header. Works on
/// bytes: the rest of the message is kept exactly.
pub fn set_headers(message: &[u8], fields: &[(&str, String)]) -> Vec<u8> {
    let end = message
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map_or(0, |e| e + 2);
    let mut out = Vec::with_capacity(message.len() + 200);
    let mut done = vec![false; fields.len()];
    let mut skipping = false;
    for line in message[..end].split_inclusive(|&b| b == b'\n') {
        if skipping && matches!(line.first(), Some(b' ' | b'\t')) {
            continue;
        }
        skipping = false;
        let name = line.split(|&b| b == b':').next().unwrap_or_default();
        match fields
            .iter()
            .position(|(f, _)| f.as_bytes().eq_ignore_ascii_case(name))
        {
            Some(i) => {
                if !done[i] {
                    out.extend_from_slice(
                        format!("{}: {}\r\n", fields[i].0, fields[i].1).as_bytes(),
                    );
                    done[i] = true;
                }
                skipping = true;
            }
            None => out.extend_from_slice(line),
        }
    }
    for (i, (f, v)) in fields.iter().enumerate() {
        if !done[i] {
            out.extend_from_slice(format!("{f}: {v}\r\n").as_bytes());
        }
    }
    out.extend_from_slice(&message[end..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_sizes() {
        for &size in ISODE_SIZES
            .iter()
            .chain(&[300, 301, 999, 2500, 5000, 65_536, 150_000])
        {
            for seed in 0..40 {
                let m = message_of_size(seed, size).unwrap();
                assert_eq!(m.len(), size, "size {size} seed {seed}");
                assert!(m.ends_with(b"\r\n"));
                assert!(std::str::from_utf8(&m).is_ok());
            }
        }
        assert_eq!(message_of_size(1, 299), Err(CorpusError { requested: 299 }));
    }

    #[test]
    fn every_style_has_exact_size_and_crlf_lines() {
        for style in [
            Style::Plain,
            Style::Alternative,
            Style::TextAttachment,
            Style::BinaryAttachment,
        ] {
            let m = message_of_size_with_style(7, 40_000, style).unwrap();
            assert_eq!(m.len(), 40_000);
            // Every LF is preceded by CR and no line is longer than 998 characters.
            for (i, &b) in m.iter().enumerate() {
                if b == b'\n' {
                    assert_eq!(m[i - 1], b'\r', "{style:?} at {i}");
                }
            }
            assert!(m.split(|&b| b == b'\n').all(|l| l.len() <= 999));
        }
        let alt = message_of_size_with_style(7, 40_000, Style::Alternative).unwrap();
        assert!(String::from_utf8_lossy(&alt).contains("text/html"));
        let bin = message_of_size_with_style(7, 40_000, Style::BinaryAttachment).unwrap();
        assert!(String::from_utf8_lossy(&bin).contains("Content-Transfer-Encoding: base64"));
    }

    #[test]
    fn deterministic_and_seed_dependent() {
        assert_eq!(standard_corpus(3, 8), standard_corpus(3, 8));
        assert_ne!(standard_corpus(3, 8), standard_corpus(4, 8));
        let sizes = standard_sizes(DEFAULT_SEED, DEFAULT_COUNT);
        assert_eq!(sizes.iter().min(), Some(&STANDARD_MIN_SIZE));
        assert_eq!(sizes.iter().max(), Some(&STANDARD_MAX_SIZE));
        let corpus = standard_corpus(DEFAULT_SEED, DEFAULT_COUNT);
        for (m, s) in corpus.iter().zip(&sizes) {
            assert_eq!(m.len(), *s);
        }
        let big = String::from_utf8_lossy(&corpus[1]).into_owned();
        assert!(big.contains("Received: from"));
        assert!(big.contains("DKIM-Signature: v=1"));
        assert!(big.contains("Message-ID: <"));
    }

    #[test]
    fn ntia_attachments() {
        for &len in &NTIA_ATTACHMENT_SIZES {
            for enc in [AttachmentEncoding::SevenBit, AttachmentEncoding::Base64] {
                let (msg, file) = message_with_text_attachment(5, len, enc);
                assert_eq!(file.len(), len);
                assert!(file.ends_with(b"\r\n"));
                assert!(msg.len() > len);
                if enc == AttachmentEncoding::SevenBit {
                    assert!(msg.windows(file.len()).any(|w| w == file.as_slice()));
                }
            }
        }
    }

    #[test]
    fn dates_are_right() {
        assert_eq!(rfc5322_date(0), "Thu, 1 Jan 1970 00:00:00 +0000");
        assert_eq!(
            rfc5322_date(1_735_689_600 + 86_400 * 31 + 3661),
            "Sat, 1 Feb 2025 01:01:01 +0000"
        );
    }

    #[test]
    fn headers_are_replaced_or_added_and_nothing_else_changes() {
        let id = [("Message-ID", "<n@d>".to_owned())];
        let m = b"From: x\r\nMessage-Id: <old@x>\r\n folded\r\nSubject: s\r\n\r\nbody\r\nMessage-ID: kept\r\n";
        assert_eq!(
            set_headers(m, &id),
            b"From: x\r\nMessage-ID: <n@d>\r\nSubject: s\r\n\r\nbody\r\nMessage-ID: kept\r\n"
        );
        assert_eq!(
            set_headers(b"From: x\r\n\r\nb", &id),
            b"From: x\r\nMessage-ID: <n@d>\r\n\r\nb"
        );
    }
}
