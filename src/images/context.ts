/**
 * What the image operations need, handed in by whoever composes the server.
 */
import type { ImageTaskRunner } from '../engine/image-pool.js';
import type { ImageRegistry } from '../models/image-registry.js';
import type { EditAdmission } from './admission.js';

export interface ImageLimits {
  /** Longest edge of an output image. */
  maxEdge: number;
  /** Most pixels of an input image (decoded) or an output image. */
  maxPixels: number;
}

export interface ImagesContext {
  pipelines: ImageRegistry;
  lane: ImageTaskRunner;
  /** Edits' turns: how many run at once, how many may wait. */
  admission: EditAdmission;
  limits: ImageLimits;
  /** Tokens of a prompt, for usage (the served text model's tokenizer). */
  countTextTokens(text: string): number;
}
