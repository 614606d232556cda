/**
 * Embeddings in int8, uint8, binary or ubinary, as sentence-transformers' quantize_embeddings gives
 * them (vectors/quantize.ts), from the float vectors of a request (after its dimensions cut and
 * normalisation). int8 and uint8 map each dimension onto 256 levels over the range that the model's
 * embeddings of the shipped calibration text span, processed as the request's are: computed on the
 * first such request for a model and shape (dimensions, normalisation), then kept.
 */
import { loadCalibrationTexts } from '../models/calibration-text.js';
import type { ServedModel } from '../models/registry.js';
import {
  calibrationRanges,
  quantize,
  quantizedWidth,
  type Precision,
  type QuantizationRanges,
} from '../vectors/quantize.js';
import type { CoreContext } from './context.js';
import { embed, type EmbedRequest, type EmbedResult } from './embeddings.js';

export const precisions = ['int8', 'uint8', 'binary', 'ubinary'] as const satisfies readonly Precision[];
export type { Precision };

export interface QuantizedEmbeddings {
  /** count x width, row-major. */
  rows: Int8Array | Uint8Array;
  /** Values per row: the dimensions, or for binary and ubinary a byte per 8 of them. */
  width: number;
}

/** Per served model (a new registry, after a pull, calibrates again), the ranges by request shape. */
const calibrations = new WeakMap<ServedModel, Map<string, Promise<QuantizationRanges>>>();

function rangesFor(
  ctx: CoreContext,
  model: ServedModel,
  shape: Pick<EmbedRequest, 'dimensions' | 'normalize'>,
): Promise<QuantizationRanges> {
  let byShape = calibrations.get(model);
  if (!byShape) calibrations.set(model, (byShape = new Map<string, Promise<QuantizationRanges>>()));
  const key = `${shape.dimensions ?? 0}:${shape.normalize ?? 'default'}`;
  let ranges = byShape.get(key);
  if (!ranges) {
    const pending = (async () => {
      const { texts } = await loadCalibrationTexts();
      // In requests of at most the server's input limit, as any client's.
      const parts: EmbedResult[] = [];
      for (let at = 0; at < texts.length; at += ctx.limits.maxInputs) {
        const input = texts.slice(at, at + ctx.limits.maxInputs);
        parts.push(
          await embed(ctx, {
            model: model.id,
            input,
            dimensions: shape.dimensions,
            normalize: shape.normalize,
            truncate: true,
          }),
        );
      }
      const rows = new Float32Array(parts.reduce((sum, part) => sum + part.vectors.length, 0));
      parts.reduce((at, part) => (rows.set(part.vectors, at), at + part.vectors.length), 0);
      return calibrationRanges(rows, parts[0]!.dimensions);
    })();
    // A calibration that failed (a full queue, a server shutting down) is tried again by the next request.
    pending.catch(() => byShape.delete(key));
    byShape.set(key, pending);
    ranges = pending;
  }
  return ranges;
}

/** `result`, the float embeddings of `request`, in `precision`. */
export async function quantizeEmbeddings(
  ctx: CoreContext,
  request: EmbedRequest,
  result: EmbedResult,
  precision: Precision,
): Promise<QuantizedEmbeddings> {
  const scalar = precision === 'int8' || precision === 'uint8';
  const ranges = scalar ? await rangesFor(ctx, ctx.registry.resolve(result.model, 'embedding'), request) : undefined;
  return {
    rows: quantize(result.vectors, result.dimensions, precision, ranges),
    width: quantizedWidth(precision, result.dimensions),
  };
}
