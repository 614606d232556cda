/**
 * Which of the configured devices this machine can use, found out once at start, before any model
 * loads, by a probe thread per accelerator (worker/device-probe.ts). A device that can not be used
 * stops the start with ONNX Runtime's reason and what to install; with the CPU fallback its models
 * run on the CPU instead, said once in the log, and everything that shows a model's device shows `cpu`.
 */
import { Worker } from 'node:worker_threads';
import { installHint, isAccelerator, takesTurns } from '../devices.js';
import { StartupError } from '../errors.js';
import type { DeviceProbeResult } from '../worker/device-probe.js';
import { workerFile } from './worker-pool.js';

const locks = new Map<string, SharedArrayBuffer>();

/** The lock every thread of this process takes turns by on `device`, for a device whose sessions take turns. */
export function deviceLock(device: string): SharedArrayBuffer | undefined {
  if (!takesTurns(device)) return undefined;
  let lock = locks.get(device);
  if (!lock) locks.set(device, (lock = new SharedArrayBuffer(4)));
  return lock;
}

/** Why ONNX Runtime can not use `device` here; undefined when it can. */
export function probeDevice(device: string): Promise<string | undefined> {
  return new Promise((resolve) => {
    const worker = new Worker(workerFile('device-probe.js'), {
      workerData: { device, deviceLock: deviceLock(device) },
    });
    worker.once('message', (result: DeviceProbeResult) => {
      resolve(result.failure);
      void worker.terminate();
    });
    worker.once('error', (error) => resolve(error.message));
    worker.once('exit', (code) => resolve(`the probe thread ended with code ${code}`));
  });
}

export interface DeviceCheck {
  /** The configured device of each user (a model id, or the image pipelines). */
  wanted: Map<string, string>;
  /** `cpu`: serve on the CPU what can not run on its device. */
  fallback: string;
  /** Tells the probe (tests may pretend). */
  probe?: (device: string) => Promise<string | undefined>;
}

export interface DeviceChoice {
  /** The device each user runs on. */
  devices: Map<string, string>;
  /** One per device that fell back to the CPU. */
  warnings: string[];
}

/** Where each user runs: its device, when this machine can use it. */
export async function checkDevices({ wanted, fallback, probe = probeDevice }: DeviceCheck): Promise<DeviceChoice> {
  const accelerators = [...new Set(wanted.values())].filter(isAccelerator);
  const failures = new Map<string, string>();
  await Promise.all(
    accelerators.map(async (device) => {
      const failure = await probe(device);
      if (failure !== undefined) failures.set(device, failure);
    }),
  );
  const usersOf = (device: string) => [...wanted].filter(([, wants]) => wants === device).map(([user]) => user);
  const reasons = [...failures].map(([device, failure]) => ({
    device,
    reason: unusable(device, failure, usersOf(device)),
  }));
  if (reasons.length > 0 && fallback !== 'cpu') throw new DeviceUnavailableError(reasons.map(({ reason }) => reason));
  const warnings = reasons.map(
    ({ device, reason }) =>
      `${reason} Serving ${usersOf(device).join(', ')} on cpu instead (ONNX_GATEWAY_DEVICE_FALLBACK=cpu).`,
  );
  const devices = new Map([...wanted].map(([user, device]) => [user, failures.has(device) ? 'cpu' : device]));
  return { devices, warnings };
}

function unusable(device: string, failure: string, users: string[]): string {
  return `Device "${device}" (for ${users.join(', ')}) can not be used: ONNX Runtime says "${failure.replace(/\s+/g, ' ')}". ${installHint(device)}`;
}

/** Configured devices this machine can not use, without the CPU fallback. */
export class DeviceUnavailableError extends StartupError {
  override name = 'DeviceUnavailableError';
  readonly code = 'device_unavailable';
  constructor(reasons: string[]) {
    super(`${reasons.join(' ')} Or set ONNX_GATEWAY_DEVICE_FALLBACK=cpu to serve these models on the CPU.`);
  }
}
