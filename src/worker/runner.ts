/**
 * One ONNX Runtime session and the code that turns a batch into model inputs and the model's
 * outputs into results. What to feed and which output to read come from the registry, which read
 * the graph's interface: `token_type_ids` and `position_ids` only when declared, decoder caches
 * (`past_key_values.*`) fed empty; embedders read `sentence_embedding` when the graph pools itself,
 * else pool token vectors here; rerankers and classifiers read `logits`. Rows are right-padded, so a row's last
 * real token is at `length - 1` whatever its neighbours.
 *
 * An image-text model's text tower (multimodal.ts) may take no attention mask, be fed rows padded
 * to a fixed length (SigLIP), or be a joint graph that also takes `pixel_values` (a dummy of zeros).
 *
 * A batch may ask for another kind of output than the dense vector (heads.ts): sparse vectors,
 * pooled here from a SPLADE model's logits or a model's token weights so that only the nonzero
 * weights leave the worker, or token vectors (each row's real tokens).
 */
import * as ort from 'onnxruntime-node';
import type { ModelLoadSpec } from '../models/registry.js';
import { pool } from '../vectors/pooling.js';
import { spladePool, tokenRows, tokenWeightsPool } from '../vectors/sparse.js';
import type { BatchResult, BatchTask, ModelReport, OutputKind, SessionOptions } from './protocol.js';
import { toFloat32 } from './half.js';
import { ortSessionOptions } from './session-options.js';

export class Runner {
  private width = 0;
  /** Cross-encoders and classifiers: a head's logits [rows, labels], fed pairs with their token types. */
  private readonly readsLogits: boolean;
  /** Token ids a sparse vector leaves out. */
  private readonly skip: ReadonlySet<number>;

  private constructor(
    readonly spec: ModelLoadSpec,
    private readonly session: ort.InferenceSession,
  ) {
    this.readsLogits = spec.task === 'rerank' || spec.task === 'classify';
    this.skip = new Set(spec.specialIds);
  }

  static async open(spec: ModelLoadSpec, options: SessionOptions, device?: string): Promise<Runner> {
    const session = await ort.InferenceSession.create(
      spec.onnxPath,
      ortSessionOptions(options, device, spec.externalDataDir),
    );
    return new Runner(spec, session);
  }

  /** Runs a short and a longer input once so first requests do not pay for allocation; returns what was found. */
  async warmUp(loadMs: number): Promise<ModelReport> {
    const lengths = Int32Array.of(8, 64);
    const filler = this.spec.fillerId ?? (this.spec.padId === 0 ? 100 : this.spec.padId + 1);
    const ids = new Int32Array(72).fill(filler);
    // Every kind the model gives, so that the first request of each finds its buffers ready.
    let width = 0;
    for (const kind of this.spec.heads.kinds) {
      const result = await this.run({
        model: this.spec.id,
        ids: ids.slice(),
        lengths,
        typeIds: this.readsLogits ? new Uint8Array(72) : undefined,
        kind,
      });
      if (kind === this.spec.heads.kinds[0]) width = result.width;
    }
    return { id: this.spec.id, inputs: this.session.inputNames.slice(), output: this.spec.output.name, width, loadMs };
  }

  async run(task: BatchTask): Promise<BatchResult> {
    const { feeds: wanted } = this.spec;
    const kind: OutputKind = task.kind ?? 'dense';
    const outputName = this.outputOf(kind);
    const rows = task.lengths.length;
    let seqLen = 0;
    for (let i = 0; i < rows; i++) seqLen = Math.max(seqLen, task.lengths[i]!);
    // Rows padded to the length the model was trained with, whatever the batch's longest.
    if (wanted.fixedLength !== undefined) seqLen = Math.max(seqLen, wanted.fixedLength);
    const size = rows * seqLen;
    const wide = wanted.idType === 'int64';
    const ids = wide ? new BigInt64Array(size) : new Int32Array(size);
    const mask = wide ? new BigInt64Array(size) : new Int32Array(size);
    const typeIds = wanted.tokenTypeIds ? (wide ? new BigInt64Array(size) : new Int32Array(size)) : undefined;
    const positions = wanted.positionIds ? (wide ? new BigInt64Array(size) : new Int32Array(size)) : undefined;
    const pad = wide ? BigInt(this.spec.padId) : this.spec.padId;
    const one = wide ? 1n : 1;
    ids.fill(pad as never);
    let offset = 0;
    for (let r = 0; r < rows; r++) {
      const length = task.lengths[r]!;
      const attended = task.attended?.[r] ?? length;
      const base = r * seqLen;
      for (let t = 0; t < length; t++) {
        const id = task.ids[offset + t]!;
        ids[base + t] = wide ? BigInt(id) : id;
        if (t < attended) mask[base + t] = one;
        if (typeIds && task.typeIds)
          typeIds[base + t] = wide ? BigInt(task.typeIds[offset + t]!) : task.typeIds[offset + t]!;
        if (positions) positions[base + t] = wide ? BigInt(t) : t;
      }
      offset += length;
    }
    const dims = [rows, seqLen];
    const type = wanted.idType;
    const feeds: Record<string, ort.Tensor> = { input_ids: new ort.Tensor(type, ids, dims) };
    if (wanted.attentionMask !== false) feeds.attention_mask = new ort.Tensor(type, mask, dims);
    if (wanted.pixelDummy) feeds.pixel_values = dummyPixels(wanted.pixelDummy, rows);
    if (typeIds) feeds.token_type_ids = new ort.Tensor(type, typeIds, dims);
    if (positions) feeds.position_ids = new ort.Tensor(type, positions, dims);
    for (const past of wanted.pastKeyValues) feeds[past.name] = emptyPast(past, rows);

    const started = performance.now();
    const results = await this.session.run(feeds, [outputName]);
    const inferenceMs = performance.now() - started;
    const tensor = results[outputName]!;
    const data = toFloat32(tensor);

    if (kind !== 'dense') {
      const result = this.perToken(kind, tensor, data, task, seqLen);
      for (const value of Object.values(results)) value.dispose?.();
      return { ...result, inferenceMs };
    }
    const out = this.spec.output;
    let output: Float32Array;
    let width: number;
    if (this.readsLogits || out.pooled) {
      // logits [rows, labels] or sentence_embedding [rows, width]: copied out before the tensor is disposed.
      width = Number(tensor.dims[1] ?? 1);
      output = data === tensor.data ? new Float32Array(data) : data;
    } else {
      width = Number(tensor.dims[2]);
      output = pool(this.spec.pooling, data, task.lengths, seqLen, width);
    }
    for (const value of Object.values(results)) value.dispose?.();
    this.width = width;
    return { output, width, inferenceMs };
  }

  /** The graph output that gives `kind`; the engine only asks for kinds the model has. */
  private outputOf(kind: OutputKind): string {
    const { heads, output } = this.spec;
    if (kind === 'dense') return output.name;
    const name = kind === 'sparse' ? heads.sparse?.output : heads.tokens?.output;
    if (!name) throw new Error(`Model "${this.spec.id}" gives no ${kind} output.`);
    return name;
  }

  /** Sparse vectors or token vectors from a per-token output `[rows, seqLen, width]`. */
  private perToken(
    kind: OutputKind,
    tensor: ort.Tensor,
    data: Float32Array,
    task: BatchTask,
    seqLen: number,
  ): Omit<BatchResult, 'inferenceMs'> {
    const width = tensor.dims.length > 2 ? Number(tensor.dims[2]) : 1;
    if (kind === 'tokens')
      return { output: tokenRows(data, task.lengths, seqLen, width), width, counts: Int32Array.from(task.lengths) };
    const sparse = this.spec.heads.sparse!;
    const rows =
      sparse.pooling === 'mlm'
        ? spladePool(data, task.ids, task.lengths, seqLen, width, this.skip)
        : tokenWeightsPool(data, task.ids, task.lengths, seqLen, this.skip);
    return {
      output: rows.values,
      width: sparse.pooling === 'mlm' ? width : sparse.dimension,
      counts: rows.counts,
      indices: rows.indices,
    };
  }

  async release(): Promise<void> {
    await this.session.release();
  }
}

/** A joint image-text graph's pixel_values when it runs for texts: zeros, one image or one per row where the graph ties the batches. */
function dummyPixels(dummy: NonNullable<ModelLoadSpec['feeds']['pixelDummy']>, rows: number): ort.Tensor {
  const dims = [dummy.batchMatched ? rows : 1, 3, dummy.height, dummy.width];
  const size = dims.reduce((a, b) => a * b, 1);
  if (dummy.type === 'float16') return new ort.Tensor('float16', new Uint16Array(size), dims);
  return new ort.Tensor('float32', new Float32Array(size), dims);
}

/** An empty decoder cache: the batch size for the first dimension, no past positions, the fixed sizes as declared. */
function emptyPast(past: ModelLoadSpec['feeds']['pastKeyValues'][number], rows: number): ort.Tensor {
  const dims = past.shape.map((d, i) => (i === 0 ? rows : typeof d === 'number' ? d : 0));
  if (past.type === 'float16') return new ort.Tensor('float16', new Uint16Array(0), dims);
  return new ort.Tensor('float32', new Float32Array(0), dims);
}
