/**
 * Pulling models by Hub repository id against a stand-in Hub that serves repository layouts as
 * the Hub does (its API's file listing, resolve with LFS redirects): the files taken, the commit
 * and the lock file, revisions, variants, external-data files, and every refusal. Then the same
 * through the built command and the server's start.
 */
import { execFile, spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { arch } from 'node:process';
import { createInterface } from 'node:readline';
import { promisify } from 'node:util';
import * as ort from 'onnxruntime-node';
import { afterAll, beforeAll, beforeEach, describe, expect, inject, it } from 'vitest';
import { Catalogue } from '../../src/models/catalogue.js';
import {
  downloadMissing,
  pullModel,
  PullRefusal,
  pullTarget,
  type PullOptions,
  type PullReport,
} from '../../src/models/download.js';
import { Hub } from '../../src/models/hub.js';
import { LOCK_FILE, readLock } from '../../src/models/lock.js';
import { filesIn, stagingDirOf } from '../../src/models/paths.js';
import { loadServedModel } from '../../src/models/registry.js';
import type { Variant } from '../../src/models/variants.js';
import { writeModel } from '../../src/onnx/model.js';
import { commitSha, externalDataModel, graphVariant, json, modulesJson, poolingConfig } from '../fixtures/hub-repos.js';
import {
  gitSha1,
  repoFromFolder,
  sha256,
  startStandInHub,
  type HubRepo,
  type StandInHub,
} from '../fixtures/stand-in-hub.js';
import { buildTinyBert } from '../fixtures/tiny-models.js';

const execFileAsync = promisify(execFile);

const BGE = 'BAAI/bge-small-en-v1.5';
const MAIN = commitSha('bge main');
/** The commit the catalogue pins (models/bge-small-en-v1.5.json), the stand-in's tag v1.0; main is newer. */
const OLD = (JSON.parse(readFileSync('models/bge-small-en-v1.5.json', 'utf8')) as { source: { revision: string } })
  .source.revision;
const NATIVE_INT8 = arch === 'arm64' ? 'onnx/model_qint8_arm64.onnx' : 'onnx/model_qint8_avx512.onnx';
const DATA = ['onnx/model.onnx_data', 'onnx/model.onnx_data_1'];

/** The files a pull of the fp32 variant takes from the tiny embedder's layout. */
const EMBEDDER_FILES = [
  '1_Pooling/config.json',
  'config.json',
  'modules.json',
  'onnx/model.onnx',
  'special_tokens_map.json',
  'tokenizer.json',
  'tokenizer_config.json',
];

let root: string;
let hub: StandInHub;
let repos: Map<string, HubRepo>;
let modelsDir: string;
let run = 0;

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'onnx-gateway-pull-repo-'));
  const tiny = inject('tinyModelsDir');
  const folder = async (name: string, repo: string, revision: string) =>
    repoFromFolder(join(tiny, name), repo, revision);
  const embedder = await folder('tiny-embedder', 'x/y', MAIN);
  const graph = embedder.files.get('onnx/model.onnx')!;

  // A sentence-transformers repository: weights in other formats, a README, ONNX variants.
  const bge = embedder.files;
  bge.set('README.md', Buffer.from('# bge-small-en-v1.5 (stand-in)\n'));
  bge.set('model.safetensors', Buffer.alloc(4096, 1));
  bge.set('pytorch_model.bin', Buffer.alloc(4096, 2));
  bge.set('onnx/model_fp16.onnx', graphVariant(graph, 'fp16'));
  bge.set('onnx/model_qint8_avx512.onnx', graphVariant(graph, 'qint8 avx512'));
  bge.set('onnx/model_qint8_arm64.onnx', graphVariant(graph, 'qint8 arm64'));
  bge.set('sentence_bert_config.json', json({ max_seq_length: 64, do_lower_case: true }));
  // The older commit: another config, an extra file, no fp16 graph.
  const old = new Map(bge);
  old.set('config.json', json({ ...JSON.parse(bge.get('config.json')!.toString()), note: 'v1.0' }));
  old.set('config_sentence_transformers.json', json({ prompts: {}, default_prompt_name: null }));
  old.delete('onnx/model_fp16.onnx');

  const external = externalDataModel(
    'embedder',
    DATA.map((path) => path.slice('onnx/'.length)),
  );
  const externalFp16 = externalDataModel('embedder', ['model_fp16.onnx_data']);
  const withFiles = (files: Map<string, Buffer>, changes: Record<string, Buffer | null>) => {
    const copy = new Map(files);
    for (const [path, bytes] of Object.entries(changes)) {
      if (bytes === null) copy.delete(path);
      else copy.set(path, bytes);
    }
    return copy;
  };
  const embedderFiles = (await folder('tiny-embedder', 'x/y', MAIN)).files;
  const sentence = (await folder('tiny-embedder-sentence', 'x/y', MAIN)).files;
  const reranker = (await folder('tiny-reranker', 'x/y', MAIN)).files;
  const config = JSON.parse(embedderFiles.get('config.json')!.toString()) as Record<string, unknown>;
  const remoteCodeConfig = json({
    ...config,
    architectures: ['NomicBertModel'],
    model_type: 'nomic_bert',
    auto_map: {
      AutoConfig: 'nomic-ai/nomic-bert-2048--configuration_hf_nomic_bert.NomicBertConfig',
      AutoModel: 'nomic-ai/nomic-bert-2048--modeling_hf_nomic_bert.NomicBertModel',
    },
  });
  const dense = {
    '2_Dense/config.json': json({
      in_features: 32,
      out_features: 16,
      bias: true,
      activation_function: 'torch.nn.modules.linear.Identity',
    }),
  };
  const denseModules = modulesJson(
    { path: '1_Pooling', type: 'Pooling' },
    { path: '2_Dense', type: 'Dense' },
    { path: '3_Normalize', type: 'Normalize' },
  );

  const layouts: Record<string, Map<string, Buffer>> = {
    'onnx-gateway-tests/big-embedder': withFiles(embedderFiles, {
      'onnx/model.onnx': external.graph,
      [DATA[0]!]: external.data.get('model.onnx_data')!,
      [DATA[1]!]: external.data.get('model.onnx_data_1')!,
      'onnx/model_fp16.onnx': externalFp16.graph,
      'onnx/model_fp16.onnx_data': externalFp16.data.get('model_fp16.onnx_data')!,
    }),
    'onnx-gateway-tests/no-onnx': withFiles(embedderFiles, {
      'onnx/model.onnx': null,
      'model.safetensors': Buffer.alloc(4096, 3),
    }),
    'onnx-gateway-tests/no-onnx-reranker': withFiles(reranker, {
      'onnx/model.onnx': null,
      'model.safetensors': Buffer.alloc(4096, 4),
    }),
    'onnx-gateway-tests/remote-code': withFiles(embedderFiles, {
      'onnx/model.onnx': null,
      'config.json': remoteCodeConfig,
      'modeling_hf_nomic_bert.py': Buffer.from('# code\n'),
    }),
    'onnx-gateway-tests/remote-code-with-onnx': withFiles(embedderFiles, { 'config.json': remoteCodeConfig }),
    'onnx-gateway-tests/dense-missing': withFiles(embedderFiles, { 'modules.json': denseModules, ...dense }),
    'onnx-gateway-tests/dense-in-graph': withFiles(sentence, { 'modules.json': denseModules, ...dense }),
    'onnx-gateway-tests/pooling-combined': withFiles(embedderFiles, {
      '1_Pooling/config.json': poolingConfig('pooling_mode_mean_tokens', 'pooling_mode_max_tokens'),
    }),
    'onnx-gateway-tests/pooling-unknown': withFiles(embedderFiles, {
      '1_Pooling/config.json': poolingConfig('pooling_mode_fancy_tokens'),
    }),
    'onnx-gateway-tests/pooling-lasttoken': withFiles(embedderFiles, {
      '1_Pooling/config.json': poolingConfig('pooling_mode_lasttoken'),
    }),
  };
  repos = new Map<string, HubRepo>([
    [BGE, { repo: BGE, revision: MAIN, files: bge, older: [{ revision: OLD, files: old }], refs: { 'v1.0': OLD } }],
    ...Object.entries(layouts).map(([repo, files]): [string, HubRepo] => [
      repo,
      { repo, revision: commitSha(repo.split('/')[1]!), files },
    ]),
  ]);
  hub = await startStandInHub([...repos.values()]);
});
afterAll(async () => {
  await hub?.close();
  await rm(root, { recursive: true, force: true });
});
beforeEach(() => {
  modelsDir = join(root, `models-${++run}`);
  for (const key of Object.keys(hub.faults)) delete hub.faults[key as keyof typeof hub.faults];
  hub.requests.length = 0;
});

const noCatalogue = new Catalogue([]);
let logs: string[] = [];
const options = (variants: Variant[] = ['fp32'], extra: Partial<PullOptions> = {}): PullOptions => {
  logs = [];
  return {
    modelsDir,
    hub: new Hub({ endpoint: hub.url }),
    retryDelay: () => 0,
    variants,
    log: (line) => logs.push(line),
    ...extra,
  };
};
const target = (repo: string, revision?: string) => pullTarget(repo, noCatalogue, modelsDir, revision)!;
const pull = (repo: string, variants: Variant[] = ['fp32'], extra: Partial<PullOptions> & { revision?: string } = {}) =>
  pullModel(target(repo, extra.revision), options(variants, extra));
const refusal = (repo: string, variants: Variant[] = ['fp32']) =>
  pull(repo, variants).then(
    () => undefined,
    (error: Error) => error,
  );
const dirOf = (repo: string) => join(modelsDir, ...repo.split('/'));
const fileOf = (repo: string, commit: string, path: string) =>
  [repos.get(repo)!, ...(repos.get(repo)!.older ?? [])].find((c) => c.revision === commit)!.files.get(path)!;
const apiCalls = () => hub.requests.filter((r) => r.path.startsWith('/api/')).map((r) => r.path);
const fetched = (report: PullReport) =>
  report.files
    .filter((f) => f.status === 'downloaded')
    .map((f) => f.path)
    .sort();

describe('pull by repository id', () => {
  it('takes the files a server needs at the commit main is, into <owner>/<name>, with a lock file that names every one', async () => {
    const report = await pull(BGE);
    const dir = dirOf(BGE);
    expect(report.dir).toBe(dir);
    // No README, no weights in other formats, no other variant.
    expect(filesIn(dir)).toEqual([...EMBEDDER_FILES, LOCK_FILE, 'sentence_bert_config.json'].sort());
    for (const path of filesIn(dir).filter((p) => p !== LOCK_FILE))
      expect((await readFile(join(dir, path))).equals(fileOf(BGE, MAIN, path)), path).toBe(true);
    expect(existsSync(stagingDirOf(dir))).toBe(false);

    const lock = JSON.parse(await readFile(join(dir, LOCK_FILE), 'utf8')) as { files: unknown[] };
    const checksum = (path: string) => {
      const bytes = fileOf(BGE, MAIN, path);
      return path.endsWith('.onnx') ? { sha256: sha256(bytes) } : { gitSha1: gitSha1(bytes) };
    };
    expect(lock).toEqual({
      version: 1,
      repo: BGE,
      revision: 'main',
      commit: MAIN,
      variants: { fp32: 'onnx/model.onnx' },
      files: expect.arrayContaining(
        [...EMBEDDER_FILES, 'sentence_bert_config.json'].map((path) => ({
          path,
          size: fileOf(BGE, MAIN, path).length,
          ...checksum(path),
        })),
      ) as unknown,
      pulledAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT/) as unknown,
    });
    expect(lock.files).toHaveLength(8);
    expect(readLock(dir)).toEqual(lock);
    expect(logs).toEqual([`${BGE}: main is commit ${MAIN}`, 'fp32: onnx/model.onnx']);

    // One listing, then every file at the commit it answered; no HEAD per file.
    expect(apiCalls()).toEqual([`/api/models/${BGE}/revision/main?blobs=true`]);
    expect(hub.requests.filter((r) => r.method === 'HEAD')).toHaveLength(0);
    const resolved = hub.requests.filter((r) => r.server === 'hub' && r.path.includes('/resolve/'));
    expect(resolved).toHaveLength(8);
    expect(resolved.every((r) => r.path.startsWith(`/${BGE}/resolve/${MAIN}/`))).toBe(true);

    const model = await loadServedModel(BGE, modelsDir, noCatalogue);
    expect(model).toMatchObject({
      id: BGE,
      task: 'embedding',
      dir,
      onnxPath: join(dir, 'onnx', 'model.onnx'),
      maxTokens: 64,
    });
  });

  it('pulls a named revision; the next pull re-uses the locked commit; --update and @main move it', async () => {
    const dir = dirOf(BGE);
    const first = await pull(BGE, ['fp32'], { revision: 'v1.0' });
    expect(logs[0]).toBe(`${BGE}: v1.0 is commit ${OLD}, as asked`);
    expect(first.lock).toMatchObject({ revision: 'v1.0', commit: OLD });
    expect(JSON.parse(await readFile(join(dir, 'config.json'), 'utf8'))).toMatchObject({ note: 'v1.0' });
    expect(existsSync(join(dir, 'config_sentence_transformers.json'))).toBe(true);

    hub.requests.length = 0;
    const again = await pull(BGE);
    expect(logs[0]).toMatch(
      new RegExp(
        `^${BGE}: commit ${OLD}, as locked in onnx-gateway\\.lock\\.json \\(pulled from v1\\.0 on \\d{4}-\\d\\d-\\d\\d\\); --update or @<revision> moves it\\.$`,
      ),
    );
    expect(apiCalls()).toEqual([`/api/models/${BGE}/revision/${OLD}?blobs=true`]);
    expect(fetched(again)).toEqual([]);
    expect(again.lock).toMatchObject({ revision: 'v1.0', commit: OLD });

    const updated = await pull(BGE, ['fp32'], { update: true });
    expect(logs[0]).toBe(`${BGE}: main is commit ${MAIN}`);
    expect(updated.lock).toMatchObject({ revision: 'main', commit: MAIN });
    // Only what differs is fetched; a file the new commit does not have leaves with the old lock.
    expect(fetched(updated)).toEqual(['config.json']);
    expect(JSON.parse(await readFile(join(dir, 'config.json'), 'utf8'))).not.toHaveProperty('note');
    expect(existsSync(join(dir, 'config_sentence_transformers.json'))).toBe(false);

    await pull(BGE, ['fp32'], { revision: OLD });
    expect(logs[0]).toBe(`${BGE}: commit ${OLD}, as asked`);
    const main = await pull(BGE, ['fp32'], { revision: 'main' });
    expect(main.lock).toMatchObject({ revision: 'main', commit: MAIN });
    expect(readLock(dir)).toMatchObject({ commit: MAIN });
  });

  it('takes the variant asked for, keeps the variants pulled before, and says which variants a repository has when it lacks one', async () => {
    const dir = dirOf(BGE);
    const fp16 = await pull(BGE, ['fp16']);
    expect(logs).toContain('fp16: onnx/model_fp16.onnx');
    expect(fp16.lock.variants).toEqual({ fp16: 'onnx/model_fp16.onnx' });
    expect(existsSync(join(dir, 'onnx', 'model.onnx'))).toBe(false);
    expect(
      (await readFile(join(dir, 'onnx', 'model_fp16.onnx'))).equals(fileOf(BGE, MAIN, 'onnx/model_fp16.onnx')),
    ).toBe(true);

    // int8: of the instruction-set graphs, the one for this machine.
    const int8 = await pull(BGE, ['int8']);
    expect(logs).toContain(`int8: ${NATIVE_INT8}`);
    expect(int8.lock.variants).toEqual({ int8: NATIVE_INT8, fp16: 'onnx/model_fp16.onnx' });
    expect(int8.files.find((f) => f.path === 'onnx/model_fp16.onnx')).toMatchObject({
      status: 'present',
      verifiedBy: 'sha256',
    });
    expect(filesIn(join(dir, 'onnx'))).toEqual(['model_fp16.onnx', NATIVE_INT8.slice('onnx/'.length)].sort());

    const before = await readFile(join(dir, LOCK_FILE), 'utf8');
    hub.requests.length = 0;
    const missing = await refusal(BGE, ['O3']);
    // The listing was enough to refuse it.
    expect(hub.requests.map((r) => r.path)).toEqual([`/api/models/${BGE}/revision/${MAIN}?blobs=true`]);
    expect(missing).toBeInstanceOf(PullRefusal);
    expect((missing as Error).message).toBe(
      `${BGE} at commit ${MAIN.slice(0, 7)} has no O3 graph (looked for onnx/model_O3.onnx). ` +
        `Its ONNX variants: fp32 (onnx/model.onnx), fp16 (onnx/model_fp16.onnx), int8 (${NATIVE_INT8}). Pull one with --variant <name> (served as "${BGE}:<name>").`,
    );
    expect(await readFile(join(dir, LOCK_FILE), 'utf8')).toBe(before);
    expect(existsSync(stagingDirOf(dir))).toBe(false);

    // A variant that was pulled before and the commit no longer has is dropped, not refused.
    await pull(BGE, ['fp32'], { revision: OLD });
    expect(logs).toContain(`fp16: no such graph at commit ${OLD.slice(0, 7)}; dropped from the lock file`);
    expect(readLock(dir)!.variants).toEqual({ fp32: 'onnx/model.onnx', int8: NATIVE_INT8 });
    expect(existsSync(join(dir, 'onnx', 'model_fp16.onnx'))).toBe(false);
  });

  it("fetches a graph's external-data files with it (only its own), resumes one cut off, and the model runs", async () => {
    const repo = 'onnx-gateway-tests/big-embedder';
    const dir = dirOf(repo);
    const data = fileOf(repo, repos.get(repo)!.revision, DATA[1]!);
    const cutAt = Math.floor(data.length / 2);
    hub.faults.cut = { path: DATA[1]!, afterBytes: cutAt, times: 1 };
    const failed = await pull(repo, ['fp32'], { retries: 0 }).catch((error: Error) => error);
    expect((failed as Error).message).toMatch(
      /onnx\/model\.onnx_data_1: the transfer broke off .* partial file is kept/,
    );
    expect(existsSync(dir)).toBe(false);
    const kept = (await stat(join(stagingDirOf(dir), `${DATA[1]}.part`))).size;
    expect(kept).toBeGreaterThan(0);

    hub.requests.length = 0;
    const report = await pull(repo);
    expect(logs).toContain(`fp32: onnx/model.onnx with its external data ${DATA.join(', ')}`);
    const cdnGets = hub.requests.filter((r) => r.server === 'cdn' && r.method === 'GET');
    expect(cdnGets).toContainEqual(
      expect.objectContaining({ range: `bytes=${kept}-`, status: 206, sent: data.length - kept }),
    );
    expect(report.files.filter((f) => f.path.includes('onnx_data'))).toEqual(
      DATA.map((path) => expect.objectContaining({ path, verifiedBy: 'sha256' }) as unknown),
    );
    expect(filesIn(join(dir, 'onnx'))).toEqual(['model.onnx', 'model.onnx_data', 'model.onnx_data_1']);
    expect(report.lock.files.filter((f) => f.path.startsWith('onnx/')).map((f) => f.path)).toEqual([
      'onnx/model.onnx',
      ...DATA,
    ]);
    for (const path of DATA)
      expect((await readFile(join(dir, path))).equals(fileOf(repo, repos.get(repo)!.revision, path)), path).toBe(true);

    // ONNX Runtime finds the weights beside the graph: the same outputs as the inline tiny embedder.
    const feeds = {
      input_ids: new ort.Tensor('int64', BigInt64Array.from([2n, 40n, 41n, 3n]), [1, 4]),
      attention_mask: new ort.Tensor('int64', BigInt64Array.from([1n, 1n, 1n, 1n]), [1, 4]),
      token_type_ids: new ort.Tensor('int64', new BigInt64Array(4), [1, 4]),
    };
    const pulled = await ort.InferenceSession.create(join(dir, 'onnx', 'model.onnx'));
    const inline = await ort.InferenceSession.create(writeModel(buildTinyBert('embedder')));
    const [a, b] = [
      (await pulled.run(feeds)).last_hidden_state!.data,
      (await inline.run(feeds)).last_hidden_state!.data,
    ] as Float32Array[];
    expect(a!.length).toBe(4 * 32);
    expect([...a!]).toEqual([...b!]);
    await Promise.all([pulled.release(), inline.release()]);
  });

  it('accepts remote-code architectures that ship an ONNX graph, Dense modules inside the graph, and last-token pooling', async () => {
    await pull('onnx-gateway-tests/remote-code-with-onnx');
    const dense = await pull('onnx-gateway-tests/dense-in-graph');
    expect(dense.files.map((f) => f.path)).toContain('2_Dense/config.json');
    expect(existsSync(join(dirOf('onnx-gateway-tests/dense-in-graph'), '2_Dense', 'config.json'))).toBe(true);
    await pull('onnx-gateway-tests/pooling-lasttoken');
  });
});

describe('refusals: a message that says what is missing and what to do, and nothing installed', () => {
  const refused = async (repo: string, pattern: RegExp) => {
    const error = await refusal(repo);
    expect(error).toBeInstanceOf(PullRefusal);
    expect((error as Error).message).toMatch(pattern);
    expect(existsSync(dirOf(repo))).toBe(false);
    expect(existsSync(stagingDirOf(dirOf(repo)))).toBe(false);
    return (error as Error).message;
  };

  it('a repository without an ONNX export: the optimum command for its task', async () => {
    const embedder = await refused(
      'onnx-gateway-tests/no-onnx',
      /^onnx-gateway-tests\/no-onnx at commit \w{7} has no ONNX export \(no \.onnx file\), and this server runs ONNX graphs only\. Export one with Optimum into the model's folder:\n/,
    );
    expect(embedder).toContain(
      `into the model's folder:\n  optimum-cli export onnx --model onnx-gateway-tests/no-onnx --task feature-extraction ${dirOf('onnx-gateway-tests/no-onnx')}\nand the server serves that folder as "onnx-gateway-tests/no-onnx".`,
    );
    const reranker = await refused('onnx-gateway-tests/no-onnx-reranker', /has no ONNX export/);
    expect(reranker).toContain('--task text-classification');
    // config.json says which task; nothing else was fetched.
    expect(hub.requests.filter((r) => r.path.includes('/resolve/')).map((r) => r.path.split('/').pop())).toEqual([
      'config.json',
      'config.json',
    ]);
  });

  it('an architecture that needs remote code and ships no ONNX file', async () => {
    await refused(
      'onnx-gateway-tests/remote-code',
      /ships no ONNX file, and its architecture \(NomicBertModel\) needs the repository's own Python code \(config\.json auto_map: AutoConfig -> .*, AutoModel -> nomic-ai\/nomic-bert-2048--modeling_hf_nomic_bert\.NomicBertModel\)\. This server runs ONNX graphs only/,
    );
  });

  it('a Dense module in modules.json that the graph does not contain', async () => {
    await refused(
      'onnx-gateway-tests/dense-missing',
      /^Model "onnx-gateway-tests\/dense-missing": modules\.json has a Dense module \(2_Dense\) that the ONNX graph does not contain \(it outputs "last_hidden_state", not "sentence_embedding"\).* Export the whole sentence-transformers pipeline \(optimum-cli export onnx --library sentence_transformers .* Nothing was installed\.$/,
    );
  });

  it('an unknown or combined pooling mode', async () => {
    await refused(
      'onnx-gateway-tests/pooling-unknown',
      /1_Pooling\/config\.json says the pooling mode "fancy" is not supported; this server pools by one of mean, cls, max, lasttoken, weightedmean, mean_sqrt_len\./,
    );
    await refused(
      'onnx-gateway-tests/pooling-combined',
      /1_Pooling\/config\.json says it concatenates 2 pooling modes \(mean \+ max\)/,
    );
  });

  it('a revision the repository does not have', async () => {
    const error = await pull(BGE, ['fp32'], { revision: 'no-such-branch' }).catch((e: Error) => e);
    expect((error as Error).message).toMatch(
      /The Hub has no BAAI\/bge-small-en-v1\.5 at revision no-such-branch \(404: the revision does not exist\)/,
    );
    expect(existsSync(dirOf(BGE))).toBe(false);
  });
});

describe('server start', () => {
  it('pulls the variants configured ids lack, once per repository, and nothing when they are there', async () => {
    const announced: string[] = [];
    const reports = await downloadMissing([`${BGE}:fp16`, BGE, 'a-local-folder'], noCatalogue, {
      ...options(),
      defaultVariant: 'fp32',
      onModel: (t, variants) => announced.push(`${t.repo}: ${variants.join(',')}`),
    });
    expect(announced).toEqual([`${BGE}: fp16,fp32`]);
    expect(reports.map((r) => r.lock.variants)).toEqual([{ fp16: 'onnx/model_fp16.onnx', fp32: 'onnx/model.onnx' }]);
    hub.requests.length = 0;
    expect(await downloadMissing([BGE, `${BGE}:fp16`], noCatalogue, options())).toEqual([]);
    expect(hub.requests).toHaveLength(0);
  });

  it('pulls the fp16 graph of a model bound for an accelerator, the fp32 one where the repository has none', async () => {
    const plain = 'onnx-gateway-tests/dense-in-graph';
    const announced: string[] = [];
    const reports = await downloadMissing([BGE, plain], noCatalogue, {
      ...options(),
      defaultVariant: 'fp32',
      onAccelerator: new Set([BGE, plain]),
      onModel: (t, variants) => announced.push(`${t.repo}: ${variants.join(',')}`),
    });
    expect(announced).toEqual([`${BGE}: fp16`, `${plain}: fp16`]);
    expect(reports.map((r) => r.lock.variants)).toEqual([
      { fp16: 'onnx/model_fp16.onnx' },
      { fp32: 'onnx/model.onnx' },
    ]);
    // What is here serves: no request to the Hub, and a model whose fp32 graph is here is not given an fp16 one.
    hub.requests.length = 0;
    const again = { ...options(), defaultVariant: 'fp32' as const, onAccelerator: new Set([BGE, plain]) };
    expect(await downloadMissing([BGE, plain], noCatalogue, again)).toEqual([]);
    expect(hub.requests).toHaveLength(0);
  });
});

describe('the command', () => {
  let env: NodeJS.ProcessEnv;
  beforeEach(() => {
    env = { ...process.env, HF_ENDPOINT: hub.url, ONNX_GATEWAY_MODELS_DIR: modelsDir };
    for (const name of [
      'HF_TOKEN',
      'ONNX_GATEWAY_HF_ENDPOINT',
      'ONNX_GATEWAY_MODELS',
      'ONNX_GATEWAY_DOWNLOAD',
      'ONNX_GATEWAY_MANIFESTS_DIR',
      'ONNX_GATEWAY_ONNX_VARIANT',
    ])
      delete env[name];
  });
  const cli = async (args: string[]) => {
    try {
      const { stdout, stderr } = await execFileAsync('node', ['dist/cli/index.js', ...args], { env });
      return { code: 0, stdout, stderr };
    } catch (error) {
      return error as { code: number; stdout: string; stderr: string };
    }
  };

  it("models pull BAAI/bge-small-en-v1.5 (at the catalogue's pin), @main:fp16, then models list names the commit; refusals exit 1", async () => {
    const pulled = await cli(['models', 'pull', BGE]);
    expect(pulled.code).toBe(0);
    expect(pulled.stderr).toMatch(
      new RegExp(`^${BGE} from http://127\\.0\\.0\\.1:\\d+ into .*/BAAI/bge-small-en-v1\\.5$`, 'm'),
    );
    expect(pulled.stderr).toMatch(new RegExp(`^${BGE}: commit ${OLD}, as the catalogue pins$`, 'm'));
    expect(pulled.stderr).toMatch(/^fp32: onnx\/model\.onnx$/m);
    expect(pulled.stderr).toMatch(/^onnx\/model\.onnx: downloaded, \d+\.\d kB, verified by sha256$/m);
    expect(pulled.stdout).toMatch(
      new RegExp(
        `^${BGE}: downloaded 9 of 9 files \\(\\d+\\.\\d kB\\), verified, commit ${OLD} \\(fp32: onnx/model\\.onnx\\), in .*/BAAI/bge-small-en-v1\\.5\\n$`,
      ),
    );
    expect(readLock(dirOf(BGE))).toMatchObject({ revision: OLD, commit: OLD });

    // A named revision moves off the pin; the fp32 graph pulled before comes along.
    const fp16 = await cli(['models', 'pull', `${BGE}@main:fp16`]);
    expect(fp16.stderr).toMatch(new RegExp(`^${BGE}: main is commit ${MAIN}, as asked$`, 'm'));
    expect(fp16.stdout).toContain(`downloaded 2 of 9 files`);
    expect(fp16.stdout).toContain(`commit ${MAIN} (fp16: onnx/model_fp16.onnx, fp32: onnx/model.onnx)`);

    // Listed under its catalogue id, with the locked commit rather than the pin.
    const listed = await cli(['models', 'list']);
    expect(listed.stdout).toMatch(
      new RegExp(
        `^bge-small-en-v1\\.5\\s+embedding\\s+hub:${BGE}@${MAIN.slice(0, 7)}\\s+present\\s+fp32,fp16\\s+\\d+\\.\\d kB$`,
        'm',
      ),
    );
    expect(listed.stdout).not.toMatch(new RegExp(`^${BGE}\\s`, 'm'));
    const json = JSON.parse((await cli(['models', 'list', '--json'])).stdout) as Array<{ id: string; commit?: string }>;
    expect(json.find((m) => m.id === 'bge-small-en-v1.5')).toMatchObject({ commit: MAIN });

    const none = await cli(['models', 'pull', 'onnx-gateway-tests/no-onnx']);
    expect(none.code).toBe(1);
    expect(none.stderr).toMatch(
      /^onnx-gateway: onnx-gateway-tests\/no-onnx at commit \w{7} has no ONNX export .*\n {2}optimum-cli export onnx --model onnx-gateway-tests\/no-onnx --task feature-extraction /m,
    );
    expect(existsSync(dirOf('onnx-gateway-tests/no-onnx'))).toBe(false);
    const notThere = await cli(['models', 'pull', 'onnx-gateway-tests/missing@main']);
    expect(notThere.code).toBe(1);
    expect(notThere.stderr).toMatch(/The Hub has no repository onnx-gateway-tests\/missing \(401 RepoNotFound\)/);
  });

  it('ONNX_GATEWAY_MODELS=<owner>/<name>: the server pulls it at start and serves it by that id', async () => {
    const child = spawn('node', ['dist/cli/index.js', 'serve', '--port', '0'], {
      env: { ...env, ONNX_GATEWAY_MODELS: BGE, ONNX_GATEWAY_WORKERS: '1' },
    });
    let stderr = '';
    child.stderr.on('data', (chunk) => (stderr += chunk));
    const exited = new Promise<number>((resolve) => child.on('exit', (code) => resolve(code ?? -1)));
    try {
      const address = await Promise.race([
        new Promise<string>((resolve) =>
          createInterface({ input: child.stdout }).on('line', (line) => {
            const found = /Server listening at (http:\/\/127\.0\.0\.1:\d+)/.exec(line)?.[1];
            if (found) resolve(found);
          }),
        ),
        exited.then((code) => Promise.reject(new Error(`serve exited ${code}: ${stderr}`))),
      ]);
      expect(stderr).toContain(
        `${BGE}: fp32 missing, downloading into ${dirOf(BGE)}\n${BGE}: commit ${OLD}, as the catalogue pins\n`,
      );
      const models = (await (await fetch(`${address}/v1/models`)).json()) as { data: Array<{ id: string }> };
      expect(models.data.map((m) => m.id)).toEqual([BGE]);
      const embedded = (await (
        await fetch(`${address}/v1/embeddings`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ model: BGE, input: 'hello world' }),
        })
      ).json()) as {
        data: Array<{ embedding: number[] }>;
      };
      expect(embedded.data[0]!.embedding).toHaveLength(32);
    } finally {
      child.kill('SIGTERM');
      await exited;
    }
  });
});
