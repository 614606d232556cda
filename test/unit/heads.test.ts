/**
 * Which kinds of output a model's files promise (models/heads.ts through readModelFacts), and the
 * sparse and late-interaction models refused because they could not be served exactly: each case
 * a generated model folder with one file changed.
 */
import { cpSync, existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, inject, it } from 'vitest';
import { readModelFacts } from '../../src/models/facts.js';
import { readModel, valueInfo, writeModel } from '../../src/onnx/model.js';
import { DataType } from '../../src/onnx/proto.js';
import { missing } from '../helpers/resources.js';

const SPLADE = 'prithivida/Splade_PP_en_v1';
const COLBERT = 'answerdotai/answerai-colbert-small-v1';
const standins = inject('standinsDir');
const present = standins !== '' && [SPLADE, COLBERT].every((repo) => existsSync(join(standins, repo)));

function variant(from: string, files: Record<string, unknown>): string {
  const dir = mkdtempSync(join(tmpdir(), 'onnx-gateway-heads-'));
  cpSync(from, dir, { recursive: true });
  for (const [path, content] of Object.entries(files))
    writeFileSync(join(dir, path), content instanceof Uint8Array ? content : JSON.stringify(content));
  return dir;
}
const facts = (dir: string) => readModelFacts(dir, join(dir, 'onnx', 'model.onnx'), 'm');

describe('output kinds of an encoder', () => {
  const embedder = join(inject('tinyModelsDir'), 'tiny-embedder');

  it('gives dense vectors and, from last_hidden_state, token vectors', async () => {
    expect((await facts(embedder)).heads).toEqual({
      kinds: ['dense', 'tokens'],
      tokens: { output: 'last_hidden_state', type: 'float32', width: 32 },
    });
  });

  it('gives sparse token weights when the graph outputs them, as bge-m3 exports do', async () => {
    const graph = readModel(readFileSync(join(embedder, 'onnx', 'model.onnx')));
    graph.graph!.output = [...graph.graph!.output!, valueInfo('sparse_vecs', DataType.FLOAT, ['batch', 'sequence', 1])];
    const read = await facts(variant(embedder, { 'onnx/model.onnx': writeModel(graph) }));
    expect(read.heads.kinds).toEqual(['dense', 'tokens', 'sparse']);
    expect(read.heads.sparse).toMatchObject({ pooling: 'weights', output: 'sparse_vecs' });
  });

  it("is a reranker's logits only", async () => {
    expect((await facts(join(inject('tinyModelsDir'), 'tiny-reranker'))).heads).toEqual({ kinds: ['dense'] });
  });
});

describe.skipIf(missing(present, 'needs the SPLADE and ColBERT stand-ins'))('SPLADE and ColBERT models', () => {
  it('reads a SPLADE model as sparse only, over its vocabulary, not normalised', async () => {
    const read = await facts(join(standins, SPLADE));
    expect(read).toMatchObject({
      task: 'embedding',
      normalize: false,
      width: 30522,
      heads: { kinds: ['sparse'], sparse: { pooling: 'mlm', output: 'logits', dimension: 30522 } },
    });
  });

  it('refuses a SpladePooling it does not compute, and a masked-LM graph without logits', async () => {
    const sum = variant(join(standins, SPLADE), {
      '1_SpladePooling/config.json': { pooling_strategy: 'sum', activation_function: 'relu' },
    });
    await expect(facts(sum)).rejects.toThrow(/pooling_strategy "sum"; only "max" is served/);
    const softplus = variant(join(standins, SPLADE), {
      '1_SpladePooling/config.json': { pooling_strategy: 'max', activation_function: 'softplus' },
    });
    await expect(facts(softplus)).rejects.toThrow(/activation_function "softplus"/);
    const mlm = variant(join(standins, SPLADE), {
      'onnx/model.onnx': readFileSync(join(inject('tinyModelsDir'), 'tiny-embedder', 'onnx', 'model.onnx')),
    });
    await expect(facts(mlm)).rejects.toThrow(/SPLADE \(masked-LM\) model needs its graph to output "logits"/);
  });

  it("takes a dense embedder whose config keeps its checkpoint's *ForMaskedLM for what it is", async () => {
    const config = JSON.parse(
      readFileSync(join(inject('tinyModelsDir'), 'tiny-embedder', 'config.json'), 'utf8'),
    ) as Record<string, unknown>;
    const mpnetLike = variant(join(inject('tinyModelsDir'), 'tiny-embedder'), {
      'config.json': { ...config, architectures: ['MPNetForMaskedLM'] },
    });
    expect((await facts(mpnetLike)).heads.kinds).toEqual(['dense', 'tokens']);
  });

  it("reads a ColBERT model's PyLate settings, and gives token vectors only", async () => {
    const read = await facts(join(standins, COLBERT));
    expect(read.heads).toEqual({
      kinds: ['tokens'],
      tokens: { output: 'token_embeddings', type: 'float32', width: 96 },
    });
    expect(read.lateInteraction).toMatchObject({
      queryPrefix: '[unused0]',
      documentPrefix: '[unused1]',
      queryLength: 32,
      documentLength: 300,
      attendToExpansion: false,
      queryExpansion: true,
      maskToken: '[MASK]',
    });
    expect(read.lateInteraction!.skiplistWords).toContain('.');
  });

  it('refuses a ColBERT graph without its projection', async () => {
    const dense = variant(join(standins, COLBERT), {
      '1_Dense/config.json': { in_features: 64, out_features: 128, bias: false },
    });
    await expect(facts(dense)).rejects.toThrow(
      /must output its projected token vectors \("token_embeddings" of width 128.*"token_embeddings" is 96 wide/,
    );
  });
});
