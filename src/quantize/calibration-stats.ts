/**
 * Calibration statistics for GPTQ rounding: runs the float32 graph with onnxruntime over
 * calibration inputs and collects, for each MatMul input to be quantized, X^T X and the sum of
 * its row count (X: every token's activation, one row each).
 *
 * X^T X is computed by onnxruntime itself: the graph is run with extra nodes that reshape each
 * activation to [rows, K] and multiply its transpose by it, so only K x K matrices (not the
 * activations) come back, and the products run in its GEMM rather than in JavaScript.
 */
import * as ort from 'onnxruntime-node';
import { attr, node, tensorFromInt64, writeModel, type OnnxModel } from '../onnx/model.js';
import { DataType, type NodeProto, type TensorProto } from '../onnx/proto.js';

export interface InputStats {
  /** Width of the activation (the weight's K). */
  k: number;
  /** Activation rows (tokens) seen. */
  rows: number;
  /** X^T X, row-major [k, k]. */
  xtx: Float64Array;
}

/** Statistics by activation name (a MatMul's first input). */
export type Calibration = Map<string, InputStats>;

/**
 * Runs `model` on each of `runs` (feeds by graph input name) and returns the statistics of the
 * named activations (name -> K). Each run should hold one unpadded input: padded positions would
 * count as rows.
 */
export async function collectInputStats(
  model: OnnxModel,
  activations: ReadonlyMap<string, number>,
  runs: Iterable<Record<string, ort.Tensor>>,
  options: { intraOpNumThreads?: number } = {},
): Promise<Calibration> {
  const { probe, outputs } = probeModel(model, activations);
  const session = await ort.InferenceSession.create(writeModel(probe), {
    graphOptimizationLevel: 'all',
    ...(options.intraOpNumThreads ? { intraOpNumThreads: options.intraOpNumThreads } : {}),
  });
  const stats: Calibration = new Map();
  for (const [name, k] of activations) stats.set(name, { k, rows: 0, xtx: new Float64Array(k * k) });
  try {
    for (const feeds of runs) {
      const result = await session.run(
        feeds,
        outputs.flatMap((o) => [o.xtx, o.shape]),
      );
      for (const o of outputs) {
        const s = stats.get(o.activation)!;
        const xtx = result[o.xtx]!.data as Float32Array;
        for (let i = 0; i < xtx.length; i++) s.xtx[i]! += xtx[i]!;
        s.rows += Number((result[o.shape]!.data as BigInt64Array)[0]);
      }
    }
  } finally {
    await session.release();
  }
  return stats;
}

interface ProbeOutputs {
  activation: string;
  xtx: string;
  shape: string;
}

/** `model` with, per activation, outputs X^T X [k, k] and X's 2-D shape. */
function probeModel(
  model: OnnxModel,
  activations: ReadonlyMap<string, number>,
): { probe: OnnxModel; outputs: ProbeOutputs[] } {
  const graph = model.graph!;
  const taken = new Set<string>();
  for (const n of graph.node ?? []) for (const name of [...(n.input ?? []), ...(n.output ?? [])]) taken.add(name);
  for (const t of graph.initializer ?? []) taken.add(t.name ?? '');
  for (const v of [...(graph.input ?? []), ...(graph.output ?? [])]) taken.add(v.name ?? '');
  let counter = 0;
  const fresh = (base: string) => {
    let name = `calibration_${base}_${counter++}`;
    while (taken.has(name)) name = `calibration_${base}_${counter++}`;
    taken.add(name);
    return name;
  };
  const nodes: NodeProto[] = [];
  const initializers: TensorProto[] = [];
  const outputs: ProbeOutputs[] = [];
  for (const [activation, k] of activations) {
    const shape = fresh('shape');
    const rows = fresh('rows');
    const transposed = fresh('transposed');
    const o: ProbeOutputs = { activation, xtx: fresh('xtx'), shape: fresh('rows_shape') };
    initializers.push(tensorFromInt64(shape, [2], [-1, k]));
    nodes.push(
      node('Reshape', [activation, shape], [rows]),
      node('Transpose', [rows], [transposed], [attr.ints('perm', [1, 0])]),
      node('MatMul', [transposed, rows], [o.xtx]),
      node('Shape', [rows], [o.shape]),
    );
    outputs.push(o);
  }
  const typed = (name: string, elemType: DataType) => ({ name, type: { tensorType: { elemType } } });
  const probe: OnnxModel = {
    ...model,
    graph: {
      ...graph,
      node: [...(graph.node ?? []), ...nodes],
      initializer: [...(graph.initializer ?? []), ...initializers],
      output: [
        ...(graph.output ?? []),
        ...outputs.flatMap((o) => [typed(o.xtx, DataType.FLOAT), typed(o.shape, DataType.INT64)]),
      ],
    },
  };
  return { probe, outputs };
}
