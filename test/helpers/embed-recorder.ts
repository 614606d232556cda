/**
 * Records what the embedding routes hand to core: a stand-in for core's `embed` that a test file
 * installs with vi.mock (see http/embedding-inputs.test.ts). Texts and token ids go on to the real
 * `embed`, so core still checks them; requests with image or fused items (which the tiny text
 * models would refuse) are answered with a row per item, its first component the item's index.
 * Only types are imported here: the module mock's factory loads this file before core exists.
 */
import type { CoreContext } from '../../src/core/context.js';
import type { EmbedRequest, EmbedResult, EmbeddingInput } from '../../src/core/embeddings.js';

type Embed = (ctx: CoreContext, request: EmbedRequest, signal?: AbortSignal) => Promise<EmbedResult>;

export interface EmbedRecorder {
  /** Every request embed was called with, in order. */
  requests: EmbedRequest[];
  /** The last request's input. */
  lastInput(): EmbeddingInput | undefined;
  embed: Embed;
}

const hasItems = (input: EmbeddingInput) =>
  Array.isArray(input) && input.some((item) => typeof item === 'object' && !Array.isArray(item));

export function embedRecorder(real: Embed): EmbedRecorder {
  const requests: EmbedRequest[] = [];
  return {
    requests,
    lastInput: () => requests.at(-1)?.input,
    async embed(ctx, request, signal) {
      requests.push(request);
      if (!hasItems(request.input)) return real(ctx, request, signal);
      const model = ctx.registry.resolve(request.model, 'embedding');
      const count = (request.input as unknown[]).length;
      const dimensions = request.dimensions || model.dimensions;
      const vectors = new Float32Array(count * dimensions);
      for (let i = 0; i < count; i++) vectors[i * dimensions] = i;
      const timings = { tokenizeMs: 0, queueMs: 0, loadMs: 0, inferenceMs: 0 };
      return { model: model.id, vectors, dimensions, count, promptTokens: count, timings };
    },
  };
}
