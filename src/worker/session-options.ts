import type * as ort from 'onnxruntime-node';
import { deviceKind } from '../devices.js';
import type { SessionOptions } from './protocol.js';

/** ONNX Runtime options for every session a worker opens, text or image, on `device` (devices.ts). */
/** `externalDataDir`: where the graph's external data files are, when not in the graph's folder. */
export function ortSessionOptions(
  options: SessionOptions,
  device = 'cpu',
  externalDataDir?: string,
): ort.InferenceSession.SessionOptions {
  const spinning = options.spinning ? '1' : '0';
  const externalData = externalDataDir ? { model_external_initializers_file_folder_path: externalDataDir } : {};
  const stopSpinning = options.spinning && options.stopSpinningAfterRun ? { force_spinning_stop: '1' } : {};
  return {
    // ONNX Runtime puts what the accelerator's provider does not implement on the CPU, in the same session.
    executionProviders: executionProviders(device),
    intraOpNumThreads: options.intraOpThreads,
    interOpNumThreads: 1,
    executionMode: 'sequential',
    graphOptimizationLevel: 'all',
    enableCpuMemArena: options.memoryArena,
    // Some exports keep unused initializers; ORT's warnings about them are noise here.
    logSeverityLevel: 3,
    extra: {
      session: {
        intra_op: { allow_spinning: spinning },
        inter_op: { allow_spinning: spinning },
        ...stopSpinning,
        ...externalData,
      },
    },
  };
}

/** The execution providers of a device, in ONNX Runtime's names. */
export function executionProviders(device: string): ort.InferenceSession.ExecutionProviderConfig[] {
  const [, index] = device.split(':');
  switch (deviceKind(device)) {
    case 'cpu':
      return ['cpu'];
    case 'cuda':
      return [{ name: 'cuda', deviceId: Number(index ?? 0) }];
    case 'webgpu':
      return ['webgpu'];
    case 'coreml':
      return ['coreml'];
    case 'dml':
      return ['dml'];
  }
}
