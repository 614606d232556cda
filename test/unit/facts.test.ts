/**
 * What a model folder's files decide, and what the server refuses to serve because it could not
 * serve it exactly: each case is the tiny generated model with one file changed.
 */
import { cpSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, inject, it } from 'vitest';
import { ModelFilesError, readModelFacts } from '../../src/models/facts.js';
import { valueInfo, writeModel } from '../../src/onnx/model.js';
import { DataType } from '../../src/onnx/proto.js';
import { buildTinyBert } from '../fixtures/tiny-models.js';

/** A copy of a tiny model folder, with `files` written over it. */
function variant(model: string, files: Record<string, unknown>): string {
  const dir = mkdtempSync(join(tmpdir(), 'onnx-gateway-facts-'));
  cpSync(join(inject('tinyModelsDir'), model), dir, { recursive: true });
  for (const [path, content] of Object.entries(files))
    writeFileSync(join(dir, path), content instanceof Uint8Array ? content : JSON.stringify(content));
  return dir;
}

const facts = (dir: string) => readModelFacts(dir, join(dir, 'onnx', 'model.onnx'), 'm');
const pooling = (flags: Record<string, unknown>) => ({ word_embedding_dimension: 32, ...flags });
const modules = (...types: string[]) =>
  types.map((type, idx) => ({
    idx,
    name: String(idx),
    path: idx === 0 ? '' : `${idx}_${type}`,
    type: `sentence_transformers.models.${type}`,
  }));

describe('model facts from the files', () => {
  it('reads the interface, window, pooling and normalisation of the tiny embedder', async () => {
    const read = await facts(join(inject('tinyModelsDir'), 'tiny-embedder'));
    expect(read).toMatchObject({
      task: 'embedding',
      family: 'bert',
      pooling: 'mean',
      normalize: true,
      output: { name: 'last_hidden_state', pooled: false },
    });
    expect(read.feeds).toMatchObject({ idType: 'int64', tokenTypeIds: true, positionIds: false, pastKeyValues: [] });
    expect(read.declared).toEqual({ pooling: true, normalize: true, prompts: false });
  });

  it.each([
    [{ pooling_mode_cls_token: true }, 'cls'],
    [{ pooling_mode_max_tokens: true }, 'max'],
    [{ pooling_mode_lasttoken: true }, 'lasttoken'],
    [{ pooling_mode_weightedmean_tokens: true }, 'weightedmean'],
    [{ pooling_mode_mean_sqrt_len_tokens: true }, 'mean_sqrt_len'],
    [{ pooling_mode: 'lasttoken' }, 'lasttoken'],
  ])('pools as 1_Pooling/config.json says: %j', async (flags, mode) => {
    expect((await facts(variant('tiny-embedder', { '1_Pooling/config.json': pooling(flags) }))).pooling).toBe(mode);
  });

  it('takes prompts and the default prompt from config_sentence_transformers.json', async () => {
    const dir = variant('tiny-embedder', {
      'config_sentence_transformers.json': { prompts: { query: 'q: ', document: '' }, default_prompt_name: 'query' },
    });
    expect(await facts(dir)).toMatchObject({
      prompts: { query: 'q: ', document: '' },
      defaultPromptName: 'query',
      declared: { prompts: true },
    });
  });

  /** The tiny reranker with a head of `labels` labels named as given. */
  const labelled = (id2label: Record<number, string>) => {
    const config = JSON.parse(
      readFileSync(join(inject('tinyModelsDir'), 'tiny-reranker', 'config.json'), 'utf8'),
    ) as Record<string, unknown>;
    const graph = buildTinyBert('reranker');
    graph.graph!.output = [valueInfo('logits', DataType.FLOAT, ['batch', Object.keys(id2label).length])];
    return variant('tiny-reranker', { 'config.json': { ...config, id2label }, 'onnx/model.onnx': writeModel(graph) });
  };

  it('scores a two-label head by the positive label, found by name, else the second', async () => {
    expect((await facts(labelled({ 0: 'relevant', 1: 'irrelevant' }))).rerankScoring).toEqual({
      kind: 'softmax',
      positive: 0,
      labels: 2,
    });
    expect((await facts(labelled({ 0: 'LABEL_0', 1: 'LABEL_1' }))).rerankScoring).toEqual({
      kind: 'softmax',
      positive: 1,
      labels: 2,
    });
  });

  it('tells a classifier from a cross-encoder by its head: labels, their names, problem_type, CrossEncoder markers', async () => {
    const withConfig = (extra: Record<string, unknown>, id2label: Record<number, string>) => {
      const dir = labelled(id2label);
      const config = JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8')) as Record<string, unknown>;
      writeFileSync(join(dir, 'config.json'), JSON.stringify({ ...config, ...extra }));
      return dir;
    };
    expect(await facts(labelled({ 0: 'a', 1: 'b', 2: 'c' }))).toMatchObject({
      task: 'classify',
      activation: 'softmax',
      width: 3,
    });
    expect(await facts(labelled({ 0: 'NEGATIVE', 1: 'POSITIVE' }))).toMatchObject({
      task: 'classify',
      activation: 'softmax',
    });
    expect(await facts(labelled({ 0: 'LABEL_0', 1: 'LABEL_1' }))).toMatchObject({ task: 'rerank' });
    expect(await facts(labelled({ 0: 'relevant', 1: 'irrelevant' }))).toMatchObject({ task: 'rerank' });
    expect(
      await facts(withConfig({ problem_type: 'multi_label_classification' }, { 0: 'LABEL_0', 1: 'LABEL_1' })),
    ).toMatchObject({ task: 'classify', activation: 'sigmoid' });
    expect(
      await facts(
        withConfig(
          { sentence_transformers: { activation_fn: 'torch.nn.modules.activation.Sigmoid' } },
          { 0: 'NEGATIVE', 1: 'POSITIVE' },
        ),
      ),
    ).toMatchObject({ task: 'rerank' });
    expect(await facts(labelled({ 0: 'LABEL_0' }))).toMatchObject({ task: 'rerank' });
    // A one-label head served as a classifier (a manifest says so): a sigmoid, or the raw score of a regression.
    const one = labelled({ 0: 'score' });
    expect(await readModelFacts(one, join(one, 'onnx', 'model.onnx'), 'm', 'classify')).toMatchObject({
      task: 'classify',
      activation: 'sigmoid',
    });
    const regression = withConfig({ problem_type: 'regression' }, { 0: 'score' });
    expect(await readModelFacts(regression, join(regression, 'onnx', 'model.onnx'), 'm', 'classify')).toMatchObject({
      activation: 'none',
    });
  });

  it('refuses a reranker (by its manifest) whose head has three labels, pointing to classify', async () => {
    const dir = labelled({ 0: 'a', 1: 'b', 2: 'c' });
    await expect(readModelFacts(dir, join(dir, 'onnx', 'model.onnx'), 'm', 'rerank')).rejects.toThrow(
      /has 3 labels \(a, b, c\); a reranker gives one relevance logit or two.*"task": "classify"/,
    );
  });

  const refusals: Array<[string, string, Record<string, unknown>, RegExp]> = [
    [
      'a Dense module the graph does not contain',
      'tiny-embedder',
      { 'modules.json': modules('Transformer', 'Pooling', 'Dense', 'Normalize') },
      /Dense module .* does not contain.*optimum-cli export onnx/,
    ],
    [
      'an unknown pooling mode',
      'tiny-embedder',
      { '1_Pooling/config.json': pooling({ pooling_mode_attention_tokens: true }) },
      /pooling mode "attention" is not supported/,
    ],
    [
      'concatenated pooling modes',
      'tiny-embedder',
      { '1_Pooling/config.json': pooling({ pooling_mode_mean_tokens: true, pooling_mode_max_tokens: true }) },
      /concatenates 2 pooling modes \(mean \+ max\)/,
    ],
    [
      'a pooling that leaves the prompt out',
      'tiny-embedder',
      { '1_Pooling/config.json': pooling({ pooling_mode_mean_tokens: true, include_prompt: false }) },
      /include_prompt: false/,
    ],
    [
      'a file that is not JSON',
      'tiny-embedder',
      { 'modules.json': new TextEncoder().encode('{') },
      /modules\.json is not valid JSON/,
    ],
    [
      'a graph that is not ONNX',
      'tiny-embedder',
      { 'onnx/model.onnx': new Uint8Array([0xff, 0xff, 0xff]) },
      /not a readable ONNX model/,
    ],
    // A value of the wrong type: one error naming the file and the field, with the value found.
    [
      'a vocab_size that is a string',
      'tiny-embedder',
      { 'config.json': { model_type: 'bert', vocab_size: '30522', max_position_embeddings: 512 } },
      /config\.json: "vocab_size" must be integer; got "30522"\.$/,
    ],
    [
      'a label that is a number',
      'tiny-reranker',
      { 'config.json': { architectures: ['BertForSequenceClassification'], id2label: { 0: 1 } } },
      /config\.json: "id2label\.0" must be string; got 1\.$/,
    ],
    [
      'a module path that is a number',
      'tiny-embedder',
      { 'modules.json': [{ idx: 0, path: 1, type: 'sentence_transformers.models.Transformer' }] },
      /modules\.json: "0\.path" must be string; got 1\.$/,
    ],
    [
      'a modules.json that is no list',
      'tiny-embedder',
      { 'modules.json': { modules: [] } },
      /modules\.json: the file must be array; got \{"modules":\[\]\}\.$/,
    ],
    [
      'a pooling flag that is a string',
      'tiny-embedder',
      { '1_Pooling/config.json': pooling({ pooling_mode_cls_token: 'true' }) },
      /1_Pooling\/config\.json: "pooling_mode_cls_token" must be boolean; got "true"\.$/,
    ],
    [
      'a max_seq_length that is fractional',
      'tiny-embedder',
      { 'sentence_bert_config.json': { max_seq_length: 12.5 } },
      /sentence_bert_config\.json: "max_seq_length" must be integer; got 12\.5\.$/,
    ],
    [
      'prompts that are a list',
      'tiny-embedder',
      { 'config_sentence_transformers.json': { prompts: ['q: '] } },
      /config_sentence_transformers\.json: "prompts" must be object; got \["q: "\]\.$/,
    ],
    [
      'a mask token of neither form',
      'tiny-embedder',
      { 'tokenizer_config.json': { mask_token: { content: 4 } } },
      /tokenizer_config\.json: "mask_token" is none of the forms it may take; got \{"content":4\}\.$/,
    ],
  ];
  it.each(refusals)('refuses %s, saying what to do', async (_, model, files, message) => {
    const read = facts(variant(model, files));
    await expect(read).rejects.toThrow(ModelFilesError);
    await expect(read).rejects.toThrow(message);
  });

  it('reads the fields it uses and leaves the others alone; a null is absent', async () => {
    const config = JSON.parse(
      readFileSync(join(inject('tinyModelsDir'), 'tiny-embedder', 'config.json'), 'utf8'),
    ) as Record<string, unknown>;
    const dir = variant('tiny-embedder', {
      'config.json': { ...config, problem_type: null, rope_scaling: { type: 'linear' }, torch_dtype: 'float32' },
      'config_sentence_transformers.json': {
        prompts: { query: 'q: ' },
        default_prompt_name: null,
        __version__: { sentence_transformers: '3.0.1' },
      },
    });
    expect(await facts(dir)).toMatchObject({
      task: 'embedding',
      family: 'bert',
      prompts: { query: 'q: ' },
      defaultPromptName: undefined,
    });
  });

  it('refuses a graph input it does not know how to feed', async () => {
    const graph = buildTinyBert('embedder');
    graph.graph!.input!.push(valueInfo('pixel_values', DataType.FLOAT, ['batch', 3]));
    const dir = variant('tiny-embedder', { 'onnx/model.onnx': writeModel(graph) });
    await expect(facts(dir)).rejects.toThrow(/inputs this server does not know how to feed: "pixel_values"/);
  });
});
