/**
 * The devices a model can run on: `cpu`, or an accelerator through one of ONNX Runtime's execution
 * providers. Names as operators write them (the device settings), what each needs installed, and
 * which ones are accelerators. Pure: which of them this machine can use is found out by opening a
 * session (engine/devices.ts).
 */

/** Device kinds; `cuda` may name a GPU by index (`cuda:1`). */
export const DEVICE_KINDS = ['cpu', 'webgpu', 'cuda', 'coreml', 'dml'] as const;
export type DeviceKind = (typeof DEVICE_KINDS)[number];

export class DeviceNameError extends Error {
  override name = 'DeviceNameError';
}

/** A device by name, lower-cased: `cpu`, `webgpu`, `cuda`, `cuda:N`, `coreml` or `dml`. */
export function parseDevice(text: string): string {
  const name = text.trim().toLowerCase();
  const [kind, index, ...rest] = name.split(':');
  const known = (DEVICE_KINDS as readonly string[]).includes(kind!);
  if (known && index === undefined) return name;
  if (kind === 'cuda' && rest.length === 0 && /^\d{1,3}$/.test(index!)) return `cuda:${Number(index)}`;
  throw new DeviceNameError(
    `"${text}" is not a device: use one of ${DEVICE_KINDS.join(', ')} (or cuda:N for the Nth CUDA GPU).`,
  );
}

/** `<model id>=<device>` entries, as a model id -> device record. */
export function parseDeviceMap(entries: readonly string[]): Record<string, string> {
  const map: Record<string, string> = {};
  for (const entry of entries) {
    const equals = entry.lastIndexOf('=');
    const model = entry.slice(0, equals).trim();
    if (equals < 0 || !model) throw new DeviceNameError(`"${entry}" is not <model id>=<device>.`);
    if (model in map) throw new DeviceNameError(`"${model}" is given a device twice.`);
    map[model] = parseDevice(entry.slice(equals + 1));
  }
  return map;
}

export function deviceKind(device: string): DeviceKind {
  return device.split(':')[0] as DeviceKind;
}

export function isAccelerator(device: string): boolean {
  return device !== 'cpu';
}

/**
 * Whether sessions on `device` in different threads of one process must take turns: ONNX Runtime's
 * WebGPU provider keeps one device context for all of them, and sessions opened, run or released
 * at the same time from several threads crash the process (measured with onnxruntime-node 1.30).
 */
export function takesTurns(device: string): boolean {
  return deviceKind(device) === 'webgpu';
}

/** What a device needs on this kind of machine, said when it can not be used. */
export function installHint(device: string): string {
  switch (deviceKind(device)) {
    case 'cuda':
      return (
        'CUDA runs on Linux x64 with an NVIDIA driver, CUDA 12 and cuDNN 9, and the CUDA provider of onnxruntime-node, ' +
        'which its install script downloads: after `npm ci`, run `ONNXRUNTIME_NODE_INSTALL=cuda12 node node_modules/onnxruntime-node/script/install`.'
      );
    case 'webgpu':
      return (
        "WebGPU needs a GPU driver it can reach: on Linux a Vulkan driver (the GPU vendor's, or Mesa: `mesa-vulkan-drivers`, " +
        'version 24 or later), Metal on macOS, Direct3D 12 on Windows.'
      );
    case 'coreml':
      return 'CoreML is in the macOS build of onnxruntime-node only.';
    case 'dml':
      return 'DirectML is in the Windows build of onnxruntime-node only, and needs a Direct3D 12 GPU.';
    case 'cpu':
      return '';
  }
}
