import type * as ort from 'onnxruntime-node';
import type { SessionOptions } from './protocol.js';

/** ONNX Runtime options for every session a worker opens, text or image. */
export function ortSessionOptions(options: SessionOptions): ort.InferenceSession.SessionOptions {
  const spinning = options.spinning ? '1' : '0';
  return {
    intraOpNumThreads: options.intraOpThreads,
    interOpNumThreads: 1,
    executionMode: 'sequential',
    graphOptimizationLevel: 'all',
    enableCpuMemArena: options.memoryArena,
    // Some exports keep unused initializers; ORT's warnings about them are noise here.
    logSeverityLevel: 3,
    extra: { session: { intra_op: { allow_spinning: spinning }, inter_op: { allow_spinning: spinning } } },
  };
}
