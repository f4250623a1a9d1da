//! Images for `read`: PNG, JPEG, GIF, WebP and BMP, fitted to the model's limits
//! (`input_limits.images.resize`) and returned as base64 image content, or a note saying
//! why they could not be made to fit.

use std::io::Cursor;

use base64::Engine;
use image::{DynamicImage, ImageFormat, ImageReader};
use toolvisor_protocol::results::{
    ImageKind, ImageOmittedKind, ImageSource, ReadImage, ReadImageOmitted, ReadResult,
};

/// The model's image limits. `max_bytes` counts the base64 text, not the raw bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ImageLimits {
    pub max_width: u32,
    pub max_height: u32,
    pub max_bytes: usize,
    pub jpeg_quality: u8,
}

impl Default for ImageLimits {
    fn default() -> Self {
        ImageLimits {
            max_width: 2000,
            max_height: 2000,
            max_bytes: 4_718_592, // 4.5 MiB
            jpeg_quality: 80,
        }
    }
}

/// The largest image file `read` decodes.
pub const MAX_IMAGE_FILE_BYTES: u64 = 64 * 1024 * 1024;

/// How many images are read and fitted at once, daemon-wide: one per core. Each takes tens of
/// MiB while it runs (the file, the pixels, the encoded copy, its base64), and decoding is
/// CPU-bound, so more at once only adds memory: 16 calls of one client reading 3 MB images
/// took +229 MiB at their peak with no limit.
pub fn parallel_images() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get())
}

/// A place among the [`parallel_images`] images being fitted; given back when dropped.
pub(crate) struct ImagePermit(());

static IMAGE_GATE: (std::sync::Mutex<usize>, std::sync::Condvar) =
    (std::sync::Mutex::new(0), std::sync::Condvar::new());

/// Wait (on this blocking thread) for a place to fit an image.
pub(crate) fn image_permit() -> ImagePermit {
    let (busy, freed) = &IMAGE_GATE;
    let mut n = busy.lock().unwrap_or_else(|p| p.into_inner());
    while *n >= parallel_images() {
        n = freed.wait(n).unwrap_or_else(|p| p.into_inner());
    }
    *n += 1;
    ImagePermit(())
}

impl Drop for ImagePermit {
    fn drop(&mut self) {
        let (busy, freed) = &IMAGE_GATE;
        let mut n = busy.lock().unwrap_or_else(|p| p.into_inner());
        *n -= 1;
        freed.notify_one();
    }
}

/// How many images are being fitted now (for tests).
#[cfg(test)]
pub(crate) fn images_in_progress() -> usize {
    *IMAGE_GATE.0.lock().unwrap_or_else(|p| p.into_inner())
}

/// The format of an image file by its magic bytes, if it is one `read` accepts.
pub fn sniff(head: &[u8]) -> Option<ImageFormat> {
    if head.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some(ImageFormat::Png)
    } else if head.starts_with(&[0xFF, 0xD8, 0xFF]) {
        Some(ImageFormat::Jpeg)
    } else if head.starts_with(b"GIF87a") || head.starts_with(b"GIF89a") {
        Some(ImageFormat::Gif)
    } else if head.len() >= 12 && &head[..4] == b"RIFF" && &head[8..12] == b"WEBP" {
        Some(ImageFormat::WebP)
    } else if head.starts_with(b"BM") && head.len() >= 18 {
        // "BM" alone is too weak: also require a plausible DIB header size.
        let dib = u32::from_le_bytes([head[14], head[15], head[16], head[17]]);
        matches!(dib, 12 | 40 | 52 | 56 | 64 | 108 | 124).then_some(ImageFormat::Bmp)
    } else {
        None
    }
}

fn name(format: ImageFormat) -> &'static str {
    match format {
        ImageFormat::Png => "png",
        ImageFormat::Jpeg => "jpeg",
        ImageFormat::Gif => "gif",
        ImageFormat::WebP => "webp",
        ImageFormat::Bmp => "bmp",
        _ => "image",
    }
}

fn mime(format: ImageFormat) -> &'static str {
    match format {
        ImageFormat::Png => "image/png",
        ImageFormat::Jpeg => "image/jpeg",
        ImageFormat::Gif => "image/gif",
        ImageFormat::WebP => "image/webp",
        _ => "application/octet-stream",
    }
}

/// What `read` returns for an image.
#[derive(Clone, Debug)]
pub struct ImageRead {
    pub source_format: &'static str,
    pub source_width: u32,
    pub source_height: u32,
    pub source_bytes: u64,
    /// The image to show, or `None` when it could not be made to fit (`note` says why).
    pub image: Option<Fitted>,
    pub note: Option<String>,
}

#[derive(Clone, Debug)]
pub struct Fitted {
    pub mime_type: &'static str,
    /// Base64 of the encoded image.
    pub data: String,
    pub width: u32,
    pub height: u32,
    /// True when the pixels were resized or re-encoded (false: the file's own bytes).
    pub transformed: bool,
}

fn b64_len(n: usize) -> usize {
    n.div_ceil(3) * 4
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

impl ImageRead {
    /// As `read` answers it: the image fitted, or omitted with why.
    pub fn into_result(self) -> ReadResult {
        let source = ImageSource {
            format: self.source_format.to_string(),
            width: self.source_width,
            height: self.source_height,
            bytes: self.source_bytes,
        };
        match self.image {
            Some(img) => ReadResult::Image(ReadImage {
                kind: ImageKind::Image,
                mime_type: img.mime_type.to_string(),
                data: img.data,
                width: img.width,
                height: img.height,
                transformed: img.transformed,
                source,
                note: self.note,
            }),
            None => ReadResult::ImageOmitted(ReadImageOmitted {
                kind: ImageOmittedKind::ImageOmitted,
                source,
                note: self.note,
            }),
        }
    }
}

/// Fit the image in `bytes` (already sniffed as `format`) to `limits`.
pub fn fit(bytes: &[u8], format: ImageFormat, limits: &ImageLimits) -> Result<ImageRead, String> {
    let mut reader = ImageReader::with_format(Cursor::new(bytes), format);
    reader.limits(decode_limits());
    let (w, h) = reader
        .into_dimensions()
        .map_err(|e| format!("cannot read the {} header: {e}", name(format)))?;
    let mut out = ImageRead {
        source_format: name(format),
        source_width: w,
        source_height: h,
        source_bytes: bytes.len() as u64,
        image: None,
        note: None,
    };
    let passthrough = matches!(
        format,
        ImageFormat::Png | ImageFormat::Jpeg | ImageFormat::Gif | ImageFormat::WebP
    );
    if passthrough
        && w <= limits.max_width
        && h <= limits.max_height
        && b64_len(bytes.len()) <= limits.max_bytes
    {
        out.image = Some(Fitted {
            mime_type: mime(format),
            data: b64(bytes),
            width: w,
            height: h,
            transformed: false,
        });
        return Ok(out);
    }

    let mut reader = ImageReader::with_format(Cursor::new(bytes), format);
    reader.limits(decode_limits());
    let img = reader
        .decode()
        .map_err(|e| format!("cannot decode the {}: {e}", name(format)))?;
    // Lossless sources try PNG first; photos go straight to JPEG.
    let lossless_first = !matches!(format, ImageFormat::Jpeg | ImageFormat::WebP);
    let (mut tw, mut th) = fit_dims(w, h, limits.max_width, limits.max_height);
    let mut last_size = 0;
    for _attempt in 0..8 {
        let scaled = scale(&img, tw, th);
        if lossless_first {
            let png = encode_png(&scaled)?;
            if b64_len(png.len()) <= limits.max_bytes {
                out.image = Some(fitted("image/png", &png, &scaled));
                out.note = Some(describe(&out, limits, "PNG"));
                return Ok(out);
            }
        }
        let jpeg = encode_jpeg(&scaled, limits.jpeg_quality)?;
        if b64_len(jpeg.len()) <= limits.max_bytes {
            out.image = Some(fitted("image/jpeg", &jpeg, &scaled));
            out.note = Some(describe(&out, limits, "JPEG"));
            return Ok(out);
        }
        last_size = b64_len(jpeg.len());
        // Too many bytes even as JPEG: shrink by a quarter and try again.
        if tw <= 16 || th <= 16 {
            break;
        }
        tw = (tw * 3 / 4).max(1);
        th = (th * 3 / 4).max(1);
    }
    out.note = Some(format!(
        "image omitted: {w}×{h} {} ({} bytes) could not be made to fit the model's limit of {} bytes after base64 (smallest attempt {tw}×{th} was {last_size} bytes); raise input_limits.images.resize.maxBytes or look at a cropped copy",
        name(format),
        bytes.len(),
        limits.max_bytes
    ));
    Ok(out)
}

fn decode_limits() -> image::Limits {
    let mut l = image::Limits::default();
    l.max_image_width = Some(50_000);
    l.max_image_height = Some(50_000);
    l.max_alloc = Some(1024 * 1024 * 1024);
    l
}

fn fitted(mime_type: &'static str, bytes: &[u8], img: &DynamicImage) -> Fitted {
    Fitted {
        mime_type,
        data: b64(bytes),
        width: img.width(),
        height: img.height(),
        transformed: true,
    }
}

fn describe(out: &ImageRead, limits: &ImageLimits, as_what: &str) -> String {
    let img = out.image.as_ref().expect("fitted");
    let size = if (img.width, img.height) == (out.source_width, out.source_height) {
        format!("{}×{}", img.width, img.height)
    } else {
        format!(
            "resized from {}×{} to {}×{}",
            out.source_width, out.source_height, img.width, img.height
        )
    };
    format!(
        "{size}, sent as {as_what} to fit the model's limits ({}×{} px, {} bytes after base64)",
        limits.max_width, limits.max_height, limits.max_bytes
    )
}

/// The largest size within `max_w`×`max_h` with the aspect ratio of `w`×`h` (never larger).
pub fn fit_dims(w: u32, h: u32, max_w: u32, max_h: u32) -> (u32, u32) {
    if w <= max_w && h <= max_h {
        return (w, h);
    }
    let (w64, h64) = (u64::from(w), u64::from(h));
    // Compare w/max_w with h/max_h without floating point.
    if w64 * u64::from(max_h) >= h64 * u64::from(max_w) {
        let nh = (h64 * u64::from(max_w))
            .div_ceil(w64)
            .clamp(1, u64::from(max_h));
        (max_w, nh as u32)
    } else {
        let nw = (w64 * u64::from(max_h))
            .div_ceil(h64)
            .clamp(1, u64::from(max_w));
        (nw as u32, max_h)
    }
}

fn scale(img: &DynamicImage, w: u32, h: u32) -> DynamicImage {
    if (w, h) == (img.width(), img.height()) {
        return img.clone();
    }
    // Large reductions: area averaging (fast, no aliasing); small ones: a triangle filter.
    if u64::from(w) * 2 <= u64::from(img.width()) {
        img.thumbnail_exact(w, h)
    } else {
        img.resize_exact(w, h, image::imageops::FilterType::Triangle)
    }
}

fn encode_png(img: &DynamicImage) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    let encoder = image::codecs::png::PngEncoder::new_with_quality(
        &mut out,
        image::codecs::png::CompressionType::Default,
        image::codecs::png::FilterType::Adaptive,
    );
    let img = match img {
        DynamicImage::ImageRgb8(_)
        | DynamicImage::ImageRgba8(_)
        | DynamicImage::ImageLuma8(_)
        | DynamicImage::ImageLumaA8(_) => img.clone(),
        other if other.color().has_alpha() => DynamicImage::ImageRgba8(other.to_rgba8()),
        other => DynamicImage::ImageRgb8(other.to_rgb8()),
    };
    img.write_with_encoder(encoder)
        .map_err(|e| format!("cannot encode PNG: {e}"))?;
    Ok(out)
}

fn encode_jpeg(img: &DynamicImage, quality: u8) -> Result<Vec<u8>, String> {
    // JPEG has no alpha: composite onto white.
    let rgb = if img.color().has_alpha() {
        let rgba = img.to_rgba8();
        let mut rgb = image::RgbImage::new(rgba.width(), rgba.height());
        for (dst, src) in rgb.pixels_mut().zip(rgba.pixels()) {
            let a = u16::from(src[3]);
            for c in 0..3 {
                dst[c] = ((u16::from(src[c]) * a + 255 * (255 - a)) / 255) as u8;
            }
        }
        rgb
    } else {
        img.to_rgb8()
    };
    let mut out = Vec::new();
    let encoder =
        image::codecs::jpeg::JpegEncoder::new_with_quality(&mut out, quality.clamp(1, 100));
    rgb.write_with_encoder(encoder)
        .map_err(|e| format!("cannot encode JPEG: {e}"))?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn png(w: u32, h: u32) -> Vec<u8> {
        let img = image::RgbImage::from_fn(w, h, |x, y| {
            image::Rgb([(x % 256) as u8, (y % 256) as u8, 128])
        });
        let mut out = Vec::new();
        DynamicImage::ImageRgb8(img)
            .write_to(&mut Cursor::new(&mut out), ImageFormat::Png)
            .unwrap();
        out
    }

    #[test]
    fn dims_keep_the_aspect_ratio() {
        assert_eq!(fit_dims(5000, 3000, 2000, 2000), (2000, 1200));
        assert_eq!(fit_dims(3000, 5000, 2000, 2000), (1200, 2000));
        assert_eq!(fit_dims(100, 50, 2000, 2000), (100, 50));
        assert_eq!(fit_dims(10_000, 1, 100, 100), (100, 1));
    }

    #[test]
    fn no_more_images_are_fitted_at_once_than_there_are_cores() {
        let most = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let threads: Vec<_> = (0..4 * parallel_images())
            .map(|_| {
                let most = most.clone();
                std::thread::spawn(move || {
                    let _permit = image_permit();
                    most.fetch_max(images_in_progress(), std::sync::atomic::Ordering::SeqCst);
                    std::thread::sleep(std::time::Duration::from_millis(5));
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let most = most.load(std::sync::atomic::Ordering::SeqCst);
        // Every thread finished, so every permit was given back (4x more threads than places).
        assert!(
            (1..=parallel_images()).contains(&most),
            "{most} images at once"
        );
    }

    #[test]
    fn small_images_pass_through_untouched() {
        let bytes = png(30, 20);
        let r = fit(&bytes, sniff(&bytes).unwrap(), &ImageLimits::default()).unwrap();
        let img = r.image.unwrap();
        assert!(!img.transformed);
        assert_eq!(
            (img.width, img.height, img.mime_type),
            (30, 20, "image/png")
        );
        assert_eq!(img.data, b64(&bytes));
    }

    #[test]
    fn big_images_shrink_and_impossible_ones_get_a_note() {
        let bytes = png(400, 300);
        let limits = ImageLimits {
            max_width: 100,
            max_height: 100,
            ..ImageLimits::default()
        };
        let r = fit(&bytes, ImageFormat::Png, &limits).unwrap();
        let img = r.image.unwrap();
        assert_eq!((img.width, img.height), (100, 75));
        assert!(r.note.unwrap().contains("resized from 400×300 to 100×75"));
        let tiny = ImageLimits {
            max_bytes: 40,
            ..limits
        };
        let r = fit(&bytes, ImageFormat::Png, &tiny).unwrap();
        assert!(r.image.is_none());
        assert!(r.note.unwrap().starts_with("image omitted"));
    }

    #[test]
    fn bmp_becomes_png() {
        let img = image::RgbImage::from_pixel(8, 8, image::Rgb([1, 2, 3]));
        let mut bmp = Vec::new();
        DynamicImage::ImageRgb8(img)
            .write_to(&mut Cursor::new(&mut bmp), ImageFormat::Bmp)
            .unwrap();
        assert_eq!(sniff(&bmp), Some(ImageFormat::Bmp));
        let r = fit(&bmp, ImageFormat::Bmp, &ImageLimits::default()).unwrap();
        assert_eq!(r.image.unwrap().mime_type, "image/png");
    }
}
