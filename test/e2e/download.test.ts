/**
 * The downloader against a stand-in Hub on loopback: verified, staged, resumable pulls, and the
 * Hub's refusals. The tiny embedder's files are served as a Hub repository, pulled through a
 * catalogue manifest (an alias of the repository).
 */
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, inject, it } from 'vitest';
import { Catalogue, type Manifest } from '../../src/models/catalogue.js';
import {
  DownloadError,
  downloadMissing,
  pullModel,
  pullTarget,
  type PullOptions,
  type PullTarget,
} from '../../src/models/download.js';
import { DEFAULT_HUB_ENDPOINT, Hub, hubOptions } from '../../src/models/hub.js';
import { stagingDirOf } from '../../src/models/paths.js';
import { loadServedModel } from '../../src/models/registry.js';
import { repoFromFolder, startStandInHub, type HubRepo, type StandInHub } from '../fixtures/stand-in-hub.js';

const REPO = 'onnx-gateway-tests/tiny-embedder';
const REVISION = '0123456789abcdef0123456789abcdef01234567';
const GRAPH = 'onnx/model.onnx';

let root: string;
let repo: HubRepo;
let hub: StandInHub;
let manifest: Manifest;
let modelsDir: string;
let dir: string;
let target: PullTarget;
let graphSize: number;

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'onnx-gateway-download-'));
  repo = await repoFromFolder(join(inject('tinyModelsDir'), 'tiny-embedder'), REPO, REVISION);
  hub = await startStandInHub([repo]);
  manifest = { id: 'tiny-embedder', task: 'embedding', source: { kind: 'hub', repo: REPO, revision: REVISION } };
  graphSize = repo.files.get(GRAPH)!.length;
});
afterAll(async () => {
  await hub?.close();
  await rm(root, { recursive: true, force: true });
});

let run = 0;
beforeEach(() => {
  modelsDir = join(root, `models-${++run}`);
  target = pullTarget('tiny-embedder', new Catalogue([manifest]), modelsDir)!;
  dir = target.dir;
  for (const key of Object.keys(hub.faults)) delete hub.faults[key as keyof typeof hub.faults];
  hub.requests.length = 0;
});

const options = (extra: Partial<PullOptions> = {}): PullOptions => ({
  modelsDir,
  hub: new Hub({ endpoint: hub.url }),
  retryDelay: () => 0,
  ...extra,
});
const graphGets = () => hub.requests.filter((r) => r.server === 'cdn' && r.method === 'GET');
const expectSameFiles = async () => {
  for (const [path, bytes] of repo.files) expect((await readFile(join(dir, path))).equals(bytes), path).toBe(true);
};

describe('pullModel', () => {
  it('downloads every file, verifies it, and leaves a loadable model folder and nothing else', async () => {
    const report = await pullModel(target, options());
    expect(report.files).toHaveLength(repo.files.size);
    expect(report.files.every((f) => f.status === 'downloaded')).toBe(true);
    // LFS files by the sha256 of X-Linked-Etag, the others by their git blob sha1.
    expect(report.files.find((f) => f.path === GRAPH)).toMatchObject({ verifiedBy: 'sha256', bytes: graphSize });
    expect(report.files.find((f) => f.path === 'config.json')).toMatchObject({ verifiedBy: 'git-sha1' });
    // The graph is installed last: a folder with the graph has everything else.
    expect(report.files.at(-1)!.path).toBe(GRAPH);
    await expectSameFiles();
    expect(existsSync(stagingDirOf(dir))).toBe(false);
    // The graph came from the CDN, once, whole.
    expect(graphGets()).toMatchObject([{ status: 200, range: undefined, sent: graphSize }]);
    // One listing gave every file's size and checksum, at the manifest's commit: no HEAD per file.
    expect(hub.requests.filter((r) => r.server === 'hub' && r.path.startsWith('/api/'))).toMatchObject([
      { path: `/api/models/${REPO}/revision/${REVISION}?blobs=true`, status: 200 },
    ]);
    expect(hub.requests.filter((r) => r.method === 'HEAD')).toHaveLength(0);
    expect(
      hub.requests
        .filter((r) => r.server === 'hub' && r.path.includes('/resolve/'))
        .every((r) => r.path.includes(`/resolve/${REVISION}/`)),
    ).toBe(true);
    const model = await loadServedModel('tiny-embedder', modelsDir, new Catalogue([manifest]));
    expect(model).toMatchObject({ task: 'embedding', variant: 'fp32' });
  });

  it('keeps files that match the Hub and fetches only those missing or different', async () => {
    await pullModel(target, options());
    await rm(join(dir, 'tokenizer.json'));
    await writeFile(join(dir, 'config.json'), '{"edited": true}');
    hub.requests.length = 0;
    const report = await pullModel(target, options());
    const byPath = Object.fromEntries(report.files.map((f) => [f.path, f.status]));
    expect(byPath).toMatchObject({
      'tokenizer.json': 'downloaded',
      'config.json': 'downloaded',
      [GRAPH]: 'present',
      'modules.json': 'present',
    });
    expect(graphGets()).toHaveLength(0);
    await expectSameFiles();
  });

  it('resumes a transfer cut mid-file with a Range request, in the same pull', async () => {
    const cutAt = Math.floor(graphSize / 3);
    hub.faults.cut = { path: GRAPH, afterBytes: cutAt, times: 1 };
    const report = await pullModel(target, options({ retries: 2 }));
    expect(report.files.find((f) => f.path === GRAPH)).toMatchObject({ verifiedBy: 'sha256' });
    const [first, resumed] = graphGets();
    expect(graphGets()).toHaveLength(2);
    expect(first).toMatchObject({ range: undefined, sent: cutAt });
    // It resumes from the bytes it received (fetch may drop the last ones when the connection goes).
    const from = Number(/^bytes=(\d+)-$/.exec(resumed!.range ?? '')?.[1]);
    expect(from).toBeGreaterThan(0);
    expect(from).toBeLessThanOrEqual(cutAt);
    expect(resumed).toMatchObject({ status: 206, sent: graphSize - from });
    await expectSameFiles();
  });

  it('resumes a response that ends early without an error, checked against the size the Hub gave', async () => {
    hub.faults.endEarly = { path: GRAPH, afterBytes: 5000, times: 1 };
    await pullModel(target, options({ retries: 1 }));
    expect(graphGets()).toMatchObject([
      { range: undefined, sent: 5000 },
      { range: 'bytes=5000-', status: 206, sent: graphSize - 5000 },
    ]);
    await expectSameFiles();
  });

  it('keeps the partial file when a pull fails and resumes it in the next pull', async () => {
    const cutAt = Math.floor(graphSize / 2);
    hub.faults.cut = { path: GRAPH, afterBytes: cutAt, times: 1 };
    const failed = await pullModel(target, options({ retries: 0 })).catch((error: Error) => error);
    expect(failed).toBeInstanceOf(DownloadError);
    expect((failed as Error).message).toMatch(/onnx\/model\.onnx: the transfer broke off .* partial file is kept/);
    // Nothing reached the model folder; the partial file waits in the staging folder.
    expect(existsSync(dir)).toBe(false);
    const part = join(stagingDirOf(dir), `${GRAPH}.part`);
    const kept = (await stat(part)).size;
    expect(kept).toBeGreaterThan(0);
    expect(kept).toBeLessThanOrEqual(cutAt);

    hub.requests.length = 0;
    const report = await pullModel(target, options({ retries: 0 }));
    expect(report.files.filter((f) => f.status === 'downloaded')).toHaveLength(repo.files.size);
    expect(graphGets()).toMatchObject([{ range: `bytes=${kept}-`, status: 206, sent: graphSize - kept }]);
    await expectSameFiles();
    expect(existsSync(stagingDirOf(dir))).toBe(false);
  });

  it('starts the file over when the server ignores the range', async () => {
    hub.faults.cut = { path: GRAPH, afterBytes: 1000, times: 1 };
    await expect(pullModel(target, options({ retries: 0 }))).rejects.toThrow(/broke off/);
    hub.faults.ignoreRange = true;
    hub.requests.length = 0;
    await pullModel(target, options({ retries: 0 }));
    expect(graphGets()).toMatchObject([
      { range: expect.stringMatching(/^bytes=\d+-$/) as unknown, status: 200, sent: graphSize },
    ]);
    await expectSameFiles();
  });

  it('refuses an LFS file whose sha256 does not match, and installs nothing', async () => {
    hub.faults.corrupt = GRAPH;
    const failed = await pullModel(target, options()).catch((error: Error) => error);
    expect(failed).toBeInstanceOf(DownloadError);
    expect((failed as Error).message).toMatch(
      /onnx\/model\.onnx from onnx-gateway-tests\/tiny-embedder at 0123456789abcdef0123456789abcdef01234567 is corrupt: its sha256 is [0-9a-f]{64} where the Hub says [0-9a-f]{64}/,
    );
    expect(existsSync(dir)).toBe(false);
    // The corrupt bytes are gone, so the next pull can not resume from them.
    expect(existsSync(join(stagingDirOf(dir), `${GRAPH}.part`))).toBe(false);
    expect(existsSync(join(stagingDirOf(dir), GRAPH))).toBe(false);
  });

  it('refuses a regular file whose git blob sha1 does not match', async () => {
    hub.faults.corrupt = 'tokenizer.json';
    await expect(pullModel(target, options())).rejects.toThrow(/tokenizer\.json .* is corrupt: its git-sha1 is/);
    expect(existsSync(dir)).toBe(false);
  });

  it('needs a token for a gated repository, and keeps it from the CDN', async () => {
    hub.faults.token = 'hf_stand_in_token';
    const refused = await pullModel(target, options()).catch((error: Error) => error);
    expect(refused).toBeInstanceOf(DownloadError);
    expect((refused as Error).message).toMatch(
      /The Hub refused onnx-gateway-tests\/tiny-embedder at revision 0123456789abcdef0123456789abcdef01234567 \(401 GatedRepo\)\. .*set HF_TOKEN/,
    );
    expect(existsSync(dir)).toBe(false);

    const wrong = await pullModel(target, options({ hub: new Hub({ endpoint: hub.url, token: 'hf_other' }) })).catch(
      (error: Error) => error,
    );
    expect((wrong as Error).message).toMatch(/\(403 GatedRepo\)\. The token in HF_TOKEN has no access/);

    hub.requests.length = 0;
    await pullModel(target, options({ hub: new Hub({ endpoint: hub.url, token: 'hf_stand_in_token' }) }));
    await expectSameFiles();
    expect(
      hub.requests.filter((r) => r.server === 'hub').every((r) => r.authorization === 'Bearer hf_stand_in_token'),
    ).toBe(true);
    expect(graphGets().length).toBeGreaterThan(0);
    expect(hub.requests.filter((r) => r.server === 'cdn').every((r) => r.authorization === undefined)).toBe(true);
  });

  it('says when the revision or the repository does not exist', async () => {
    await expect(pullModel({ ...target, revision: 'f'.repeat(40) }, options())).rejects.toThrow(
      /The Hub has no onnx-gateway-tests\/tiny-embedder at revision f{40} \(404: the revision does not exist\)/,
    );
    const elsewhere = { ...target, repo: 'onnx-gateway-tests/no-such-model' };
    // Anonymous clients get a 401 for a repository they can not see, existing or not.
    await expect(pullModel(elsewhere, options())).rejects.toThrow(
      /The Hub has no repository onnx-gateway-tests\/no-such-model \(401 RepoNotFound\)\. Check the id .* if it is private, set HF_TOKEN/,
    );
    await expect(pullModel(elsewhere, options({ hub: new Hub({ endpoint: hub.url, token: 'hf_x' }) }))).rejects.toThrow(
      /\(404 RepoNotFound\)\. Check the id/,
    );
    expect(existsSync(dir)).toBe(false);
  });

  it('asks the resolve answer for sizes and checksums when a mirror lists files without them', async () => {
    hub.faults.noBlobs = true;
    const report = await pullModel(target, options());
    expect(report.files.find((f) => f.path === GRAPH)).toMatchObject({ verifiedBy: 'sha256' });
    expect(report.files.find((f) => f.path === 'config.json')).toMatchObject({ verifiedBy: 'git-sha1' });
    expect(hub.requests.filter((r) => r.method === 'HEAD')).toHaveLength(repo.files.size);
    await expectSameFiles();
  });

  it('says when the Hub can not be reached', async () => {
    await expect(
      pullModel(target, options({ hub: new Hub({ endpoint: 'http://127.0.0.1:9' }), retries: 0 })),
    ).rejects.toThrow(/Can not reach http:\/\/127\.0\.0\.1:9/);
  });

  it('fetches no file that would land outside the model folder', async () => {
    const modules = JSON.parse(repo.files.get('modules.json')!.toString()) as Array<{ path: string }>;
    modules.push({ path: '../escaped' });
    const escaping = {
      ...repo,
      files: new Map(repo.files)
        .set('modules.json', Buffer.from(JSON.stringify(modules)))
        .set('../escaped/config.json', Buffer.from('{}')),
    };
    const other = await startStandInHub([escaping]);
    try {
      const report = await pullModel(target, options({ hub: new Hub({ endpoint: other.url }) }));
      expect(report.files.map((f) => f.path)).not.toContain('../escaped/config.json');
      expect(other.requests.some((r) => r.path.includes('escaped'))).toBe(false);
      expect(existsSync(join(dir, '..', 'escaped'))).toBe(false);
    } finally {
      await other.close();
    }
  });
});

describe('downloadMissing', () => {
  it('downloads configured hub models that lack files, and touches nothing when they are present', async () => {
    const catalogue = new Catalogue([manifest]);
    const announced: string[] = [];
    const first = await downloadMissing(['tiny-embedder:int8', 'tiny-embedder', 'not-in-catalogue'], catalogue, {
      ...options(),
      onModel: (m) => announced.push(m.id),
    });
    expect(first.map((r) => r.id)).toEqual(['tiny-embedder']);
    expect(announced).toEqual(['tiny-embedder']);
    await expectSameFiles();
    hub.requests.length = 0;
    expect(await downloadMissing(['tiny-embedder'], catalogue, options())).toEqual([]);
    expect(hub.requests).toHaveLength(0);
  });
});

describe('hubOptions', () => {
  it('takes the setting over HF_ENDPOINT over the public Hub, and the token from HF_TOKEN', () => {
    expect(hubOptions(null, {})).toEqual({ endpoint: DEFAULT_HUB_ENDPOINT, token: undefined });
    expect(hubOptions(null, { HF_ENDPOINT: 'https://mirror.example/', HF_TOKEN: 'hf_x' })).toEqual({
      endpoint: 'https://mirror.example',
      token: 'hf_x',
    });
    expect(hubOptions('https://setting.example', { HF_ENDPOINT: 'https://mirror.example' }).endpoint).toBe(
      'https://setting.example',
    );
  });
});
