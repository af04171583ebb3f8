//! Fuzzes `shrink_images`, which decodes the JPEG and PNG images of any message a peer's links
//! send (a peer's `shrink_images`): the data as a whole message, as the image of a message's
//! attachment, so that the image decoders see it, or drawn into a valid image, so that its
//! scaling and encoding run. Nothing may panic or take more than the decoder's bound; what is
//! returned is never larger than what came, says exactly what it saved, parses as a message
//! again, and a second pass finds nothing more to do.
#![no_main]

use base64::Engine;
use libfuzzer_sys::fuzz_target;
use skywave_smtp::shrink::{ImageLimit, shrink_images};

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let Ok(limit) = ImageLimit::new(64, 50) else {
        return;
    };
    let message = match mode % 5 {
        0 => rest.to_vec(),
        kind => {
            // 1 and 2: the bytes as an image, for the decoders; 3 and 4: a valid image drawn
            // from them (64-319 pixels a side), so that scaling and encoding run too.
            let image = match kind {
                1 | 2 => rest.to_vec(),
                _ => drawn(rest, kind == 3),
            };
            let b64 = base64::engine::general_purpose::STANDARD.encode(&image);
            let ctype = if kind % 2 == 1 { "image/jpeg" } else { "image/png" };
            format!(
                "Subject: x\r\nMIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n\
                 --b\r\nContent-Type: text/plain\r\n\r\nhello\r\n\
                 --b\r\nContent-Type: {ctype}\r\nContent-Transfer-Encoding: base64\r\n\r\n{b64}\r\n--b--\r\n"
            )
            .into_bytes()
        }
    };
    let (out, done) = shrink_images(&message, &limit);
    assert_eq!(out.len() + done.saved, message.len());
    if done.images > 0 {
        assert!(done.saved > 0);
        assert!(mail_parser::MessageParser::new().parse(&out[..]).is_some());
        assert_eq!(shrink_images(&out, &limit).1.images, 0);
    }
});

/// A JPEG (or PNG) whose size and pixels come from `bytes`.
fn drawn(bytes: &[u8], jpeg: bool) -> Vec<u8> {
    let at = |i: usize| bytes.get(i).copied().unwrap_or(0);
    let (w, h) = (64 + u32::from(at(0)), 64 + u32::from(at(1)));
    let pixels = image::RgbImage::from_fn(w, h, |x, y| {
        let i = (x as usize * 3 + y as usize * 7) % bytes.len().max(1);
        image::Rgb([at(i), at(i + 1), at(i + 2)])
    });
    let mut out = Vec::new();
    let image = image::DynamicImage::ImageRgb8(pixels);
    let written = if jpeg {
        image.write_with_encoder(image::codecs::jpeg::JpegEncoder::new_with_quality(&mut out, 90))
    } else {
        image.write_with_encoder(image::codecs::png::PngEncoder::new(&mut out))
    };
    written.map(|()| out).unwrap_or_default()
}
