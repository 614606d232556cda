/**
 * A thread that finds out whether ONNX Runtime can use a device here: it opens a session of a
 * one-node graph on the device's execution provider and runs it once, then says so and ends. What
 * fails (a provider library not installed, no GPU adapter, a driver too old) fails here, with the
 * reason ONNX Runtime gives, before any model is loaded for the device.
 */
import { parentPort, workerData } from 'node:worker_threads';
import * as ort from 'onnxruntime-node';
import { createGraph, createModel, node, valueInfo, writeModel } from '../onnx/model.js';
import { DataType } from '../onnx/proto.js';
import { DeviceLock, noLock } from './device-lock.js';
import { ortSessionOptions } from './session-options.js';

/** What the probe answers: nothing when the device works, else ONNX Runtime's reason. */
export interface DeviceProbeResult {
  failure?: string;
}

const { device, deviceLock } = workerData as { device: string; deviceLock?: SharedArrayBuffer };

async function probe(): Promise<void> {
  const graph = createGraph({
    name: 'probe',
    nodes: [node('MatMul', ['x', 'x'], ['y'])],
    inputs: [valueInfo('x', DataType.FLOAT, [2, 2])],
    outputs: [valueInfo('y', DataType.FLOAT, [2, 2])],
  });
  const options = ortSessionOptions({ intraOpThreads: 1, spinning: false, memoryArena: false }, device);
  const values = await (deviceLock ? new DeviceLock(deviceLock) : noLock).hold(async () => {
    const session = await ort.InferenceSession.create(writeModel(createModel(graph)), options);
    const { y } = await session.run({ x: new ort.Tensor('float32', Float32Array.of(1, 2, 3, 4), [2, 2]) });
    const product = Array.from(y!.data as Float32Array);
    await session.release();
    return product;
  });
  if (values.join() !== '7,10,15,22')
    throw new Error(`a 2x2 product on it gave ${values.join(', ')} instead of 7, 10, 15, 22`);
}

const answer = (result: DeviceProbeResult) => parentPort!.postMessage(result);
probe().then(
  () => answer({}),
  (error: unknown) => answer({ failure: (error instanceof Error ? error.message : String(error)).trim() }),
);
