/**
 * Inputs past the window on the synthetic all-MiniLM-L6-v2, against golden vectors from an
 * independent float64 numpy forward pass (test/fixtures/long_inputs_golden.py, generated here
 * into .data): a text of about 2,000 tokens embedded in windows (long_inputs chunk) on every
 * embedding route, truncated and refused; three texts late-chunked. Tolerance 1e-4.
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { Server } from '../../src/main.js';
import { auth, sharedModelsDir, sharedModelsHint, startServer } from '../helpers/server.js';
import { missing } from '../helpers/resources.js';

const PYTHON = '/usr/bin/python3';
const script = fileURLToPath(new URL('../fixtures/long_inputs_golden.py', import.meta.url));
const modelsDir = sharedModelsDir();
const model = 'synthetic-all-MiniLM-L6-v2';
const tolerance = 1e-4;

interface Golden {
  chunk: {
    text: string;
    windows: number[][];
    content_tokens: number[];
    prompt_tokens: number;
    normalized: number[];
    normalized_64: number[];
    truncated: number[];
  };
  late_chunking: { texts: string[]; ids: number[]; normalized: number[][] };
}

/** The golden file, generated once per version of its script into .data. */
function loadGolden(): Golden {
  const digest = createHash('sha256').update(readFileSync(script)).digest('hex').slice(0, 12);
  const dir = resolve('.data', `long-inputs-golden-${digest}`);
  const file = join(dir, 'long-inputs.json');
  if (!existsSync(file)) {
    const scratch = `${dir}.tmp-${process.pid}`;
    mkdirSync(scratch, { recursive: true });
    const run = spawnSync(PYTHON, [script, '--shared', resolve('../shared'), '--out', scratch], { encoding: 'utf8' });
    if (run.status !== 0) throw new Error(`long_inputs_golden.py failed: ${run.stderr || String(run.error)}`);
    renameSync(scratch, dir);
  }
  return JSON.parse(readFileSync(file, 'utf8')) as Golden;
}

function worstDifference(actual: ArrayLike<number>, expected: number[]): number {
  expect(actual.length).toBe(expected.length);
  let worst = 0;
  for (let i = 0; i < expected.length; i++) worst = Math.max(worst, Math.abs(actual[i]! - expected[i]!));
  return worst;
}

interface ErrorBody {
  error: { code: string; message: string; param?: string };
}

describe.skipIf(missing(modelsDir !== undefined, sharedModelsHint))(
  `inputs past the window (${modelsDir ? 'synthetic MiniLM' : sharedModelsHint})`,
  () => {
    let golden: Golden;
    let server: Server;
    let chunking: Server;
    let refusing: Server;
    beforeAll(async () => {
      golden = loadGolden();
      [server, chunking, refusing] = await Promise.all([
        startServer({ modelsDir, models: [model], cacheMaxMb: 64 }),
        startServer({ modelsDir, models: [model], longInputs: 'chunk', maxInputTokens: 4096, workers: 1 }),
        startServer({ modelsDir, models: [model], truncate: false, workers: 1 }),
      ]);
    }, 600_000);
    afterAll(async () => {
      await Promise.all([server?.close(), chunking?.close(), refusing?.close()]);
    });

    const post = async (target: Server, url: string, payload: object) =>
      target.app.inject({ method: 'POST', url, headers: auth, payload });
    const embedding = async (target: Server, payload: object) => {
      const res = await post(target, '/v1/embeddings', { model, ...payload });
      expect(res.statusCode, res.body).toBe(200);
      return res.json<{ data: { embedding: number[] }[]; usage: { prompt_tokens: number } }>();
    };

    it('splits the golden text into the golden windows', () => {
      const served = server.registry.list().find((m) => m.id === model)!;
      const content = Array.from(served.tokenizer.encode(golden.chunk.text));
      expect(content).toEqual(golden.chunk.windows.flatMap((window) => window.slice(1, -1)));
      expect(golden.chunk.content_tokens.length).toBeGreaterThan(3);
    });

    it('embeds a 2,000-token input in windows, averaged by their tokens, as the numpy golden', async () => {
      const { data, usage } = await embedding(server, { input: golden.chunk.text, long_inputs: 'chunk' });
      expect(worstDifference(data[0]!.embedding, golden.chunk.normalized)).toBeLessThanOrEqual(tolerance);
      // Every token fed: each window's content and its own [CLS] and [SEP].
      expect(usage.prompt_tokens).toBe(golden.chunk.prompt_tokens);
      const cut = await embedding(server, { input: [golden.chunk.text], long_inputs: 'chunk', dimensions: 64 });
      expect(worstDifference(cut.data[0]!.embedding, golden.chunk.normalized_64)).toBeLessThanOrEqual(tolerance);
    });

    it('batches the windows with other inputs of the request and keeps their order', async () => {
      const { data, usage } = await embedding(server, {
        input: ['hello world', golden.chunk.text, 'hello world'],
        long_inputs: 'chunk',
      });
      expect(data).toHaveLength(3);
      expect(worstDifference(data[1]!.embedding, golden.chunk.normalized)).toBeLessThanOrEqual(tolerance);
      expect(data[0]!.embedding).toEqual(data[2]!.embedding);
      const alone = await embedding(server, { input: 'hello world' });
      expect(worstDifference(data[0]!.embedding, alone.data[0]!.embedding)).toBeLessThanOrEqual(1e-6);
      expect(usage.prompt_tokens).toBe(golden.chunk.prompt_tokens + 2 * alone.usage.prompt_tokens);
    });

    it('caches each window by its own tokens', async () => {
      // A text no other test sends: its windows are all new.
      const text = `A preface for the cache. ${golden.chunk.text}`;
      const served = server.registry.list().find((m) => m.id === model)!;
      const windows = Math.ceil(served.tokenizer.encode(text).length / 510);
      const first = await post(server, '/v1/embeddings', { model, input: text, long_inputs: 'chunk' });
      expect(first.headers['x-cache-hits']).toBe('0');
      const again = await post(server, '/v1/embeddings', { model, input: text, long_inputs: 'chunk' });
      // The hits count windows, each cached by its own token ids.
      expect(Number(again.headers['x-cache-hits'])).toBe(windows);
      expect(again.json<{ data: { embedding: number[] }[] }>().data).toEqual(
        first.json<{ data: { embedding: number[] }[] }>().data,
      );
    });

    it('chunks on the engine path, TEI /embed, Cohere /v2/embed and Ollama /api/embed', async () => {
      const engine = await post(server, `/v1/engines/${model}/embeddings`, {
        input: golden.chunk.text,
        long_inputs: 'chunk',
      });
      expect(engine.statusCode, engine.body).toBe(200);
      const tei = await post(server, '/embed', { inputs: golden.chunk.text, long_inputs: 'chunk' });
      expect(tei.statusCode, tei.body).toBe(200);
      const cohere = await post(server, '/v2/embed', { model, texts: [golden.chunk.text], long_inputs: 'chunk' });
      expect(cohere.statusCode, cohere.body).toBe(200);
      const ollama = await post(server, '/api/embed', { model, input: golden.chunk.text, long_inputs: 'chunk' });
      expect(ollama.statusCode, ollama.body).toBe(200);
      const vectors = [
        engine.json<{ data: { embedding: number[] }[] }>().data[0]!.embedding,
        tei.json<number[][]>()[0]!,
        cohere.json<{ embeddings: { float: number[][] } }>().embeddings.float[0]!,
        ollama.json<{ embeddings: number[][] }>().embeddings[0]!,
      ];
      for (const vector of vectors)
        expect(worstDifference(vector, golden.chunk.normalized)).toBeLessThanOrEqual(tolerance);
      expect(cohere.json<{ meta: { billed_units: { input_tokens: number } } }>().meta.billed_units.input_tokens).toBe(
        golden.chunk.prompt_tokens,
      );
      expect(ollama.json<{ prompt_eval_count: number }>().prompt_eval_count).toBe(golden.chunk.prompt_tokens);
    });

    it('truncates by default, and refuses on request naming the window and the length', async () => {
      const cut = await embedding(server, { input: golden.chunk.text });
      expect(worstDifference(cut.data[0]!.embedding, golden.chunk.truncated)).toBeLessThanOrEqual(tolerance);
      expect(cut.usage.prompt_tokens).toBe(512);
      const total = golden.chunk.content_tokens.reduce((a, b) => a + b, 0) + 2;
      const refused = await post(server, '/v1/embeddings', { model, input: golden.chunk.text, long_inputs: 'refuse' });
      expect(refused.statusCode).toBe(400);
      const { error } = refused.json<ErrorBody>();
      expect(error.code).toBe('input_too_long');
      expect(error.message).toContain(`${total} tokens`);
      expect(error.message).toContain('512');
      // TEI's truncate false and Cohere's NONE are refuse, as their specifications say.
      const tei = await post(server, '/embed', { inputs: golden.chunk.text, truncate: false });
      expect(tei.statusCode).toBe(422);
      expect(tei.json<{ error_type: string }>().error_type).toBe('Validation');
      const cohere = await post(server, '/v2/embed', { model, texts: [golden.chunk.text], truncate: 'NONE' });
      expect(cohere.statusCode).toBe(400);
    });

    it('follows the server setting: longInputs chunk, bounded by maxInputTokens; truncate false refuses', async () => {
      const { data } = await embedding(chunking, { input: golden.chunk.text });
      expect(worstDifference(data[0]!.embedding, golden.chunk.normalized)).toBeLessThanOrEqual(tolerance);
      // The routes whose truncate field is absent follow the setting too.
      const cohere = await post(chunking, '/v2/embed', { model, texts: [golden.chunk.text] });
      const ollama = await post(chunking, '/api/embed', { model, input: golden.chunk.text });
      for (const vector of [
        cohere.json<{ embeddings: { float: number[][] } }>().embeddings.float[0]!,
        ollama.json<{ embeddings: number[][] }>().embeddings[0]!,
      ])
        expect(worstDifference(vector, golden.chunk.normalized)).toBeLessThanOrEqual(tolerance);
      // A request may still ask for truncation.
      const cut = await embedding(chunking, { input: golden.chunk.text, long_inputs: 'truncate' });
      expect(worstDifference(cut.data[0]!.embedding, golden.chunk.truncated)).toBeLessThanOrEqual(tolerance);
      const tooLong = await post(chunking, '/v1/embeddings', {
        model,
        input: `${golden.chunk.text} ${golden.chunk.text} ${golden.chunk.text}`,
      });
      expect(tooLong.statusCode).toBe(400);
      expect(tooLong.json<ErrorBody>().error).toMatchObject({ code: 'input_too_long', param: 'input[0]' });
      expect(tooLong.json<ErrorBody>().error.message).toContain('at most 4096');

      const refused = await post(refusing, '/v1/embeddings', { model, input: golden.chunk.text });
      expect(refused.json<ErrorBody>().error.code).toBe('input_too_long');
      const chunked = await embedding(refusing, { input: golden.chunk.text, long_inputs: 'chunk' });
      expect(worstDifference(chunked.data[0]!.embedding, golden.chunk.normalized)).toBeLessThanOrEqual(tolerance);
    });

    it('late-chunks three texts as one sequence, as the numpy golden', async () => {
      const late = golden.late_chunking;
      const { data, usage } = await embedding(server, { input: late.texts, late_chunking: true });
      expect(data).toHaveLength(3);
      data.forEach(({ embedding: vector }, i) =>
        expect(worstDifference(vector, late.normalized[i]!)).toBeLessThanOrEqual(tolerance),
      );
      expect(usage.prompt_tokens).toBe(late.ids.length);
      // Not what each text gives alone: the others' tokens are in its context.
      const alone = await embedding(server, { input: late.texts });
      expect(worstDifference(alone.data[0]!.embedding, late.normalized[0]!)).toBeGreaterThan(tolerance);
      // The same through TEI's /embed.
      const tei = await post(server, '/embed', { inputs: late.texts, late_chunking: true });
      expect(worstDifference(tei.json<number[][]>()[2]!, late.normalized[2]!)).toBeLessThanOrEqual(tolerance);
    });

    it('refuses late chunking over the window', async () => {
      const res = await post(server, '/v1/embeddings', {
        model,
        input: [golden.chunk.text, 'a short one'],
        late_chunking: true,
      });
      expect(res.statusCode).toBe(400);
      const { error } = res.json<ErrorBody>();
      expect(error.code).toBe('input_too_long');
      expect(error.message).toContain('at most 512');
    });
  },
);

const standins = inject('standinsDir');
const E5 = 'intfloat/multilingual-e5-small';
const BGE = 'BAAI/bge-small-en-v1.5';
const CLIP = 'Xenova/clip-vit-base-patch32';
const SPLADE = 'prithivida/Splade_PP_en_v1';
const families = [E5, BGE, CLIP, SPLADE];

describe.skipIf(
  missing(
    standins !== '' && families.every((repo) => existsSync(join(standins, repo, 'golden.json'))),
    'needs the stand-ins (python3 with numpy, sentencepiece, regex and Pillow)',
  ),
)('inputs past the window on other families (stand-ins)', () => {
  let server: Server;
  beforeAll(async () => {
    server = await startServer({ modelsDir: standins, models: families, workers: 1 });
  });
  afterAll(async () => {
    await server?.close();
  });
  const post = (payload: object) =>
    server.app.inject({ method: 'POST', url: '/v1/embeddings', headers: auth, payload });
  const long = `Chapter one. ${'The committee met again to discuss the budget, the roads and the new library. '.repeat(60)}`;

  it("puts a SentencePiece model's prompt before every window, and late-chunks after it", async () => {
    const served = server.registry.list().find((m) => m.id === E5)!;
    const prompt = served.tokenizer.encode('query: ');
    const joined = served.tokenizer.encode(`query: ${long}`);
    // The prompt's tokens as the text's tokenisation starts with them.
    let shared = 0;
    while (shared < prompt.length && prompt[shared] === joined[shared]) shared++;
    const room = served.maxTokens - served.tokenizer.singleSpecials - shared;
    const windows = Math.ceil((joined.length - shared) / room);
    expect(windows).toBeGreaterThan(1);
    const res = await post({ model: E5, input: long, input_type: 'query', long_inputs: 'chunk' });
    expect(res.statusCode, res.body).toBe(200);
    const { usage } = res.json<{ usage: { prompt_tokens: number } }>();
    expect(usage.prompt_tokens).toBe(
      joined.length + (windows - 1) * shared + windows * served.tokenizer.singleSpecials,
    );

    const late = await post({
      model: E5,
      input: ['first part.', 'second part.'],
      input_type: 'query',
      late_chunking: true,
    });
    expect(late.statusCode, late.body).toBe(200);
    expect(late.json<{ usage: { prompt_tokens: number } }>().usage.prompt_tokens).toBe(
      prompt.length +
        served.tokenizer.encode('first part.').length +
        served.tokenizer.encode('second part.').length +
        served.tokenizer.singleSpecials,
    );
  });

  it("chunks a CLS-pooling model and an image-text model's texts; late chunking refuses them, naming why", async () => {
    for (const model of [BGE, CLIP]) {
      const res = await post({ model, input: long, long_inputs: 'chunk' });
      expect(res.statusCode, `${model}: ${res.body}`).toBe(200);
    }
    const cls = await post({ model: BGE, input: ['a', 'b'], late_chunking: true });
    expect(cls.statusCode).toBe(400);
    expect(cls.json<ErrorBody>().error.message).toContain('pools by cls');
    const clip = await post({ model: CLIP, input: ['a', 'b'], late_chunking: true });
    expect(clip.statusCode).toBe(400);
    expect(clip.json<ErrorBody>().error.param).toBe('late_chunking');
  });

  it('refuses chunk for sparse vectors, and cuts them by default', async () => {
    const refused = await post({ model: SPLADE, input: long, encoding_format: 'sparse', long_inputs: 'chunk' });
    expect(refused.statusCode).toBe(400);
    expect(refused.json<ErrorBody>().error).toMatchObject({ code: 'invalid_request', param: 'long_inputs' });
    const cut = await post({ model: SPLADE, input: long, encoding_format: 'sparse' });
    expect(cut.statusCode, cut.body).toBe(200);
  });
});
