/**
 * An image's format and size read from its header, never decoded: headers made by hand (any size,
 * each WebP kind, broken ones), real files of every kind agreeing with what libvips reads, and the
 * refusals of checkImageBytes with their codes.
 */
import sharp from 'sharp';
import { describe, expect, it } from 'vitest';
import { ApiError } from '../../src/errors.js';
import {
  checkImageBytes,
  ImageHeaderError,
  readImageHeader,
  sniffImageFormat,
  type ImageLimits,
} from '../../src/image-header.js';
import { encoded, gif, jpegHeader, pngHeader, randomBytes, webp } from '../helpers/image-bytes.js';

const limits: ImageLimits = { maxBytes: 1024 * 1024, maxPixels: 4096 * 4096 };

function refusal(bytes: Uint8Array, param = 'input[3]', given = limits): ApiError {
  try {
    checkImageBytes(bytes, given, param);
  } catch (error) {
    expect(error).toBeInstanceOf(ApiError);
    return error as ApiError;
  }
  throw new Error('the image was accepted');
}

describe('readImageHeader on headers made by hand', () => {
  it.each([
    ['png', pngHeader(640, 480), 640, 480, 8],
    ['png', pngHeader(1, 70_000, 16, 0), 1, 70_000, 16],
    ['jpeg', jpegHeader(1920, 1080), 1920, 1080, 8],
    ['jpeg', jpegHeader(300, 200, 0xc2), 300, 200, 8],
    ['webp', webp.lossy(1000, 16383), 1000, 16383, 8],
    ['webp', webp.lossless(16384, 1), 16384, 1, 8],
    ['webp', webp.extended(123, 45), 123, 45, 8],
    ['webp', webp.animated(9000, 7000), 9000, 7000, 8],
  ] as const)('%s %#: %dx%d', (format, bytes, width, height, bitDepth) => {
    expect(sniffImageFormat(bytes)).toBe(format);
    expect(readImageHeader(bytes, format)).toEqual({ format, width, height, bitDepth });
  });

  it('reads a 20,000 x 20,000 PNG from a header of a few dozen bytes', () => {
    const bytes = pngHeader(20_000, 20_000);
    expect(bytes.length).toBeLessThan(100);
    expect(readImageHeader(bytes, 'png')).toMatchObject({ width: 20_000, height: 20_000 });
  });

  it.each([
    ['a PNG cut inside IHDR', pngHeader(10, 10).subarray(0, 30), 'png', /ends inside the IHDR/],
    ['a PNG whose IHDR CRC is wrong', Buffer.from(pngHeader(10, 10)).fill(7, 29, 33), 'png', /CRC/],
    ['a PNG of width 0', pngHeader(0, 10), 'png', /0x10 pixels/],
    ['a PNG of bit depth 3', pngHeader(10, 10, 3), 'png', /bit depth 3/],
    ['a JPEG cut before its frame header', jpegHeader(10, 10).subarray(0, 30), 'jpeg', /ends/],
    ['a JPEG whose height is left to a DNL marker', jpegHeader(10, 0), 'jpeg', /10x0/],
    ['a JPEG whose scan comes first', Buffer.from([0xff, 0xd8, 0xff, 0xda, 0, 4, 0, 0]), 'jpeg', /0xDA/],
    ['a JPEG with a byte that is no marker', Buffer.from([0xff, 0xd8, 0xff, 0xe0, 0, 2, 0x12]), 'jpeg', /marker/],
    ['a JPEG segment shorter than its length', Buffer.from([0xff, 0xd8, 0xff, 0xe0, 0, 1]), 'jpeg', /declares 1/],
    ['a lossy WebP cut in its frame header', webp.lossy(10, 10).subarray(0, 26), 'webp', /ends inside the VP8/],
    ['a lossless WebP without its signature', Buffer.from(webp.lossless(10, 10)).fill(0, 20, 21), 'webp', /VP8L/],
    ['a WebP of an unknown chunk', Buffer.from(webp.lossy(10, 10)).fill(0x41, 12, 16), 'webp', /"AAAA"/],
    [
      'an extended WebP whose bitstream is larger than its canvas',
      webp.extended(16, 16, { width: 16000, height: 16000 }),
      'webp',
      /16000x16000 pixels on a canvas of 16x16/,
    ],
    ['an extended WebP without its bitstream', webp.extended(16, 16).subarray(0, 50), 'webp', /before the image/],
  ] as const)('refuses %s', (_name, bytes, format, reason) => {
    expect(() => readImageHeader(bytes, format)).toThrow(ImageHeaderError);
    expect(() => readImageHeader(bytes, format)).toThrow(reason);
  });
});

describe('readImageHeader on files encoded by libvips', () => {
  const files = [
    ['png', 'RGB', () => encoded('png', 37, 23)],
    ['png', 'RGBA', () => encoded('png', 5, 300, { alpha: true })],
    ['jpeg', 'baseline', () => encoded('jpeg', 64, 48)],
    ['jpeg', 'progressive', () => encoded('jpeg', 33, 65, { progressive: true })],
    ['webp', 'lossy', () => encoded('webp', 50, 20)],
    ['webp', 'lossless', () => encoded('webp', 21, 40, { lossless: true })],
    ['webp', 'lossy with alpha (VP8X, ALPH)', () => encoded('webp', 31, 17, { alpha: true })],
  ] as const;

  it.each(files)('%s %s: the size libvips reads', async (format, _kind, make) => {
    const bytes = await make();
    const metadata = await sharp(bytes).metadata();
    expect(readImageHeader(bytes, format)).toMatchObject({ format, width: metadata.width, height: metadata.height });
  });

  it.each(files)('%s %s: every truncation is read exactly or refused as a 400', async (format, _kind, make) => {
    const bytes = await make();
    const header = readImageHeader(bytes, format);
    for (let length = 0; length < Math.min(bytes.length, 400); length++) {
      const cut = bytes.subarray(0, length);
      let checked;
      try {
        checked = checkImageBytes(cut, limits, 'image');
      } catch (error) {
        expect(error, `${length} bytes`).toBeInstanceOf(ApiError);
        expect((error as ApiError).status, `${length} bytes`).toBe(400);
        continue;
      }
      expect(checked, `${length} bytes`).toEqual(header);
    }
  });
});

describe('checkImageBytes', () => {
  it('answers the header of an image within the limits', async () => {
    const bytes = await encoded('jpeg', 40, 30);
    expect(checkImageBytes(bytes, limits, 'input[0]')).toEqual({ format: 'jpeg', width: 40, height: 30, bitDepth: 8 });
  });

  it('refuses a 20,000 x 20,000 PNG header before any decoding, naming the limit and its setting', () => {
    const error = refusal(pngHeader(20_000, 20_000));
    expect(error).toMatchObject({ code: 'invalid_image', status: 400, param: 'input[3]' });
    expect(error.message).toBe(
      'input[3] is 20000x20000 pixels, over the limit of 16777216 pixels (ONNX_GATEWAY_IMAGE_MAX_PIXELS).',
    );
  });

  it('refuses each WebP kind over the pixel limit', () => {
    for (const bytes of [
      webp.lossy(16383, 16383),
      webp.lossless(16384, 16384),
      webp.extended(5000, 5000),
      webp.animated(100_000, 100_000),
    ])
      expect(refusal(bytes)).toMatchObject({ code: 'invalid_image', status: 400 });
  });

  it('counts width x height against the limit: at it passes, one pixel over is refused', () => {
    const given = { maxBytes: 1024, maxPixels: 100 * 50 };
    expect(checkImageBytes(pngHeader(100, 50), given, 'x')).toMatchObject({ width: 100, height: 50 });
    expect(refusal(pngHeader(101, 50), 'x', given).code).toBe('invalid_image');
  });

  it('refuses bytes over the byte limit with 413, naming the setting', () => {
    const error = refusal(pngHeader(10, 10), 'images[0]', { maxBytes: 40, maxPixels: 1000 });
    expect(error).toMatchObject({ code: 'payload_too_large', status: 413, param: 'images[0]' });
    expect(error.message).toMatch(/over the limit of 40 bytes.*ONNX_GATEWAY_EMBEDDING_IMAGE_MAX_BYTES/);
  });

  it('names the settings the limits come from when told', () => {
    const error = refusal(pngHeader(100, 100), 'image[0]', {
      maxBytes: 1024,
      maxPixels: 10,
      settings: { maxBytes: 'imageBodyLimit', maxPixels: 'imageMaxPixels' },
    });
    expect(error.message).toMatch(/ONNX_GATEWAY_IMAGE_MAX_PIXELS/);
  });

  it('refuses a GIF, and other image formats, with 415 naming the format', () => {
    const error = refusal(gif);
    expect(error).toMatchObject({ code: 'unsupported_media_type', status: 415, param: 'input[3]' });
    expect(error.message).toBe('input[3] is GIF; send PNG, JPEG or WebP.');
    const bmp = Buffer.concat([Buffer.from('BM'), Buffer.alloc(60)]);
    const svg = Buffer.from('<?xml version="1.0"?><svg xmlns="http://www.w3.org/2000/svg"/>');
    const tiff = Buffer.from([0x49, 0x49, 0x2a, 0, 8, 0, 0, 0]);
    const avif = Buffer.concat([Buffer.from([0, 0, 0, 0x20]), Buffer.from('ftypavif'), Buffer.alloc(20)]);
    for (const [bytes, name] of [
      [bmp, 'BMP'],
      [svg, 'SVG'],
      [tiff, 'TIFF'],
      [avif, 'AVIF'],
    ] as const)
      expect(refusal(bytes).message).toBe(`input[3] is ${name}; send PNG, JPEG or WebP.`);
  });

  it('refuses random bytes, text and empty bytes as no image (400)', () => {
    for (const bytes of [randomBytes(5000), Buffer.from('hello, world'), new Uint8Array(0)]) {
      const error = refusal(bytes);
      expect(error).toMatchObject({ code: 'invalid_image', status: 400, param: 'input[3]' });
    }
    expect(refusal(randomBytes(100)).message).toBe('input[3] is not an image: send PNG, JPEG or WebP.');
  });

  it('refuses a header that can not be read with 400, saying why', () => {
    const error = refusal(pngHeader(10, 10).subarray(0, 20));
    expect(error).toMatchObject({ code: 'invalid_image', status: 400 });
    expect(error.message).toBe('input[3] is a PNG whose header can not be read: the file ends inside the IHDR chunk.');
  });
});
