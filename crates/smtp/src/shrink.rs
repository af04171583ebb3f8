//! Images made smaller on their way over the air: a peer's or a group's `shrink_images`.
//!
//! A photograph from a phone is 2-5 MB of JPEG: at 1200 bit/s, five to ten hours of air, which
//! no compression shortens (JPEG is compressed already). Scaled down to a screen's size it is
//! some 100-200 kB, and a reader at sea sees what was in it. [`shrink_images`] walks a
//! message's MIME tree as [`crate::strip::text_only`] does and, in each `image/jpeg` or
//! `image/png` part sent in base64 whose longer side is over the limit, replaces the image with
//! one scaled to fit (JPEG at the limit's quality, PNG as PNG), turned upright as its EXIF
//! orientation says (the EXIF block itself stays ashore). The part says what was done in its
//! `Content-Description` field (after what it said already, if it had one), so that the reader
//! knows a larger original exists. Anything else stays as it came: other types, a `multipart/signed` (its signature
//! covers its parts), an animated PNG (its first frame alone would lose the rest), an image
//! that does not decode or would take more than [`MAX_DECODED`] octets decoded, or one that
//! would not come out smaller.
//! The spool keeps the message as it came.
//!
//! It sits beside [`crate::strip`], whose MIME walk ([`crate::downgrade`]'s parsing) it
//! shares, and below the gateway's links, which apply it to each message they send.

use std::borrow::Cow;

use crate::downgrade::{Context, Entity, MAX_DEPTH, read_mime, split_entity};
use crate::strip::{rewrite_parts, walkable};

/// The JPEG quality `shrink_images` uses unless `image_quality` says otherwise: enough for a
/// photograph on a screen, a third of the octets of a camera's 90-95.
pub const DEFAULT_QUALITY: u8 = 60;

/// The smallest longest side a limit may set, pixels: below it an image says little.
pub const MIN_SIDE: u32 = 64;

/// The largest longest side a limit may set, pixels.
pub const MAX_SIDE: u32 = 16_384;

/// How small images are made: their longer side at most `max_side` pixels, JPEG at `quality`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageLimit {
    max_side: u32,
    quality: u8,
}

/// Why a limit is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ImageLimitError {
    /// The longest side is out of range.
    #[error(
        "{0} pixels is not a longest side images can be made to fit; expected {MIN_SIDE}-{MAX_SIDE}"
    )]
    Side(i64),
    /// The quality is out of range.
    #[error("JPEG quality {0} is out of range; expected 10-100 (60 by default)")]
    Quality(i64),
}

impl ImageLimit {
    /// A limit of `max_side` pixels on an image's longer side, JPEG at `quality` (10-100);
    /// signed, as a configuration file gives them.
    pub fn new(max_side: i64, quality: i64) -> Result<ImageLimit, ImageLimitError> {
        let max_side = u32::try_from(max_side)
            .ok()
            .filter(|s| (MIN_SIDE..=MAX_SIDE).contains(s))
            .ok_or(ImageLimitError::Side(max_side))?;
        let quality = u8::try_from(quality)
            .ok()
            .filter(|q| (10..=100).contains(q))
            .ok_or(ImageLimitError::Quality(quality))?;
        Ok(ImageLimit { max_side, quality })
    }

    /// The longest side, pixels.
    pub fn max_side(&self) -> u32 {
        self.max_side
    }

    /// The JPEG quality.
    pub fn quality(&self) -> u8 {
        self.quality
    }
}

/// What [`shrink_images`] did to a message.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Shrunk {
    /// Images made smaller.
    pub images: usize,
    /// Octets the message lost by it.
    pub saved: usize,
}

/// `message` with its images made to fit `limit` (see the module docs), and what was done
/// (nothing: borrowed, untouched).
pub fn shrink_images<'a>(message: &'a [u8], limit: &ImageLimit) -> (Cow<'a, [u8]>, Shrunk) {
    let mut out = Vec::new();
    let mut done = Shrunk::default();
    if !shrink_entity(message, Context::Message, 0, limit, &mut out, &mut done) {
        return (Cow::Borrowed(message), Shrunk::default());
    }
    done.saved = message.len().saturating_sub(out.len());
    (Cow::Owned(out), done)
}

/// Writes `raw`, one entity, to `out` with its images made to fit; returns whether any was
/// (when not, `out` holds `raw` as it was).
fn shrink_entity(
    raw: &[u8],
    context: Context,
    depth: usize,
    limit: &ImageLimit,
    out: &mut Vec<u8>,
    done: &mut Shrunk,
) -> bool {
    let start = out.len();
    let entity = split_entity(raw);
    let mime = read_mime(&entity, context);
    let changed = if let Some(parts) = walkable(&entity, &mime, depth) {
        let part_context = mime.part_context();
        rewrite_parts(&entity, &parts, out, |part, out| {
            shrink_entity(part, part_context, depth + 1, limit, out, done)
        })
    } else if mime.content_type == "message/rfc822"
        && matches!(mime.encoding.as_str(), "7bit" | "8bit" | "binary")
        && depth < MAX_DEPTH
    {
        // A forwarded message: its own images too.
        out.extend_from_slice(entity.header);
        out.extend_from_slice(entity.separator);
        shrink_entity(entity.body, Context::Message, depth + 1, limit, out, done)
    } else if IMAGE_TYPES.contains(&mime.content_type.as_str()) && mime.encoding == "base64" {
        match shrunk_part(&entity, limit) {
            Some(part) => {
                out.extend_from_slice(&part);
                done.images += 1;
                true
            }
            None => false,
        }
    } else {
        false
    };
    if !changed {
        out.truncate(start);
        out.extend_from_slice(raw);
    }
    changed
}

/// The types whose parts are made smaller (`image/jpg` and `image/pjpeg` are what some mailers
/// write for JPEG).
const IMAGE_TYPES: &[&str] = &["image/jpeg", "image/jpg", "image/pjpeg", "image/png"];

/// The most an image may take decoded, octets: a 64-megapixel photograph in RGBA. A larger
/// one (or a small PNG that claims to be one, the classic decompression bomb) stays as it
/// came.
pub const MAX_DECODED: u64 = 256 * 1024 * 1024;

/// Base64 lines are 76 characters (RFC 2045 6.8).
const LINE: usize = 76;

/// The part `entity` (an image in base64) with its image made to fit `limit`: its header
/// fields, its `Content-Description` saying so, and the new image in base64.
/// `None`: it stays as it came (small enough, not a JPEG or PNG, not decodable, or no smaller).
fn shrunk_part(entity: &Entity<'_>, limit: &ImageLimit) -> Option<Vec<u8>> {
    use base64::Engine;
    let engine = base64::engine::GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        base64::engine::GeneralPurposeConfig::new()
            .with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent),
    );
    let text: Vec<u8> = entity
        .body
        .iter()
        .copied()
        .filter(|b| !b.is_ascii_whitespace())
        .collect();
    let original = engine.decode(&text).ok()?;
    let (image, format, (w0, h0)) = decode(&original, limit)?;
    let smaller = image.resize(
        limit.max_side,
        limit.max_side,
        image::imageops::FilterType::Triangle,
    );
    let encoded = encode(&smaller, format, limit)?;
    if encoded.len() >= original.len() {
        return None;
    }
    let eol: &[u8] = if entity.separator == b"\n" {
        b"\n"
    } else {
        b"\r\n"
    };
    let said = format!(
        "scaled down for the radio link from {w0}x{h0} pixels ({} octets) to {}x{} ({} octets)",
        original.len(),
        smaller.width(),
        smaller.height(),
        encoded.len()
    );
    // The header as it was, with what was done said in its Content-Description: added to the
    // one it has (RFC 2045 allows one), or in a new one.
    let mut out = Vec::with_capacity(entity.header.len() + said.len() + 64);
    let mut described = false;
    for field in &entity.fields {
        if !described && field.name.eq_ignore_ascii_case(b"Content-Description") {
            described = true;
            let text = field.raw.trim_ascii_end();
            out.extend_from_slice(text);
            out.extend_from_slice(format!("; {said}").as_bytes());
            out.extend_from_slice(eol);
        } else {
            out.extend_from_slice(field.raw);
        }
    }
    if !described {
        out.extend_from_slice(format!("Content-Description: {said}").as_bytes());
        out.extend_from_slice(eol);
    }
    out.extend_from_slice(entity.separator);
    let b64 = engine.encode(&encoded);
    for (i, line) in b64.as_bytes().chunks(LINE).enumerate() {
        if i > 0 {
            out.extend_from_slice(eol);
        }
        out.extend_from_slice(line);
    }
    // A part's last line end belongs to the delimiter after it; a message's is its own.
    if entity.body.ends_with(b"\n") {
        out.extend_from_slice(eol);
    }
    // Smaller with its description, or not at all.
    let before = entity.header.len() + entity.separator.len() + entity.body.len();
    (out.len() < before).then_some(out)
}

/// `bytes` decoded, upright, if it is a JPEG or PNG within [`MAX_DECODED`] whose longer side
/// is over the limit: the image, its format, and its size upright.
fn decode(
    bytes: &[u8],
    limit: &ImageLimit,
) -> Option<(image::DynamicImage, image::ImageFormat, (u32, u32))> {
    use image::ImageDecoder;
    let mut reader = image::ImageReader::new(std::io::Cursor::new(bytes))
        .with_guessed_format()
        .ok()?;
    let format = reader
        .format()
        .filter(|f| matches!(f, image::ImageFormat::Jpeg | image::ImageFormat::Png))?;
    if format == image::ImageFormat::Png && animated(bytes) {
        // Its first frame alone would lose the rest.
        return None;
    }
    let mut limits = image::Limits::default();
    limits.max_alloc = Some(MAX_DECODED);
    reader.limits(limits);
    let mut decoder = reader.into_decoder().ok()?;
    let (w, h) = decoder.dimensions();
    if w.max(h) <= limit.max_side || u64::from(w) * u64::from(h) * 4 > MAX_DECODED {
        return None;
    }
    // An EXIF block that does not read leaves the image as it is stored.
    let orientation = decoder
        .orientation()
        .unwrap_or(image::metadata::Orientation::NoTransforms);
    let mut image = image::DynamicImage::from_decoder(decoder).ok()?;
    image.apply_orientation(orientation);
    let size = (image.width(), image.height());
    Some((image, format, size))
}

/// Whether `png` is an animated PNG: an `acTL` chunk before the first `IDAT` (APNG's rule).
fn animated(png: &[u8]) -> bool {
    // The signature, then chunks of a length, a type, the data and a CRC.
    let mut at: usize = 8;
    while let Some(header) = at.checked_add(8).and_then(|end| png.get(at..end)) {
        let (len, kind) = header.split_at(4);
        match kind {
            b"acTL" => return true,
            b"IDAT" | b"IEND" => return false,
            _ => {}
        }
        let len = u32::from_be_bytes([len[0], len[1], len[2], len[3]]) as usize;
        at = at.saturating_add(12).saturating_add(len);
    }
    false
}

/// `image` encoded as `format` (JPEG at the limit's quality; PNG at its best compression).
fn encode(
    image: &image::DynamicImage,
    format: image::ImageFormat,
    limit: &ImageLimit,
) -> Option<Vec<u8>> {
    use image::codecs::{jpeg::JpegEncoder, png};
    let mut out = Vec::new();
    match format {
        image::ImageFormat::Jpeg => {
            // JPEG has no alpha: grey stays grey, anything else goes as RGB.
            let flat = match image.color() {
                image::ColorType::L8 | image::ColorType::L16 => {
                    image::DynamicImage::ImageLuma8(image.to_luma8())
                }
                _ => image::DynamicImage::ImageRgb8(image.to_rgb8()),
            };
            flat.write_with_encoder(JpegEncoder::new_with_quality(&mut out, limit.quality))
                .ok()?;
        }
        _ => {
            let encoder = png::PngEncoder::new_with_quality(
                &mut out,
                png::CompressionType::Best,
                png::FilterType::Adaptive,
            );
            image.write_with_encoder(encoder).ok()?;
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use base64::Engine;

    /// A photograph's worth of detail: gradients and a deterministic grain, which JPEG cannot
    /// squeeze as it squeezes a flat test card.
    fn photo(w: u32, h: u32) -> image::RgbImage {
        let mut seed = 0x2545_f491_u32;
        image::RgbImage::from_fn(w, h, |x, y| {
            seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            let grain = (seed >> 27) as u8;
            image::Rgb([
                ((x * 255 / w) as u8).wrapping_add(grain),
                ((y * 255 / h) as u8).wrapping_add(grain / 2),
                (((x + y) % 256) as u8).wrapping_add(grain),
            ])
        })
    }

    fn jpeg(w: u32, h: u32) -> Vec<u8> {
        let mut out = Vec::new();
        image::DynamicImage::ImageRgb8(photo(w, h))
            .write_with_encoder(image::codecs::jpeg::JpegEncoder::new_with_quality(
                &mut out, 92,
            ))
            .unwrap();
        out
    }

    fn png(w: u32, h: u32) -> Vec<u8> {
        let mut out = Vec::new();
        image::DynamicImage::ImageRgb8(photo(w, h))
            .write_with_encoder(image::codecs::png::PngEncoder::new(&mut out))
            .unwrap();
        out
    }

    fn base64_lines(bytes: &[u8]) -> String {
        let text = base64::engine::general_purpose::STANDARD.encode(bytes);
        text.as_bytes()
            .chunks(76)
            .map(|l| std::str::from_utf8(l).unwrap())
            .collect::<Vec<_>>()
            .join("\r\n")
    }

    /// A message with a text and one attachment of `ctype`.
    fn with_attachment(ctype: &str, name: &str, bytes: &[u8]) -> Vec<u8> {
        format!(
            "From: a@ship.example\r\nTo: b@shore.example\r\nSubject: photo\r\n\
             MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=\"b1\"\r\n\r\n\
             preamble\r\n--b1\r\nContent-Type: text/plain\r\n\r\nThe deck this morning.\r\n\
             --b1\r\nContent-Type: {ctype}; name=\"{name}\"\r\n\
             Content-Disposition: attachment; filename=\"{name}\"\r\n\
             Content-Transfer-Encoding: base64\r\n\r\n{}\r\n--b1--\r\nepilogue\r\n",
            base64_lines(bytes)
        )
        .into_bytes()
    }

    /// The leaf parts a reader sees: type, decoded contents, description.
    fn leaves(raw: &[u8]) -> Vec<(String, Vec<u8>, Option<String>)> {
        use mail_parser::MimeHeaders;
        let m = mail_parser::MessageParser::new().parse(raw).unwrap();
        m.parts
            .iter()
            .filter(|p| !matches!(p.body, mail_parser::PartType::Multipart(_)))
            .map(|p| {
                let ct = p.content_type().map_or_else(
                    || "text/plain".to_owned(),
                    |c| format!("{}/{}", c.ctype(), c.subtype().unwrap_or("")),
                );
                (
                    ct,
                    p.contents().to_vec(),
                    p.content_description().map(str::to_owned),
                )
            })
            .collect()
    }

    fn limit() -> ImageLimit {
        ImageLimit::new(1024, i64::from(DEFAULT_QUALITY)).unwrap()
    }

    #[test]
    fn a_photograph_is_scaled_to_fit_and_says_so() {
        let original = jpeg(2000, 1500);
        let message = with_attachment("image/jpeg", "deck.jpg", &original);
        let (out, done) = shrink_images(&message, &limit());
        assert_eq!(done.images, 1);
        assert_eq!(done.saved, message.len() - out.len());
        let before = leaves(&message);
        let after = leaves(&out);
        assert_eq!(after.len(), 2);
        // The text, the preamble and the epilogue are as they were.
        assert_eq!(after[0], before[0]);
        let image_part = message
            .windows(24)
            .position(|w| w == b"Content-Type: image/jpeg")
            .unwrap();
        assert!(out.starts_with(&message[..image_part]));
        assert!(out.ends_with(b"\r\n--b1--\r\nepilogue\r\n"));
        let (ct, bytes, description) = &after[1];
        assert_eq!(ct, "image/jpeg");
        let image = image::load_from_memory(bytes).unwrap();
        assert_eq!((image.width(), image.height()), (1024, 768));
        assert!(
            bytes.len() * 4 < original.len(),
            "{} octets from {}",
            bytes.len(),
            original.len()
        );
        let description = description.as_deref().unwrap();
        assert!(
            description.starts_with(&format!(
                "scaled down for the radio link from 2000x1500 pixels ({} octets) to 1024x768",
                original.len()
            )),
            "{description}"
        );
        // Base64 lines of 76 characters, CRLF, as the rest of the message.
        assert!(
            out.split(|&b| b == b'\n')
                .all(|l| l.len() <= 77 || l.starts_with(b"Content-Description"))
        );
        // The same message always comes out the same (a cut session is rebuilt from it).
        assert_eq!(shrink_images(&message, &limit()).0, out);
        // Within the limit now: left alone.
        let (again, none) = shrink_images(&out, &limit());
        assert!(matches!(again, Cow::Borrowed(_)) && none == Shrunk::default());
    }

    #[test]
    fn a_png_stays_a_png_and_a_small_image_stays_as_it_came() {
        let message = with_attachment("image/png", "chart.png", &png(1600, 1200));
        let (out, done) = shrink_images(&message, &limit());
        assert_eq!(done.images, 1);
        let after = leaves(&out);
        assert_eq!(after[1].0, "image/png");
        let image = image::load_from_memory(&after[1].1).unwrap();
        assert_eq!((image.width(), image.height()), (1024, 768));
        let small = with_attachment("image/jpeg", "small.jpg", &jpeg(800, 600));
        let (out, done) = shrink_images(&small, &limit());
        assert!(matches!(out, Cow::Borrowed(_)) && done.images == 0);
    }

    #[test]
    fn what_is_not_a_jpeg_or_png_in_base64_or_is_signed_stays_as_it_came() {
        let photo = jpeg(1200, 900);
        let cases = [
            with_attachment("application/pdf", "a.pdf", &photo),
            with_attachment("image/jpeg", "bad.jpg", b"not an image at all, only text"),
            with_attachment("image/gif", "a.gif", &photo),
            String::from_utf8(with_attachment("image/jpeg", "a.jpg", &photo))
                .unwrap()
                .replace("multipart/mixed", "multipart/signed")
                .into_bytes(),
            String::from_utf8(with_attachment("image/jpeg", "a.jpg", &photo))
                .unwrap()
                .replace("Content-Transfer-Encoding: base64\r\n", "")
                .into_bytes(),
            // No close delimiter.
            String::from_utf8(with_attachment("image/jpeg", "a.jpg", &photo))
                .unwrap()
                .replace("--b1--", "--b2--")
                .into_bytes(),
        ];
        for m in &cases {
            let (out, done) = shrink_images(m, &limit());
            assert!(
                matches!(out, Cow::Borrowed(_)),
                "{}",
                String::from_utf8_lossy(m)
            );
            assert_eq!(done, Shrunk::default());
        }
    }

    #[test]
    fn a_description_it_had_is_kept_and_says_what_was_done() {
        let plain = String::from_utf8(with_attachment("image/jpeg", "deck.jpg", &jpeg(1600, 1200)))
            .unwrap();
        let described = plain.replacen(
            "Content-Transfer-Encoding: base64\r\n",
            "Content-Description: the deck,\r\n at dawn\r\nContent-Transfer-Encoding: base64\r\n",
            1,
        );
        let (out, done) = shrink_images(described.as_bytes(), &limit());
        assert_eq!(done.images, 1);
        let text = String::from_utf8_lossy(&out);
        assert_eq!(text.matches("Content-Description").count(), 1, "{text}");
        assert!(
            text.contains(
                "Content-Description: the deck,\r\n at dawn; scaled down for the radio link from \
                 1600x1200 pixels ("
            ),
            "{text}"
        );
        // The other fields of the part as they were, in their order.
        assert!(text.contains(
            "Content-Type: image/jpeg; name=\"deck.jpg\"\r\n\
             Content-Disposition: attachment; filename=\"deck.jpg\"\r\n\
             Content-Description: the deck,"
        ));
        let after = leaves(&out);
        assert!(
            after[1]
                .2
                .as_deref()
                .is_some_and(|d| d.starts_with("the deck, at dawn; scaled down")),
            "{:?}",
            after[1].2
        );
    }

    #[test]
    fn an_animated_png_stays_as_it_came() {
        let still = png(1600, 1200);
        // An acTL chunk (two frames, played once) after IHDR, which ends at 8 + 25.
        let mut animated = still.clone();
        let actl = [
            0, 0, 0, 8, b'a', b'c', b'T', b'L', 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 0,
        ];
        animated.splice(33..33, actl);
        let message = with_attachment("image/png", "loop.png", &animated);
        let (out, done) = shrink_images(&message, &limit());
        assert!(matches!(out, Cow::Borrowed(_)) && done.images == 0);
        assert!(!super::animated(&still) && super::animated(&animated));
        assert!(!super::animated(b"") && !super::animated(&still[..20]));
    }

    #[test]
    fn a_photograph_taken_sideways_comes_out_upright() {
        // An APP1 segment after SOI: Exif, big-endian TIFF, one IFD entry: Orientation
        // (0x0112, SHORT) = 6, "rotate 90 degrees clockwise to view".
        let mut app1 =
            b"Exif\0\0MM\0\x2a\0\0\0\x08\0\x01\x01\x12\0\x03\0\0\0\x01\0\x06\0\0\0\0\0\0".to_vec();
        let len = u16::try_from(app1.len() + 2).unwrap().to_be_bytes();
        app1.splice(0..0, [0xff, 0xe1, len[0], len[1]]);
        let mut sideways = jpeg(2000, 1000);
        sideways.splice(2..2, app1);
        let message = with_attachment("image/jpeg", "mast.jpg", &sideways);
        let (out, done) = shrink_images(&message, &limit());
        assert_eq!(done.images, 1);
        let after = leaves(&out);
        let image = image::load_from_memory(&after[1].1).unwrap();
        assert_eq!((image.width(), image.height()), (512, 1024));
        assert!(
            after[1]
                .2
                .as_deref()
                .unwrap()
                .contains("from 1000x2000 pixels")
        );
    }

    #[test]
    fn nested_and_forwarded_images_and_lf_lines() {
        let photo = jpeg(1500, 1000);
        let inner = String::from_utf8(with_attachment("image/jpeg", "a.jpg", &photo)).unwrap();
        // A forwarded message with its own photograph, in a multipart/mixed, in LF lines.
        let outer = format!(
            "Subject: fwd\r\nMIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=\"o\"\r\n\r\n\
             --o\r\nContent-Type: text/plain\r\n\r\nSee below.\r\n\
             --o\r\nContent-Type: message/rfc822\r\n\r\n{inner}\r\n--o--\r\n"
        )
        .replace("\r\n", "\n");
        let (out, done) = shrink_images(outer.as_bytes(), &limit());
        assert_eq!(done.images, 1);
        assert!(!out.windows(2).any(|w| w == b"\r\n"), "LF lines stay LF");
        let parsed = mail_parser::MessageParser::new().parse(&out[..]).unwrap();
        let forwarded = parsed
            .attachment(0)
            .and_then(|a| a.message())
            .expect("the forwarded message");
        let image = forwarded.attachment(0).unwrap().contents();
        let image = image::load_from_memory(image).unwrap();
        assert_eq!((image.width(), image.height()), (1024, 683));
        // An image that is the whole message.
        let alone = format!(
            "Subject: x\r\nMIME-Version: 1.0\r\nContent-Type: image/jpeg\r\n\
             Content-Transfer-Encoding: base64\r\n\r\n{}\r\n",
            base64_lines(&photo)
        );
        let (out, done) = shrink_images(alone.as_bytes(), &limit());
        assert_eq!(done.images, 1);
        assert!(out.ends_with(b"\r\n") && !out.ends_with(b"\r\n\r\n"));
    }

    #[test]
    fn limits_are_checked() {
        assert_eq!(ImageLimit::new(63, 60), Err(ImageLimitError::Side(63)));
        assert_eq!(
            ImageLimit::new(16_385, 60),
            Err(ImageLimitError::Side(16_385))
        );
        assert_eq!(ImageLimit::new(1024, 9), Err(ImageLimitError::Quality(9)));
        assert_eq!(
            ImageLimit::new(1024, 101),
            Err(ImageLimitError::Quality(101))
        );
        let l = ImageLimit::new(640, 75).unwrap();
        assert_eq!((l.max_side(), l.quality()), (640, 75));
        assert_eq!(
            ImageLimit::new(-1024, 60),
            Err(ImageLimitError::Side(-1024))
        );
        assert!(
            ImageLimitError::Side(10)
                .to_string()
                .contains("expected 64-16384")
        );
    }
}
