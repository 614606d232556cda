/**
 * The context the edit operation runs in: the lane the composition root started, and the
 * admission that decides how many edits use it at once.
 */
import type { Config } from '../config.js';
import type { ImageTaskRunner } from '../engine/image-pool.js';
import type { ImageRegistry } from '../models/image-registry.js';
import type { Registry } from '../models/registry.js';
import { EditAdmission } from './admission.js';
import type { ImagesContext } from './context.js';

export function imagesContext(
  config: Pick<Config, 'imageConcurrency' | 'imageQueueCapacity' | 'imageMaxEdge' | 'imageMaxPixels'>,
  pipelines: ImageRegistry,
  lane: ImageTaskRunner,
  text: Registry,
): ImagesContext {
  // Prompts are counted with the first served text model's tokenizer (image models have none).
  const tokenizer = text.list()[0]?.tokenizer;
  return {
    pipelines,
    lane,
    admission: new EditAdmission({ concurrency: config.imageConcurrency, waitingCapacity: config.imageQueueCapacity }),
    limits: { maxEdge: config.imageMaxEdge, maxPixels: config.imageMaxPixels },
    countTextTokens: (prompt) => (tokenizer ? tokenizer.encode(prompt).length : 0),
  };
}
