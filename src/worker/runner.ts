/**
 * One ONNX Runtime session and the code that turns a batch into model inputs and the model's
 * outputs into results. Inputs and the output are chosen from what the graph declares:
 * `token_type_ids` is fed only if declared; embedders use `sentence_embedding` when the graph has
 * it, otherwise pool `last_hidden_state`; rerankers use `logits`.
 */
import * as ort from 'onnxruntime-node';
import type { ModelLoadSpec } from '../models/registry.js';
import { clsPool, meanPool } from '../vectors/pooling.js';
import type { BatchResult, BatchTask, ModelReport, SessionOptions } from './protocol.js';
import { ortSessionOptions } from './session-options.js';

const pooledOutputs = ['sentence_embedding'];
const tokenOutputs = ['last_hidden_state', 'token_embeddings'];

export class Runner {
  private constructor(
    readonly spec: ModelLoadSpec,
    private readonly session: ort.InferenceSession,
    private readonly output: string,
    private readonly pooled: boolean,
    private readonly feedsTypeIds: boolean,
    private width: number,
  ) {}

  static async open(spec: ModelLoadSpec, options: SessionOptions): Promise<Runner> {
    const session = await ort.InferenceSession.create(spec.onnxPath, ortSessionOptions(options));
    const inputs = session.inputNames;
    for (const required of ['input_ids', 'attention_mask']) {
      if (!inputs.includes(required)) throw new Error(`${spec.onnxPath}: the graph has no "${required}" input (inputs: ${inputs.join(', ')}).`);
    }
    const outputs = session.outputNames;
    let output: string | undefined;
    let pooled = false;
    if (spec.task === 'rerank') {
      output = outputs.includes('logits') ? 'logits' : undefined;
    } else {
      output = pooledOutputs.find((name) => outputs.includes(name));
      pooled = output !== undefined;
      output ??= tokenOutputs.find((name) => outputs.includes(name));
    }
    if (!output) {
      const wanted = spec.task === 'rerank' ? '"logits"' : '"sentence_embedding" or "last_hidden_state"';
      throw new Error(`${spec.onnxPath}: a ${spec.task} model needs an output named ${wanted} (outputs: ${outputs.join(', ')}).`);
    }
    return new Runner(spec, session, output, pooled, inputs.includes('token_type_ids'), 0);
  }

  /** Runs a short and a longer input once so first requests do not pay for allocation; returns what was found. */
  async warmUp(loadMs: number): Promise<ModelReport> {
    const lengths = Int32Array.of(8, 64);
    const ids = new Int32Array(72).fill(this.spec.padId === 0 ? 100 : this.spec.padId + 1);
    const result = await this.run({ model: this.spec.id, ids, lengths, typeIds: this.spec.task === 'rerank' ? new Uint8Array(72) : undefined });
    if (this.spec.task === 'rerank' && result.width !== 1) {
      throw new Error(`${this.spec.onnxPath}: "logits" has ${result.width} columns; a reranker must output one relevance logit per pair.`);
    }
    return { id: this.spec.id, inputs: this.session.inputNames.slice(), output: this.output, width: result.width, loadMs };
  }

  async run(task: BatchTask): Promise<BatchResult> {
    const rows = task.lengths.length;
    let seqLen = 0;
    for (let i = 0; i < rows; i++) seqLen = Math.max(seqLen, task.lengths[i]!);
    const size = rows * seqLen;
    const inputIds = new BigInt64Array(size).fill(BigInt(this.spec.padId));
    const mask = new BigInt64Array(size);
    const typeIds = this.feedsTypeIds ? new BigInt64Array(size) : undefined;
    let offset = 0;
    for (let r = 0; r < rows; r++) {
      const length = task.lengths[r]!;
      const base = r * seqLen;
      for (let t = 0; t < length; t++) {
        inputIds[base + t] = BigInt(task.ids[offset + t]!);
        mask[base + t] = 1n;
        if (typeIds && task.typeIds) typeIds[base + t] = BigInt(task.typeIds[offset + t]!);
      }
      offset += length;
    }
    const dims = [rows, seqLen];
    const feeds: Record<string, ort.Tensor> = {
      input_ids: new ort.Tensor('int64', inputIds, dims),
      attention_mask: new ort.Tensor('int64', mask, dims),
    };
    if (typeIds) feeds.token_type_ids = new ort.Tensor('int64', typeIds, dims);

    const started = performance.now();
    const results = await this.session.run(feeds, [this.output]);
    const inferenceMs = performance.now() - started;
    const tensor = results[this.output]!;
    const data = tensor.data as Float32Array;

    let output: Float32Array;
    let width: number;
    if (this.spec.task === 'rerank' || this.pooled) {
      // logits [rows, 1] or sentence_embedding [rows, width]: copied out before the tensor is disposed.
      width = Number(tensor.dims[1] ?? 1);
      output = new Float32Array(data);
    } else {
      width = Number(tensor.dims[2]);
      output = this.spec.pooling === 'cls' ? clsPool(data, rows, seqLen, width) : meanPool(data, task.lengths, seqLen, width);
    }
    for (const value of Object.values(results)) value.dispose?.();
    this.width = width;
    return { output, width, inferenceMs };
  }

  async release(): Promise<void> {
    await this.session.release();
  }
}
