/**
 * One ONNX Runtime session of an image model and the conversions around it: 8-bit HWC pixels to
 * the model's NCHW floats (with its mean and std), and the output back to HWC pixels in 0..255.
 * Which tensors to feed and fetch comes from the pipeline's manifest, checked against the graph.
 */
import * as ort from 'onnxruntime-node';
import type { ImageModelSpec } from '../models/image-catalogue.js';
import type { ImageTask, ImageTaskResult } from './image-protocol.js';
import type { SessionOptions } from './protocol.js';
import { ortSessionOptions } from './session-options.js';

export class ImageRunner {
  private constructor(
    readonly spec: ImageModelSpec,
    private readonly session: ort.InferenceSession,
  ) {}

  static async open(spec: ImageModelSpec, options: SessionOptions, device?: string): Promise<ImageRunner> {
    const session = await ort.InferenceSession.create(spec.onnxPath, ortSessionOptions(options, device));
    if (!session.inputNames.includes(spec.input.name)) {
      throw new Error(
        `${spec.onnxPath}: the graph has no input "${spec.input.name}" (inputs: ${session.inputNames.join(', ')}).`,
      );
    }
    if (!session.outputNames.includes(spec.output.name)) {
      throw new Error(
        `${spec.onnxPath}: the graph has no output "${spec.output.name}" (outputs: ${session.outputNames.join(', ')}).`,
      );
    }
    return new ImageRunner(spec, session);
  }

  async run(task: ImageTask): Promise<ImageTaskResult> {
    const { width, height, channels, pixels } = task;
    const expected = this.spec.input.channels === 'rgb' ? 3 : 1;
    if (channels !== expected) throw new Error(`${this.spec.id} takes ${expected} channel(s), got ${channels}.`);
    const fixed = this.spec.input.size;
    if (fixed && (fixed[0] !== height || fixed[1] !== width))
      throw new Error(`${this.spec.id} takes ${fixed[1]}x${fixed[0]} pixels, got ${width}x${height}.`);

    // HWC bytes -> NCHW floats, (pixel - mean) / std.
    const plane = width * height;
    const input = new Float32Array(channels * plane);
    const { mean } = this.spec.input;
    const inverse = 1 / this.spec.input.std;
    for (let c = 0; c < channels; c++) {
      const base = c * plane;
      for (let p = 0, q = c; p < plane; p++, q += channels) input[base + p] = (pixels[q]! - mean) * inverse;
    }

    const started = performance.now();
    const feeds = { [this.spec.input.name]: new ort.Tensor('float32', input, [1, channels, height, width]) };
    const results = await this.session.run(feeds, [this.spec.output.name]);
    const inferenceMs = performance.now() - started;

    const tensor = results[this.spec.output.name]!;
    const dims = tensor.dims.map(Number);
    if (dims.length !== 4 || dims[0] !== 1)
      throw new Error(
        `${this.spec.id}: output "${this.spec.output.name}" has dims [${dims.join(', ')}], expected [1, C, H, W].`,
      );
    const [, outChannels, outHeight, outWidth] = dims as [number, number, number, number];
    const data = tensor.data as Float32Array;

    // NCHW floats -> HWC pixels in 0..255.
    const outPlane = outWidth * outHeight;
    const output = new Float32Array(outChannels * outPlane);
    const scale = this.spec.output.scale;
    for (let c = 0; c < outChannels; c++) {
      const base = c * outPlane;
      for (let p = 0, q = c; p < outPlane; p++, q += outChannels) {
        const value = data[base + p]! * scale;
        output[q] = value < 0 ? 0 : value > 255 ? 255 : value;
      }
    }
    for (const value of Object.values(results)) value.dispose?.();
    return { pixels: output, width: outWidth, height: outHeight, channels: outChannels, inferenceMs };
  }

  async release(): Promise<void> {
    await this.session.release();
  }
}
