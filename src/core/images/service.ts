/**
 * Starts the image side of a server: the served pipelines' lane of workers and the context the
 * edit operation runs in.
 */
import type { Config } from '../../config.js';
import { ImageLane } from '../../engine/image-pool.js';
import type { ImageRegistry } from '../../models/image-catalogue.js';
import type { Registry } from '../../models/registry.js';
import type { ImagesContext } from './context.js';

/** Tiles waiting for an image thread before the lane refuses more (edits keep few in flight each). */
const laneQueueCapacity = 1024;

export function startImages(
  config: Pick<Config, 'imageWorkers' | 'imageIntraOpThreads' | 'ortSpinning' | 'imageMemoryArena' | 'imageConcurrency' | 'imageQueueCapacity' | 'imageMaxEdge' | 'imageMaxPixels'>,
  pipelines: ImageRegistry,
  text: Registry,
): { context: ImagesContext; lane: ImageLane } {
  const lane = new ImageLane({
    workers: config.imageWorkers,
    models: pipelines.list().map(({ id, onnxPath, input, output }) => ({ id, onnxPath, input, output })),
    session: { intraOpThreads: config.imageIntraOpThreads, spinning: config.ortSpinning, memoryArena: config.imageMemoryArena },
    queueCapacity: laneQueueCapacity,
    concurrency: config.imageConcurrency,
    waitingCapacity: config.imageQueueCapacity,
  });
  // Prompts are counted with the first served text model's tokenizer (image models have none).
  const tokenizer = text.list()[0]?.tokenizer;
  const context: ImagesContext = {
    pipelines,
    lane,
    limits: { maxEdge: config.imageMaxEdge, maxPixels: config.imageMaxPixels },
    countTextTokens: (prompt) => (tokenizer ? tokenizer.encode(prompt).length : 0),
  };
  return { context, lane };
}
