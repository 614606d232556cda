/**
 * An image preprocessing thread (engine/image-preprocess-pool.ts): decodes one image at a time and
 * writes its pixel_values, exactly as the model's image processor computes them (image-preprocess/),
 * into its row of its batch's tensor, which lives in shared memory. A vision tower's session thread
 * then only runs the tower: the decodes and resizes of a batch go side by side on every core,
 * however few sessions the tower has (an accelerator's one).
 */
import { parentPort } from 'node:worker_threads';
import type { ImageProcessorSpec } from '../models/image-processor.js';
import { preprocessInto } from './image-preprocess/index.js';
import type { CloseMessage, TaskMessage, ThreadMessage } from './messages.js';

export interface PreprocessTask {
  bytes: Uint8Array;
  processor: ImageProcessorSpec;
  maxPixels: number;
  /** The batch's pixel_values (rows x 3 x height x width float32, over a SharedArrayBuffer). */
  pixels: SharedArrayBuffer;
  /** Where this image's row starts, in floats. */
  offset: number;
}

/** An image that could not be decoded is answered as a result, not an error: it fails its own request only. */
export interface PreprocessResult {
  failure?: string;
}

const port = parentPort!;
const post = (message: ThreadMessage): void => port.postMessage(message);
async function answer({ id, task }: TaskMessage): Promise<void> {
  const { bytes, processor, maxPixels, pixels, offset } = task as PreprocessTask;
  try {
    await preprocessInto(bytes, processor, new Float32Array(pixels), offset, maxPixels);
    post({ id, result: {} satisfies PreprocessResult });
  } catch (error) {
    post({ id, result: { failure: (error as Error).message } satisfies PreprocessResult });
  }
}

// One image at a time, in the order they came.
let queue: Promise<void> = Promise.resolve();
post({ ready: null });
port.on('message', (message: TaskMessage | CloseMessage) => {
  if ('close' in message) queue = queue.then(() => post({ closed: true }));
  else queue = queue.then(() => answer(message));
});
