/**
 * What crosses between the image lane and its workers: one tile (or one whole fixed-size image)
 * per task, as 8-bit pixels in; the model's output back as float pixels. Both transferred.
 */
import type { ImageModelSpec } from '../models/image-catalogue.js';
import type { SessionOptions } from './protocol.js';

/** Extra worker data of image-lane threads (text models are not opened there). */
export interface ImageWorkerInit {
  images?: ImageModelSpec[];
  imageSession?: SessionOptions;
}

export interface ImageTask {
  kind: 'image';
  model: string;
  /** height x width x channels, row-major, 0..255; channels: 3 (RGB) or 1 (luma), as the model takes. */
  pixels: Uint8Array;
  width: number;
  height: number;
  channels: 1 | 3;
}

export interface ImageTaskResult {
  /** The model's output as height x width x channels, row-major, 0..255 (clamped). */
  pixels: Float32Array;
  width: number;
  height: number;
  channels: number;
  inferenceMs: number;
}

export function isImageTask(task: unknown): task is ImageTask {
  return typeof task === 'object' && task !== null && (task as { kind?: unknown }).kind === 'image';
}
