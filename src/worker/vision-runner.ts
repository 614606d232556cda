/**
 * One ONNX Runtime session of an image-text model's vision tower. A batch comes as its images'
 * `pixel_values`, already decoded and preprocessed (Pillow-exact) by the preprocessing threads
 * (engine/image-preprocess-pool.ts), and the tower's pooled image vectors are read back. A joint
 * graph (jina-clip) also takes `input_ids`: it is fed the empty text's ids, one row or as many as the images.
 */
import * as ort from 'onnxruntime-node';
import type { ModelLoadSpec, VisionLoadSpec } from '../models/registry.js';
import { floatToHalf, toFloat32 } from './half.js';
import type { BatchResult, BatchTask, ModelReport, SessionOptions } from './protocol.js';
import { ortSessionOptions } from './session-options.js';

export class VisionRunner {
  private readonly vision: VisionLoadSpec;

  private constructor(
    readonly spec: ModelLoadSpec,
    private readonly session: ort.InferenceSession,
  ) {
    this.vision = spec.vision!;
  }

  static async open(spec: ModelLoadSpec, options: SessionOptions, device?: string): Promise<VisionRunner> {
    const session = await ort.InferenceSession.create(spec.onnxPath, ortSessionOptions(options, device));
    return new VisionRunner(spec, session);
  }

  /** One image of zeros, so that the first request does not pay for allocation; returns the width found. */
  async warmUp(loadMs: number): Promise<ModelReport> {
    const { width } = await this.forward(new Float32Array(this.pixelsPerImage), 1);
    return { id: this.spec.id, inputs: this.session.inputNames.slice(), output: this.spec.output.name, width, loadMs };
  }

  async run(task: BatchTask): Promise<BatchResult> {
    const pixels = task.pixels;
    if (!pixels) throw new Error(`A batch for "${this.spec.id}" came without its images' pixel values.`);
    const started = performance.now();
    // The pixels are in shared memory; ONNX Runtime's binding takes a tensor's data from an ArrayBuffer only.
    const own = new Float32Array(pixels);
    const { output, width } = await this.forward(own, own.length / this.pixelsPerImage);
    return { output, width, inferenceMs: performance.now() - started };
  }

  private get pixelsPerImage(): number {
    return 3 * this.vision.height * this.vision.width;
  }

  /** Runs the tower on `rows` images' pixel values; the pooled vectors, rows x width. */
  private async forward(pixels: Float32Array, rows: number): Promise<{ output: Float32Array; width: number }> {
    const { height, width, pixelType, textDummy } = this.vision;
    const dims = [rows, 3, height, width];
    const feeds: Record<string, ort.Tensor> = {
      pixel_values:
        pixelType === 'float16'
          ? new ort.Tensor('float16', floatToHalf(pixels), dims)
          : new ort.Tensor('float32', pixels, dims),
    };
    if (textDummy) {
      const count = textDummy.batchMatched ? rows : 1;
      const length = textDummy.ids.length;
      const wide = textDummy.idType === 'int64';
      const ids = wide ? new BigInt64Array(count * length) : new Int32Array(count * length);
      for (let r = 0; r < count; r++) textDummy.ids.forEach((id, t) => (ids[r * length + t] = wide ? BigInt(id) : id));
      feeds.input_ids = new ort.Tensor(textDummy.idType, ids, [count, length]);
      if (this.spec.feeds.attentionMask !== false) {
        const mask = wide ? new BigInt64Array(count * length).fill(1n) : new Int32Array(count * length).fill(1);
        feeds.attention_mask = new ort.Tensor(textDummy.idType, mask, [count, length]);
      }
    }
    const name = this.spec.output.name;
    const results = await this.session.run(feeds, [name]);
    const tensor = results[name]!;
    const data = toFloat32(tensor);
    const output = data === tensor.data ? new Float32Array(data) : data;
    const vectorWidth = Number(tensor.dims[tensor.dims.length - 1]);
    for (const value of Object.values(results)) value.dispose?.();
    return { output, width: vectorWidth };
  }

  async release(): Promise<void> {
    await this.session.release();
  }
}
