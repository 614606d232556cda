/**
 * The image embedding workloads of the HTTP bench (bench/http.ts), named in --workloads:
 *   embed-image-224    16 JPEGs near the model's size (224x224 to 256x298; the resize is small or none)
 *   embed-image-photo  8 photo-like 1920x1080 JPEGs at quality 90 (smooth gradients, hard-edged
 *                      shapes and sensor-like noise, so that decoding one costs what a photo's decode costs)
 * one image per request as a data URI on /v1/embeddings. The images are made here, deterministically,
 * so that the gateway and raw ONNX Runtime (bench/raw-target.ts, fed the same images' pixel_values,
 * computed before the clock) see the same pixels in every process and on every run.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import sharp from 'sharp';
import { readImageProcessor } from '../src/models/image-processor.js';
import { preprocessInto } from '../src/worker/image-preprocess/index.js';
import { rng } from './mix.js';

export const DEFAULT_IMAGE_MODEL = 'Xenova/clip-vit-base-patch32';
export const IMAGE_WORKLOADS = ['embed-image-224', 'embed-image-photo'] as const;
export const isImageWorkload = (name: string): boolean => (IMAGE_WORKLOADS as readonly string[]).includes(name);

/** Photo-like RGB: gradients and rings, a few hard-edged shapes, Gaussian noise (sigma 9). */
function photoPixels(width: number, height: number, seed: number): Uint8Array {
  // The mix's deterministic PRNG, so the images are the same on every run.
  const random = rng(seed);
  const gauss = () => Math.sqrt(-2 * Math.log(1 - random())) * Math.cos(2 * Math.PI * random());
  const shapes = Array.from({ length: 6 }, () => ({
    x: random() * width,
    y: random() * height,
    r: (0.05 + random() * 0.2) * Math.min(width, height),
    rgb: [random() * 255, random() * 255, random() * 255],
  }));
  const out = new Uint8Array(width * height * 3);
  for (let y = 0, i = 0; y < height; y++) {
    for (let x = 0; x < width; x++, i += 3) {
      let r = 128 + 100 * Math.sin(x / (width / 3.1) + seed) * Math.cos(y / (height / 2.3));
      let g = (255 * (x + y)) / (width + height);
      let b = 128 + 90 * Math.cos(Math.hypot(x - width * 0.6, y - height * 0.4) / (Math.min(width, height) / 7 + 1));
      for (const s of shapes) {
        if ((x - s.x) ** 2 + (y - s.y) ** 2 < s.r * s.r) [r, g, b] = [s.rgb[0]!, s.rgb[1]!, s.rgb[2]!];
      }
      out[i] = Math.min(255, Math.max(0, r + 9 * gauss()));
      out[i + 1] = Math.min(255, Math.max(0, g + 9 * gauss()));
      out[i + 2] = Math.min(255, Math.max(0, b + 9 * gauss()));
    }
  }
  return out;
}

async function jpeg(width: number, height: number, seed: number): Promise<Uint8Array> {
  const pixels = photoPixels(width, height, seed);
  return new Uint8Array(
    await sharp(pixels, { raw: { width, height, channels: 3 } })
      .jpeg({ quality: 90 })
      .toBuffer(),
  );
}

const SMALL_SIZES: Array<[number, number]> = [
  [224, 224],
  [256, 224],
  [224, 298],
  [240, 240],
];

const made = new Map<string, Promise<Uint8Array[]>>();

/** The encoded images of an image workload (made once per process). */
export function workloadImages(workload: string): Promise<Uint8Array[]> {
  let images = made.get(workload);
  if (!images) {
    if (workload === 'embed-image-224')
      images = Promise.all(Array.from({ length: 16 }, (_, i) => jpeg(...SMALL_SIZES[i % 4]!, i)));
    else if (workload === 'embed-image-photo')
      images = Promise.all(Array.from({ length: 8 }, (_, i) => jpeg(1920, 1080, 100 + i)));
    else throw new Error(`unknown image workload ${workload}; known: ${IMAGE_WORKLOADS.join(', ')}`);
    made.set(workload, images);
  }
  return images;
}

/** One /v1/embeddings body per image: the image alone, as a data URI. */
export function imageBodies(model: string, images: Uint8Array[]): string[] {
  return images.map((bytes) =>
    JSON.stringify({
      model,
      input: [
        { type: 'image_url', image_url: { url: `data:image/jpeg;base64,${Buffer.from(bytes).toString('base64')}` } },
      ],
    }),
  );
}

/** The vision graph of an image-text model's folder, and the pixel_values of `images` as its processor makes them. */
export async function preprocessedImages(
  folder: string,
  images: Uint8Array[],
): Promise<{ vision: string; pixels: Float32Array[]; height: number; width: number }> {
  const spec = readImageProcessor(JSON.parse(readFileSync(join(folder, 'preprocessor_config.json'), 'utf8')));
  const pixels = await Promise.all(
    images.map(async (bytes) => {
      const out = new Float32Array(3 * spec.width * spec.height);
      await preprocessInto(bytes, spec, out, 0, 100_000_000);
      return out;
    }),
  );
  return { vision: join(folder, 'onnx', 'vision_model.onnx'), pixels, height: spec.height, width: spec.width };
}
