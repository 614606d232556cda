/**
 * Dynamic int8 quantization of MatMul weights, for CPU inference of BERT-style
 * encoders.
 *
 * Every MatMul whose weight (input B) is a 2-D float32 initializer becomes
 * onnxruntime's com.microsoft DynamicQuantizeMatMul: the weight is stored as
 * int8, symmetric (zero point 0) with one scale per output column, and a bias
 * Add that follows is folded into the node. At run time the kernel quantizes
 * the activation (uint8, one scale for the whole input tensor) and runs an
 * integer GEMM. Weight-by-activation MatMuls (attention scores), Gemm, Gather
 * (embedding tables) and everything else stay float32.
 *
 * The int8 values are the nearest to each weight, or, given statistics of each
 * MatMul's input on calibration data (`calibration-stats.ts`), chosen by GPTQ
 * (`gptq.ts`) so that the MatMul's output, rather than each weight, stays
 * closest to float: on the same grid, so stored and run the same way.
 *
 * Because the activation scale is taken over the whole input tensor, padded
 * batch included, an int8 result depends on the other inputs of its batch:
 * run int8 models one input per batch where results must be reproducible.
 *
 * Weights are 7-bit (int8-grid.ts): on x86 CPUs without VNNI, onnxruntime's
 * u8 x s8 kernels add pairs of products in int16, which 8-bit weights overflow.
 */
import { randomBytes } from 'node:crypto';
import { open, readFile, rename, rm } from 'node:fs/promises';
import { dirname } from 'node:path';
import { inlineExternalData } from '../onnx/external-data.js';
import { initializerToFloat32, node, readModel, tensor, toNumber, writeModel, type OnnxModel } from '../onnx/model.js';
import {
  DataLocation,
  DataType,
  ModelProtoType,
  type GraphProto,
  type NodeProto,
  type TensorProto,
} from '../onnx/proto.js';
import type { Calibration } from './calibration-stats.js';
import { gptqRound, type GptqOptions } from './gptq.js';
import { columnScales, toGrid } from './int8-grid.js';
import type { ConvertedMatMul, QuantizeReport, SkippedMatMul } from './report.js';

export type { ConvertedMatMul, QuantizeReport, SkippedMatMul } from './report.js';

export const MS_DOMAIN = 'com.microsoft';

/** Ops that mean a graph is quantized already (QLinear* and QOrdered* are matched by prefix). */
const QUANTIZED_OPS = new Set([
  'DynamicQuantizeMatMul',
  'MatMulInteger',
  'MatMulIntegerToFloat',
  'ConvInteger',
  'DynamicQuantizeLinear',
  'DynamicQuantizeLSTM',
  'QuantizeLinear',
  'DequantizeLinear',
  'QAttention',
  'QGemm',
  'QEmbedLayerNormalization',
  'MatMulNBits',
  'MatMulBnb4',
  'MatMulFpQ4',
  'GatherBlockQuantized',
]);

export interface QuantizeOptions extends GptqOptions {
  /**
   * Statistics of the MatMul inputs on calibration data (see `collectInputStats`): weights whose
   * input has them are rounded with GPTQ, the others to nearest.
   */
  calibration?: Calibration;
}

/**
 * Quantizes the MatMul weights of `model`. The input is not modified; the
 * result shares the messages it leaves unchanged with it.
 * Throws when the graph cannot be converted safely (see `refuseUnsafe`) or
 * has no MatMul to convert.
 */
export function quantizeModel(
  model: OnnxModel,
  options: QuantizeOptions = {},
): { model: OnnxModel; report: QuantizeReport } {
  const bytesBefore = encodedSize(model);
  const { model: quantized, converted, skipped } = convert(model, options);
  return { model: quantized, report: { converted, skipped, bytesBefore, bytesAfter: encodedSize(quantized) } };
}

export interface QuantizeFileOptions extends GptqOptions {
  /** Collects calibration statistics of `targets` (see `calibrationTargets`) for the model read; without it, weights are rounded to nearest. */
  calibrate?: (model: OnnxModel, targets: Map<string, number>) => Promise<Calibration>;
}

/** quantizeModel on a file; `outPath` is replaced atomically (temp file + rename), so readers never see half a model. */
export async function quantizeFile(
  inPath: string,
  outPath: string,
  options: QuantizeFileOptions = {},
): Promise<QuantizeReport> {
  const bytes = await readFile(inPath);
  let result: ReturnType<typeof convert>;
  try {
    const model = readModel(bytes);
    // An export whose weights are in external data files: written inline into the variant.
    inlineExternalData(model, dirname(inPath));
    const calibration = options.calibrate ? await options.calibrate(model, calibrationTargets(model)) : undefined;
    result = convert(model, { ...options, calibration });
  } catch (err) {
    throw new Error(`${inPath}: ${(err as Error).message}`, { cause: err });
  }
  const out = writeModel(result.model);
  await writeAtomically(outPath, out);
  return { converted: result.converted, skipped: result.skipped, bytesBefore: bytes.length, bytesAfter: out.length };
}

/**
 * What GPTQ needs statistics of: the first input (the activation) of every MatMul that
 * `quantizeModel` converts, with its width K. Throws as `quantizeModel` does.
 */
export function calibrationTargets(model: OnnxModel): Map<string, number> {
  const graph = model.graph;
  if (!graph) throw new Error('the model has no graph');
  refuseUnsafe(graph);
  const { weightUses } = indexGraph(graph);
  const targets = new Map<string, number>();
  for (const [, { k, activations }] of weightUses) for (const a of activations) targets.set(a, k);
  return targets;
}

// --- weights -----------------------------------------------------------------------

export interface QuantizedWeight {
  /** Row-major [K, N], in [-QMAX, QMAX] (int8-grid.ts). */
  values: Int8Array;
  /** One per column: max |w| / QMAX (1 for an all-zero column). */
  scales: Float32Array;
}

/**
 * Symmetric per-column int8 quantization of a row-major [k, n] matrix; undefined if it holds NaN
 * or infinity. Rounds to nearest, or with GPTQ when given X^T X of the MatMul's input.
 */
export function quantizeWeight(
  w: Float32Array,
  k: number,
  n: number,
  hessian?: Float64Array,
  options: GptqOptions = {},
): QuantizedWeight | undefined {
  const scales = columnScales(w, k, n);
  if (!scales) return undefined;
  if (hessian) return { values: gptqRound(w, k, n, scales, hessian, options), scales };
  const values = new Int8Array(k * n);
  for (let i = 0; i < k * n; i++) values[i] = toGrid(w[i]!, scales[i % n]!);
  return { values, scales };
}

// --- graph rewrite -----------------------------------------------------------------

interface Conversion {
  model: OnnxModel;
  converted: ConvertedMatMul[];
  skipped: SkippedMatMul[];
}

/** The replacement initializers of one float weight, shared by every MatMul using it. */
interface WeightPlan {
  k: number;
  n: number;
  rounding: 'gptq' | 'nearest';
  tensors: TensorProto[];
  names: { values: string; scale: string; zeroPoint: string };
}

/** What the rewrite needs to know about a graph: who reads what, and which weights can be quantized. */
interface GraphIndex {
  initializers: Map<string, TensorProto>;
  graphInputs: Set<string | undefined>;
  graphOutputs: Set<string | undefined>;
  /** Names read by nested graphs (If/Loop bodies): consumers we cannot rewrite. */
  nestedReads: Set<string>;
  consumers: Map<string, NodeProto[]>;
  /** Why the weight of a MatMul cannot be quantized, or undefined if it can. */
  weightProblem: (weight: string) => string | undefined;
  /** Each quantizable weight: its K and the activations it multiplies (one per MatMul using it). */
  weightUses: Map<string, { k: number; activations: string[] }>;
}

const isDefaultDomain = (n: NodeProto) => !n.domain || n.domain === 'ai.onnx';

function indexGraph(graph: GraphProto): GraphIndex {
  const nodes = graph.node ?? [];
  const initializers = new Map((graph.initializer ?? []).map((t) => [t.name ?? '', t]));
  const graphInputs = new Set((graph.input ?? []).map((v) => v.name));
  const graphOutputs = new Set((graph.output ?? []).map((v) => v.name));
  const nestedReads = new Set<string>();
  for (const n of nodes) for (const g of subgraphs(n)) collectReads(g, nestedReads);
  const consumers = new Map<string, NodeProto[]>();
  for (const n of nodes) {
    for (const name of n.input ?? []) {
      if (!name) continue; // an omitted optional input
      const users = consumers.get(name);
      if (users) users.push(n);
      else consumers.set(name, [n]);
    }
  }

  const isWeightUse = (n: NodeProto, weight: string) =>
    n.opType === 'MatMul' && isDefaultDomain(n) && n.input?.[1] === weight && n.input[0] !== weight;

  const weightProblem = (weight: string): string | undefined => {
    const t = initializers.get(weight);
    if (!t) return 'B is not an initializer (computed at run time)';
    if (graphInputs.has(weight)) return 'B is also a graph input, so callers may override it';
    if (t.dataType !== DataType.FLOAT) return `B has ONNX data type ${t.dataType}, not float32`;
    if ((t.dims ?? []).length !== 2) return `B is ${(t.dims ?? []).length}-D, not a 2-D matrix`;
    const other = (consumers.get(weight) ?? []).find((n) => !isWeightUse(n, weight));
    if (other) return `B is also used by ${other.opType} node ${other.name || other.output?.[0]}`;
    if (graphOutputs.has(weight)) return 'B is also a graph output';
    if (nestedReads.has(weight)) return 'B is also used inside a subgraph';
    return undefined;
  };

  const weightUses = new Map<string, { k: number; activations: string[] }>();
  for (const n of nodes) {
    const [a, weight] = n.input ?? [];
    if (n.opType !== 'MatMul' || !isDefaultDomain(n) || !a || !weight || weightProblem(weight) !== undefined) continue;
    const use = weightUses.get(weight);
    if (use) use.activations.push(a);
    else weightUses.set(weight, { k: toNumber(initializers.get(weight)!.dims![0]), activations: [a] });
  }
  return { initializers, graphInputs, graphOutputs, nestedReads, consumers, weightProblem, weightUses };
}

function convert(model: OnnxModel, options: QuantizeOptions): Conversion {
  const graph = model.graph;
  if (!graph) throw new Error('the model has no graph');
  refuseUnsafe(graph);

  const nodes = graph.node ?? [];
  const { initializers, graphInputs, graphOutputs, nestedReads, consumers, weightProblem, weightUses } =
    indexGraph(graph);
  const names = new Set<string>(
    [...initializers.keys(), ...graphInputs, ...graphOutputs].filter((s): s is string => !!s),
  );
  for (const n of nodes) for (const name of [...(n.input ?? []), ...(n.output ?? [])]) names.add(name);
  const unique = (base: string) => {
    let name = base;
    for (let i = 1; names.has(name); i++) name = `${base}_${i}`;
    names.add(name);
    return name;
  };

  const plans = new Map<string, WeightPlan | string>(); // weight -> plan, or why not
  const planFor = (weight: string): WeightPlan | string => {
    let plan = plans.get(weight);
    if (plan !== undefined) return plan;
    plan =
      weightProblem(weight) ??
      quantizeInitializer(initializers.get(weight)!, unique, hessianOf(weightUses.get(weight)!.activations), options);
    plans.set(weight, plan);
    return plan;
  };
  /** X^T X over every input the weight multiplies, if all were calibrated. */
  const hessianOf = (activations: string[]): Float64Array | undefined => {
    const stats = activations.map((a) => options.calibration?.get(a));
    if (stats.length === 0 || stats.some((s) => !s || s.rows === 0)) return undefined;
    if (stats.length === 1) return stats[0]!.xtx;
    const sum = new Float64Array(stats[0]!.xtx.length);
    for (const s of stats) for (let i = 0; i < sum.length; i++) sum[i]! += s!.xtx[i]!;
    return sum;
  };

  const converted: ConvertedMatMul[] = [];
  const skipped: SkippedMatMul[] = [];
  const replacements = new Map<NodeProto, NodeProto>();
  const removedAdds = new Set<NodeProto>();
  const removedValues = new Set<string>();

  for (const n of nodes) {
    if (n.opType !== 'MatMul' || !isDefaultDomain(n)) continue;
    const name = n.name || n.output?.[0] || '(unnamed MatMul)';
    const [a, weight] = n.input ?? [];
    if (!a || !weight) {
      skipped.push({ name, reason: 'malformed MatMul (fewer than two inputs)' });
      continue;
    }
    const plan = planFor(weight);
    if (typeof plan === 'string') {
      skipped.push({ name, weight, reason: plan });
      continue;
    }
    const y = n.output?.[0] ?? '';
    const add = foldableBiasAdd(y, plan.n);
    const inputs = [a, plan.names.values, plan.names.scale, plan.names.zeroPoint];
    let outputs = [y];
    if (add) {
      inputs.push(add.bias);
      outputs = [...(add.node.output ?? [])];
      removedAdds.add(add.node);
      removedValues.add(y);
    }
    replacements.set(
      n,
      node('DynamicQuantizeMatMul', inputs, outputs, [], MS_DOMAIN, n.name ? `${n.name}_quant` : undefined),
    );
    converted.push({ name, weight, shape: [plan.k, plan.n], biasFolded: add !== undefined, rounding: plan.rounding });
  }

  /** The single Add consuming `y` with a 1-D float initializer of length n, if any. */
  function foldableBiasAdd(y: string, n: number): { node: NodeProto; bias: string } | undefined {
    const users = consumers.get(y) ?? [];
    const [add] = users;
    if (!y || !add || users.length !== 1 || graphOutputs.has(y) || nestedReads.has(y)) return undefined;
    if (add.opType !== 'Add' || !isDefaultDomain(add) || add.input?.length !== 2 || add.output?.length !== 1)
      return undefined;
    const [first, second] = add.input; // two, checked above
    const bias = first === y ? second! : first!;
    const t = initializers.get(bias);
    if (!t || graphInputs.has(bias) || t.dataType !== DataType.FLOAT) return undefined;
    const dims = t.dims ?? [];
    return dims.length === 1 && toNumber(dims[0]) === n ? { node: add, bias } : undefined;
  }

  if (converted.length === 0) {
    const reasons = [...new Set(skipped.map((s) => s.reason))];
    throw new Error(
      `nothing to quantize: no MatMul has a 2-D float32 weight initializer${reasons.length ? ` (${reasons.join('; ')})` : ''}`,
    );
  }

  // Each quantized weight takes the place of the float one in the initializer list.
  const initializer: TensorProto[] = [];
  for (const t of graph.initializer ?? []) {
    const plan = plans.get(t.name ?? '');
    if (plan === undefined || typeof plan === 'string') initializer.push(t);
    else {
      initializer.push(...plan.tensors);
      removedValues.add(t.name ?? '');
    }
  }

  const opsetImport = [...(model.opsetImport ?? [])];
  if (!opsetImport.some((o) => o.domain === MS_DOMAIN)) opsetImport.push({ domain: MS_DOMAIN, version: 1 });

  const quantized: OnnxModel = {
    ...model,
    graph: {
      ...graph,
      node: nodes.filter((n) => !removedAdds.has(n)).map((n) => replacements.get(n) ?? n),
      initializer,
      // Shape hints for values that no longer exist would only confuse tools.
      valueInfo: (graph.valueInfo ?? []).filter((v) => !removedValues.has(v.name ?? '')),
    },
    opsetImport,
  };
  return { model: quantized, converted, skipped };
}

function quantizeInitializer(
  t: TensorProto,
  unique: (base: string) => string,
  hessian: Float64Array | undefined,
  options: GptqOptions,
): WeightPlan | string {
  const [k, n] = (t.dims ?? []).map(toNumber);
  if (k === undefined || n === undefined) return 'B is not a 2-D matrix'; // weightProblem said so already
  let q: QuantizedWeight | undefined;
  try {
    q = quantizeWeight(initializerToFloat32(t), k, n, hessian, options);
  } catch (err) {
    throw new Error(`weight ${t.name}: ${(err as Error).message}`, { cause: err });
  }
  if (!q) return 'B holds NaN or infinite values';
  const base = t.name ?? 'weight';
  const names = {
    values: unique(`${base}_quantized`),
    scale: unique(`${base}_scale`),
    zeroPoint: unique(`${base}_zero_point`),
  };
  return {
    k,
    n,
    rounding: hessian ? 'gptq' : 'nearest',
    names,
    tensors: [
      tensor(names.values, DataType.INT8, [k, n], q.values),
      tensor(names.scale, DataType.FLOAT, [n], q.scales),
      // Symmetric, so all zeros; written out (typed like B, shaped like the scales) as onnxruntime's quantizer does.
      tensor(names.zeroPoint, DataType.INT8, [n], new Int8Array(n)),
    ],
  };
}

/** Throws on graphs that cannot be rewritten safely as a whole. */
function refuseUnsafe(graph: GraphProto): void {
  for (const g of [graph, ...allSubgraphs(graph)]) {
    for (const t of g.initializer ?? []) {
      if (t.dataLocation === DataLocation.EXTERNAL || (t.externalData?.length ?? 0) > 0) {
        throw new Error(
          `initializer ${t.name} keeps its data in an external file; quantizing would leave the output pointing at the original's data (load and save the model with its data inline first)`,
        );
      }
    }
    for (const n of g.node ?? []) {
      const op = n.opType ?? '';
      if (QUANTIZED_OPS.has(op) || op.startsWith('QLinear') || op.startsWith('QOrdered')) {
        throw new Error(
          `the graph is already quantized (it has a ${op} node ${n.name ?? ''}); quantize the float32 original instead`,
        );
      }
    }
  }
}

// --- graph walking -----------------------------------------------------------------

function subgraphs(n: NodeProto): GraphProto[] {
  return (n.attribute ?? []).flatMap((a) => [...(a.g ? [a.g] : []), ...(a.graphs ?? [])]);
}

function allSubgraphs(graph: GraphProto): GraphProto[] {
  return (graph.node ?? []).flatMap(subgraphs).flatMap((g) => [g, ...allSubgraphs(g)]);
}

/** Every name read by a node of `graph` or of graphs nested in it (outer-scope reads included). */
function collectReads(graph: GraphProto, into: Set<string>): void {
  for (const n of graph.node ?? []) {
    for (const name of n.input ?? []) if (name) into.add(name);
    for (const g of subgraphs(n)) collectReads(g, into);
  }
  for (const v of graph.output ?? []) if (v.name) into.add(v.name);
}

// --- output ------------------------------------------------------------------------

/** The serialized size, without building the buffer. */
function encodedSize(model: OnnxModel): number {
  return ModelProtoType.encode(model).len;
}

async function writeAtomically(path: string, bytes: Uint8Array): Promise<void> {
  // Same directory as the target: rename is only atomic within one file system.
  const temp = `${path}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
  try {
    const file = await open(temp, 'wx');
    try {
      await file.writeFile(bytes);
      await file.sync(); // the data must be on disk before the rename makes it visible
    } finally {
      await file.close();
    }
    await rename(temp, path);
  } catch (err) {
    await rm(temp, { force: true });
    throw err;
  }
}
