/**
 * A causal LM's graph cut to the few logits a yes/no reranker reads: each row's last real token
 * (rows right-padded; the last position the attention mask covers) is gathered before the LM head,
 * and the head keeps only the rows of the answer tokens. The LM head of an export computes
 * `[batch, sequence, vocabulary]` logits (151,669 floats per token for Qwen3); the cut one
 * `[batch, answers]`, so neither time nor memory grows with the vocabulary or, past the body, with
 * the sequence. The key/value outputs (`present.*`) are dropped; the inputs stay as they are.
 * Right padding is also what graphs with ONNX Runtime's fused GroupQueryAttention take: on a prompt
 * it puts each row's tokens at positions 0.. and reads its length from the mask (`seqlens_k`), so
 * a left-padded row would be rotated and masked as if its padding were text.
 *
 * The head's weight is narrowed by Gather nodes on its initializers, which ONNX Runtime folds into
 * constants when it opens the session; the full weight is then no longer used (a tied head shares
 * it with the token embeddings, which stay). Heads of the forms exports write are narrowed:
 * MatMul (its weight `[hidden, vocabulary]`, or the transpose of `[vocabulary, hidden]`), Gemm,
 * and the int8 DynamicQuantizeMatMul of `models quantize`. Any other head runs whole on the one
 * gathered position and its answer logits are gathered after it.
 */
import { DataType, type GraphProto, type NodeProto, type TensorProto, type ValueInfoProto } from './proto.js';
import { attr, findAttribute, node, tensorFromInt64, toNumber, valueInfo, type OnnxModel } from './model.js';

export interface LastTokenCut {
  /** How the head was narrowed: its op, or `gathered after` a head of another form. */
  head: string;
  /** Nodes left out: the full-vocabulary head and what only the dropped outputs needed. */
  removedNodes: number;
}

const prefix = 'last_token_logits/';

/**
 * Cuts `model` in place so that its output `output` is `[batch, tokens.length]`: the logits of
 * `tokens`, in that order, at each row's last attended position. Throws when the graph is not a
 * causal LM's (no `attention_mask` input, or no such output) or its opset is older than 12.
 */
export function cutToLastTokenLogits(model: OnnxModel, tokens: readonly number[], output = 'logits'): LastTokenCut {
  const graph = model.graph;
  if (!graph) throw new Error('the model has no graph');
  const opset = toNumber((model.opsetImport ?? []).find((o) => !o.domain || o.domain === 'ai.onnx')?.version ?? 0);
  if (opset < 12) throw new Error(`the graph's opset is ${opset}; cutting it needs 12 or later (GatherND batch_dims)`);
  if (!(graph.input ?? []).some((i) => i.name === 'attention_mask'))
    throw new Error('the graph has no "attention_mask" input');
  const outputInfo = (graph.output ?? []).find((o) => o.name === output);
  if (!outputInfo) throw new Error(`the graph has no output "${output}"`);
  const nodes = graph.node ?? [];
  const producer = new Map<string, NodeProto>();
  for (const n of nodes) for (const name of n.output ?? []) producer.set(name, n);

  // The head: the node writing the output, through Identity nodes.
  let head = producer.get(output);
  while (head?.opType === 'Identity') head = producer.get(head.input![0]!);
  if (!head) throw new Error(`no node writes "${output}"`);
  let hidden = head.input![0]!;
  // A Gemm head multiplies the hidden states flattened to [batch * sequence, hidden].
  const flatten = producer.get(hidden);
  if (head.opType === 'Gemm' && flatten?.opType === 'Reshape') hidden = flatten.input![0]!;

  const added: NodeProto[] = [];
  const initializers: TensorProto[] = [];
  const name = (what: string) => prefix + what;
  const constant = (what: string, values: number[], dims: number[]) => {
    initializers.push(tensorFromInt64(name(what), dims, values));
    return name(what);
  };
  const ids = constant('answer_ids', [...tokens], [tokens.length]);
  const unsqueeze = (input: string, axis: number, out: string) =>
    opset >= 13
      ? node('Unsqueeze', [input, constant(`${out}_axes`, [axis], [1])], [name(out)])
      : node('Unsqueeze', [input], [name(out)], [attr.ints('axes', [axis])]);

  // Each row's last attended position: the first where the running count of the mask peaks.
  added.push(
    node('Cast', ['attention_mask'], [name('mask')], [attr.int('to', DataType.INT32)]),
    node('CumSum', [name('mask'), constant('axis', [1], [])], [name('counts')]),
    node('ArgMax', [name('counts')], [name('last')], [attr.int('axis', 1), attr.int('keepdims', 1)]),
    node('GatherND', [hidden, name('last')], [name('hidden')], [attr.int('batch_dims', 1)]),
  );
  const last = name('hidden');
  const gather = (input: string, axis: number, out: string) =>
    node('Gather', [input, ids], [name(out)], [attr.int('axis', axis)]);
  const initializer = (value: string) => (graph.initializer ?? []).find((t) => t.name === value);
  const isDefault = !head.domain || head.domain === 'ai.onnx';
  let form: string;

  if (head.opType === 'MatMul' && isDefault) {
    const weight = head.input![1]!;
    const transpose = producer.get(weight);
    if (transpose?.opType === 'Transpose' && initializer(transpose.input![0]!)) {
      // The tied table [vocabulary, hidden], transposed for the head: its rows, then transposed.
      added.push(gather(transpose.input![0]!, 0, 'rows'), node('Transpose', [name('rows')], [name('weight')]));
    } else {
      added.push(gather(weight, 1, 'weight'));
    }
    added.push(node('MatMul', [last, name('weight')], [output]));
    form = 'MatMul';
  } else if (head.opType === 'Gemm' && isDefault) {
    const transB = toNumber(findAttribute(head, 'transB')?.i ?? 0) === 1;
    const [, weight, bias] = head.input!;
    added.push(gather(weight!, transB ? 0 : 1, 'weight'));
    const inputs = [last, name('weight')];
    if (bias) {
      added.push(gather(bias, 0, 'bias'));
      inputs.push(name('bias'));
    }
    added.push(node('Gemm', inputs, [output], head.attribute ?? []));
    form = 'Gemm';
  } else if (head.opType === 'DynamicQuantizeMatMul' && head.domain === 'com.microsoft') {
    // (A, B int8 [hidden, vocabulary], b_scale, b_zero_point?, bias?): per-column parameters narrowed too.
    const [, weight, scale, zeroPoint, bias] = head.input!;
    const vocabulary = toNumber(initializer(weight!)?.dims?.[1] ?? 0);
    const perColumn = (value: string | undefined, what: string) => {
      if (!value) return '';
      const count = (initializer(value)?.dims ?? []).reduce<number>((a, d) => a * toNumber(d), 1);
      if (count !== vocabulary || vocabulary <= 1) return value;
      added.push(gather(value, 0, what));
      return name(what);
    };
    added.push(gather(weight!, 1, 'weight'));
    const inputs = [last, name('weight'), perColumn(scale, 'scale'), perColumn(zeroPoint, 'zero_point')];
    if (bias) inputs.push(perColumn(bias, 'bias'));
    while (inputs[inputs.length - 1] === '') inputs.pop();
    added.push(node('DynamicQuantizeMatMul', inputs, [output], [], 'com.microsoft'));
    form = 'DynamicQuantizeMatMul';
  } else {
    // Another form (4-bit MatMulNBits, ...): the whole head on the one position, then the answers.
    const copy: NodeProto = { ...head, input: [name('hidden_3d'), ...head.input!.slice(1)], output: [name('full')] };
    added.push(
      unsqueeze(last, 1, 'hidden_3d'),
      copy,
      node('Gather', [name('full'), ids], [name('answers_3d')], [attr.int('axis', -1)]),
      opset >= 13
        ? node('Squeeze', [name('answers_3d'), constant('squeeze_axes', [1], [1])], [output])
        : node('Squeeze', [name('answers_3d')], [output], [attr.ints('axes', [1])]),
    );
    form = `${head.opType} (gathered after)`;
  }

  // The old head and the chain from it to the output go; then whatever nothing reads any more.
  const replaced = new Set<NodeProto>();
  for (let n = producer.get(output); n && n !== head; n = producer.get(n.input![0]!)) replaced.add(n);
  replaced.add(head);
  const before = nodes.length;
  graph.node = [...nodes.filter((n) => !replaced.has(n)), ...added];
  graph.initializer = [...(graph.initializer ?? []), ...initializers];
  const cut = valueInfo(output, DataType.FLOAT, ['batch_size', tokens.length]);
  // As the head wrote it: float16 in half-precision graphs.
  cut.type!.tensorType!.elemType = outputInfo.type?.tensorType?.elemType ?? DataType.FLOAT;
  graph.output = [cut];
  prune(graph);
  return { head: form, removedNodes: before - (graph.node.length - added.length) };
}

/** Drops the nodes no graph output needs, in order, then the initializers and value infos no node reads. */
function prune(graph: GraphProto): void {
  const nodes = graph.node ?? [];
  const producer = new Map<string, NodeProto>();
  for (const n of nodes) for (const name of n.output ?? []) producer.set(name, n);
  const needed = new Set<NodeProto>();
  const stack = (graph.output ?? []).map((o) => o.name ?? '');
  const seen = new Set<string>();
  while (stack.length > 0) {
    const value = stack.pop()!;
    if (seen.has(value)) continue;
    seen.add(value);
    const n = producer.get(value);
    if (!n || needed.has(n)) continue;
    needed.add(n);
    for (const input of n.input ?? []) if (input) stack.push(input);
    for (const g of subgraphReads(n)) stack.push(g);
  }
  const kept = nodes.filter((n) => needed.has(n));
  graph.node = kept;
  const read = new Set<string>();
  for (const n of kept) {
    for (const input of n.input ?? []) read.add(input);
    for (const g of subgraphReads(n)) read.add(g);
  }
  graph.initializer = (graph.initializer ?? []).filter((t) => read.has(t.name ?? ''));
  const produced = new Set(kept.flatMap((n) => n.output ?? []));
  graph.valueInfo = (graph.valueInfo ?? []).filter((v: ValueInfoProto) => produced.has(v.name ?? ''));
}

/** Names a node's subgraphs (If, Loop, Scan) read from the enclosing graph: every input they name. */
function subgraphReads(n: NodeProto): string[] {
  const names: string[] = [];
  for (const a of n.attribute ?? []) {
    for (const g of [a.g, ...(a.graphs ?? [])]) {
      if (!g) continue;
      for (const inner of g.node ?? []) names.push(...(inner.input ?? []).filter((i) => i));
      for (const inner of g.node ?? []) names.push(...subgraphReads(inner));
    }
  }
  return names;
}
