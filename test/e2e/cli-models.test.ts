/**
 * `onnx-gateway models pull | list | quantize` and the download at start, as a user runs them:
 * the built command against a stand-in Hub on loopback, with a manifest of the tiny embedder in a
 * manifests dir of its own.
 */
import { execFile, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { copyFile, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { promisify } from 'node:util';
import { afterAll, beforeAll, beforeEach, describe, expect, inject, it } from 'vitest';
import type { Server } from '../../src/main.js';
import { repoFromFolder, startStandInHub, type StandInHub } from '../fixtures/stand-in-hub.js';
import { floatVectors, type EmbeddingList, type ModelList } from '../helpers/bodies.js';
import { auth, startServer } from '../helpers/server.js';

const execFileAsync = promisify(execFile);

const REPO = 'onnx-gateway-tests/tiny-embedder';
const REVISION = '0123456789abcdef0123456789abcdef01234567';

let root: string;
let hub: StandInHub;
let manifestsDir: string;
let modelsDir: string;

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'onnx-gateway-cli-models-'));
  const repo = await repoFromFolder(join(inject('tinyModelsDir'), 'tiny-embedder'), REPO, REVISION);
  hub = await startStandInHub([repo]);
  manifestsDir = join(root, 'manifests');
  await mkdir(manifestsDir);
  const manifest = {
    id: 'tiny-embedder',
    task: 'embedding',
    description: "The test suite's tiny BERT embedder, served by a stand-in Hub.",
    source: { kind: 'hub', repo: REPO, revision: REVISION, files: [...repo.files.keys()].sort() },
  };
  await writeFile(join(manifestsDir, 'tiny-embedder.json'), JSON.stringify(manifest, null, 2));
});
afterAll(async () => {
  await hub?.close();
  await rm(root, { recursive: true, force: true });
});

/** The pulled model's folder: its repository's, `<models dir>/<owner>/<name>`. */
const modelFolder = () => join(modelsDir, 'onnx-gateway-tests', 'tiny-embedder');

let run = 0;
beforeEach(() => {
  modelsDir = join(root, `models-${++run}`);
  for (const key of Object.keys(hub.faults)) delete hub.faults[key as keyof typeof hub.faults];
  hub.requests.length = 0;
});

/** The command's environment: this test's dirs and Hub, nothing of the caller's Hugging Face setup. */
function environment(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    HF_ENDPOINT: hub.url,
    ONNX_GATEWAY_MODELS_DIR: modelsDir,
    ONNX_GATEWAY_MANIFESTS_DIR: manifestsDir,
    ...extra,
  };
  for (const name of ['HF_TOKEN', 'ONNX_GATEWAY_HF_ENDPOINT', 'ONNX_GATEWAY_MODELS', 'ONNX_GATEWAY_DOWNLOAD'])
    if (!(name in extra)) delete env[name];
  return env;
}

interface Outcome {
  code: number;
  stdout: string;
  stderr: string;
}

async function cli(args: string[], extra: NodeJS.ProcessEnv = {}): Promise<Outcome> {
  try {
    const { stdout, stderr } = await execFileAsync('node', ['dist/cli/index.js', ...args], { env: environment(extra) });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failure = error as { code: number; stdout: string; stderr: string };
    return { code: failure.code, stdout: failure.stdout, stderr: failure.stderr };
  }
}

describe('onnx-gateway models pull', () => {
  it('downloads the model with plain progress lines when stderr is not a terminal', async () => {
    const pulled = await cli(['models', 'pull', 'tiny-embedder']);
    expect(pulled).toMatchObject({ code: 0 });
    expect(pulled.stdout).toMatch(
      /^tiny-embedder: downloaded 7 of 7 files \(\d+\.\d kB\), verified, commit 0123456789abcdef0123456789abcdef01234567 \(fp32: onnx\/model\.onnx\), in .*models-\d+\/onnx-gateway-tests\/tiny-embedder$/m,
    );
    expect(pulled.stderr).toMatch(
      /^tiny-embedder \(onnx-gateway-tests\/tiny-embedder\) from http:\/\/127\.0\.0\.1:\d+ into .*\/onnx-gateway-tests\/tiny-embedder$/m,
    );
    expect(pulled.stderr).toMatch(
      /^onnx-gateway-tests\/tiny-embedder: commit 0123456789abcdef0123456789abcdef01234567, as the catalogue pins$/m,
    );
    expect(pulled.stderr).toMatch(/^fp32: onnx\/model\.onnx$/m);
    expect(pulled.stderr).toMatch(/^onnx\/model\.onnx: downloading 121\.5 kB$/m);
    expect(pulled.stderr).toMatch(/^onnx\/model\.onnx: downloaded, 121\.5 kB, verified by sha256$/m);
    expect(pulled.stderr).toMatch(/^config\.json: downloaded, .* verified by git-sha1$/m);
    // No terminal control sequences in a log.
    expect(pulled.stderr).not.toContain('\u001b');

    const again = await cli(['models', 'pull', 'tiny-embedder']);
    expect(again.stdout).toMatch(/^tiny-embedder: all 7 files present, verified/m);
    expect(again.stderr).toMatch(
      /^onnx-gateway-tests\/tiny-embedder: commit 0123456789abcdef0123456789abcdef01234567, as locked in onnx-gateway\.lock\.json \(pulled from 0123456789abcdef0123456789abcdef01234567 on \d{4}-\d\d-\d\d\); --update or @<revision> moves it\.$/m,
    );
  });

  it('asks for HF_TOKEN when the repository is gated, and pulls with it', async () => {
    hub.faults.token = 'hf_stand_in_token';
    const refused = await cli(['models', 'pull', 'tiny-embedder']);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(
      /onnx-gateway: The Hub refused onnx-gateway-tests\/tiny-embedder at revision \w+ \(401 GatedRepo\)\. .*set HF_TOKEN to an access token/,
    );
    expect(existsSync(join(modelFolder()))).toBe(false);

    const pulled = await cli(['models', 'pull', 'tiny-embedder'], { HF_TOKEN: 'hf_stand_in_token' });
    expect(pulled.code).toBe(0);
    expect(existsSync(join(modelFolder(), 'onnx', 'model.onnx'))).toBe(true);
  });

  it('refuses ids that are neither in the catalogue nor repository ids, and variants the repository lacks', async () => {
    // Four refusals that download nothing, run side by side.
    const [unknown, badVariant, variant, generated] = await Promise.all([
      cli(['models', 'pull', 'no-such-model']),
      cli(['models', 'pull', 'tiny-embedder:int4']),
      cli(['models', 'pull', 'tiny-embedder:int8']),
      cli(['models', 'pull', 'synthetic-all-MiniLM-L6-v2']),
    ]);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(
      /No manifest names "no-such-model" and it is not a Hub repository id \(owner\/name, as in BAAI\/bge-small-en-v1\.5\)\. Catalogue ids: .*all-MiniLM-L6-v2.*tiny-embedder/,
    );
    expect(badVariant.code).toBe(2);
    expect(badVariant.stderr).toMatch(/"int4" is not an ONNX variant: use one of fp32, fp16, int8, O1, O2, O3, O4/);
    expect(variant.code).toBe(1);
    expect(variant.stderr).toMatch(
      /has no int8 graph \(looked for onnx\/model_int8\.onnx, .*\)\. Its ONNX variants: fp32 \(onnx\/model\.onnx\)\..*onnx-gateway models quantize tiny-embedder/,
    );
    expect(existsSync(modelFolder())).toBe(false);
    expect(generated.code).toBe(2);
    expect(generated.stderr).toMatch(/is not on the Hub: it is generated locally with: python3/);
  });
});

describe('onnx-gateway models list and quantize', () => {
  it('lists the catalogue against the models dir, quantizes, and the int8 variant serves vectors close to fp32', async () => {
    const before = await cli(['models', 'list']);
    expect(before.code).toBe(0);
    expect(before.stdout).toMatch(/^ID\s+TASK\s+SOURCE\s+STATE\s+VARIANTS\s+SIZE$/m);
    expect(before.stdout).toMatch(
      /^tiny-embedder\s+embedding\s+hub:onnx-gateway-tests\/tiny-embedder@0123456\s+missing\s+-\s+-$/m,
    );
    expect(before.stdout).toMatch(
      /^all-MiniLM-L6-v2\s+embedding\s+hub:sentence-transformers\/all-MiniLM-L6-v2@c9745ed\s+missing/m,
    );

    expect((await cli(['models', 'pull', 'tiny-embedder'])).code).toBe(0);
    // A folder no manifest names is listed too, with its task from config.json.
    await mkdir(join(modelsDir, 'my-reranker'));
    await writeFile(
      join(modelsDir, 'my-reranker', 'config.json'),
      JSON.stringify({ architectures: ['BertForSequenceClassification'] }),
    );
    const pulled = await cli(['models', 'list']);
    expect(pulled.stdout).toMatch(/^tiny-embedder\s+embedding\s+hub:\S+\s+present\s+fp32\s+\d+\.\d kB$/m);
    expect(pulled.stdout).toMatch(/^my-reranker\s+rerank\s+local\s+incomplete\s+-\s+\d+ B$/m);

    const quantized = await cli(['models', 'quantize', 'tiny-embedder']);
    expect(quantized.code).toBe(0);
    expect(quantized.stdout).toMatch(/^\d+ MatMul\(s\) -> DynamicQuantizeMatMul \(int8 weights, per-column scales\)/m);
    // By default, GPTQ calibrated on the shipped text.
    expect(quantized.stdout).toMatch(
      /^rounding: GPTQ, calibrated on \d+ inputs \(\d+ tokens\) from \S*models\/calibration\/english\.txt in [\d.]+ s$/m,
    );
    expect(quantized.stdout).toMatch(/wrote .*tiny-embedder\/onnx\/model_int8\.onnx/);
    expect(quantized.stdout).toMatch(/serve it as "tiny-embedder:int8"/);

    const listed = JSON.parse((await cli(['models', 'list', '--json'])).stdout) as Array<{
      id: string;
      variants: string[];
      state: string;
      bytes: number;
    }>;
    expect(listed.find((m) => m.id === 'tiny-embedder')).toMatchObject({
      state: 'present',
      variants: ['fp32', 'int8'],
    });

    const server: Server = await startServer({
      modelsDir,
      manifestsDir,
      models: ['tiny-embedder', 'tiny-embedder:int8'],
    });
    try {
      const models = (await server.app.inject({ method: 'GET', url: '/v1/models', headers: auth })).json<ModelList>();
      // Served by its repo id; the manifest's short id is an alias requests may use.
      expect(models.data.find((m) => m.id === `${REPO}:int8`)).toMatchObject({ variant: 'int8', task: 'embedding' });
      const texts = ['the quick brown fox', 'a cat sat on the mat', 'hello world', 'onnx runtime on a cpu'];
      const embed = async (model: string) =>
        floatVectors(
          (
            await server.app.inject({
              method: 'POST',
              url: '/v1/embeddings',
              headers: auth,
              payload: { model, input: texts },
            })
          ).json<EmbeddingList>(),
        );
      const [fp32, int8] = [await embed('tiny-embedder'), await embed('tiny-embedder:int8')];
      for (let i = 0; i < texts.length; i++) {
        const a = fp32[i]!;
        const b = int8[i]!;
        const cosine = a.reduce((sum, x, k) => sum + x * b[k]!, 0) / Math.hypot(...a) / Math.hypot(...b);
        expect(cosine, texts[i]).toBeGreaterThanOrEqual(0.99);
        expect(cosine, `${texts[i]}: int8 is not the fp32 graph`).toBeLessThan(1 - 1e-7);
      }
    } finally {
      await server.close();
    }
  });

  it('refuses clearly when there is nothing to quantize or the graph is quantized already', async () => {
    const [missing, pulled] = await Promise.all([
      cli(['models', 'quantize', 'no-such-model']),
      cli(['models', 'pull', 'tiny-embedder']),
    ]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/onnx-gateway: "no-such-model" is neither a model in .* nor a file or folder/);

    expect(pulled.code).toBe(0);
    expect((await cli(['models', 'quantize', 'tiny-embedder'])).code).toBe(0);
    const twice = await cli(['models', 'quantize', join(modelFolder(), 'onnx', 'model_int8.onnx')]);
    expect(twice.code).toBe(1);
    expect(twice.stderr).toMatch(/Can not quantize .*model_int8\.onnx: the graph is already quantized/);
    expect(existsSync(join(modelFolder(), 'onnx', 'model_int8_int8.onnx'))).toBe(false);

    // Calibration: another text, none, or a file that is not there.
    const own = join(modelsDir, 'calibration.txt');
    await writeFile(own, 'what is the capital of france\nparis is the capital of france and its first city\n');
    const calibrated = await cli(['models', 'quantize', 'tiny-embedder', '--calibration', own]);
    expect(calibrated.code).toBe(0);
    expect(calibrated.stdout).toContain(`rounding: GPTQ, calibrated on 3 inputs`);
    expect(calibrated.stdout).toContain(`from ${own} in`);
    const plain = await cli(['models', 'quantize', 'tiny-embedder', '--no-calibration']);
    expect(plain.code).toBe(0);
    expect(plain.stdout).toMatch(/^rounding: to nearest \(calibration turned off\)$/m);
    // A bare .onnx file has no tokenizer to calibrate with: to nearest, unless a text was asked for.
    const bare = join(modelsDir, 'bare.onnx');
    await copyFile(join(modelFolder(), 'onnx', 'model.onnx'), bare);
    await mkdir(join(modelsDir, 'empty'));
    // These write nothing but bare_int8.onnx, which none of the others reads: run side by side.
    const [absent, bareRun, bareAsked, empty] = await Promise.all([
      cli(['models', 'quantize', 'tiny-embedder', '--calibration', join(modelsDir, 'nothing.txt')]),
      cli(['models', 'quantize', bare]),
      cli(['models', 'quantize', bare, '--calibration', own]),
      cli(['models', 'quantize', 'empty']),
    ]);
    expect(absent.code).toBe(1);
    expect(absent.stderr).toMatch(/The calibration file .*nothing\.txt does not exist/);
    expect(bareRun.code).toBe(0);
    expect(bareRun.stdout).toMatch(/^rounding: to nearest \(no tokenizer\.json beside the graph/m);
    expect(bareAsked.code).toBe(1);
    expect(bareAsked.stderr).toMatch(/Can not calibrate .*bare\.onnx: no tokenizer\.json beside it/);

    expect(empty.code).toBe(1);
    expect(empty.stderr).toMatch(/empty has no fp32 graph \(onnx\/model\.onnx or model\.onnx\) to quantize/);
  });
});

describe('onnx-gateway serve with a missing catalogue model', () => {
  /** Starts `serve` and resolves with its address once it listens, or with its exit when it stops first. */
  function serve(extra: NodeJS.ProcessEnv) {
    const child = spawn('node', ['dist/cli/index.js', 'serve', '--port', '0'], {
      env: environment({ ONNX_GATEWAY_MODELS: 'tiny-embedder', ONNX_GATEWAY_WORKERS: '1', ...extra }),
    });
    let stderr = '';
    child.stderr.on('data', (chunk) => (stderr += chunk));
    const exited = new Promise<number>((resolve) => child.on('exit', (code) => resolve(code ?? -1)));
    const listening = new Promise<string>((resolve) => {
      createInterface({ input: child.stdout }).on('line', (line) => {
        const address = /Server listening at (http:\/\/127\.0\.0\.1:\d+)/.exec(line)?.[1];
        if (address) resolve(address);
      });
    });
    return { child, exited, listening, stderr: () => stderr };
  }

  it('downloads it before loading, then serves it', async () => {
    const server = serve({});
    try {
      const address = await Promise.race([
        server.listening,
        server.exited.then((code) => Promise.reject(new Error(`serve exited ${code}: ${server.stderr()}`))),
      ]);
      expect(server.stderr()).toMatch(
        /tiny-embedder \(onnx-gateway-tests\/tiny-embedder\): fp32 missing, downloading into .*onnx-gateway-tests\/tiny-embedder/,
      );
      expect(server.stderr()).toMatch(/onnx\/model\.onnx: downloaded, .* verified by sha256/);
      const models = (await (await fetch(`${address}/v1/models`)).json()) as { data: Array<{ id: string }> };
      expect(models.data.map((m) => m.id)).toEqual([REPO]);
    } finally {
      server.child.kill('SIGTERM');
      await server.exited;
    }
  });

  it('with ONNX_GATEWAY_DOWNLOAD=false, refuses to start and says how to get it', async () => {
    const server = serve({ ONNX_GATEWAY_DOWNLOAD: 'false' });
    expect(await server.exited).toBe(1);
    expect(server.stderr()).toMatch(
      /onnx-gateway can not start:\nModel "tiny-embedder" is not usable: .*tiny-embedder does not exist\. Download it with "onnx-gateway models pull tiny-embedder"/,
    );
    expect(hub.requests).toHaveLength(0);
  });

  it('downloads the fp32 files for an int8 id, and says how to make the int8 graph', async () => {
    const server = serve({ ONNX_GATEWAY_MODELS: 'tiny-embedder:int8' });
    expect(await server.exited).toBe(1);
    expect(existsSync(join(modelFolder(), 'onnx', 'model.onnx'))).toBe(true);
    expect(server.stderr()).toMatch(
      /lacks the int8 graph \(onnx\/model_int8\.onnx or .*\)\. Make it with "onnx-gateway models quantize tiny-embedder"/,
    );
  });

  it('says why when the download fails, and starts nothing', async () => {
    hub.faults.corrupt = 'onnx/model.onnx';
    const server = serve({});
    expect(await server.exited).toBe(1);
    expect(server.stderr()).toMatch(
      /onnx-gateway can not start:\nonnx\/model\.onnx from onnx-gateway-tests\/tiny-embedder at \w+ is corrupt/,
    );
    expect(existsSync(join(modelFolder()))).toBe(false);
  });
});
