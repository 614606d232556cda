/**
 * Ollama's POST /api/pull, for Hugging Face Hub repositories: `ollama.pull({ model: 'BAAI/bge-m3' })`
 * pulls the repository as `onnx-gateway models pull` does (models/download.ts: verified, resumable,
 * locked to a commit, installed whole or not at all) into the models dir. Admin keys only, and only
 * the repositories the pullAllow setting names.
 *
 * The answer is Ollama's: with `stream` (the default) a line of NDJSON per step, `pulling manifest`,
 * `pulling <digest>` with `total` and `completed` bytes per file, `verifying sha256 digest`,
 * `writing manifest`, `success`, or `{"error"}` as the last line when the pull fails; with
 * `stream: false`, `{"status": "success"}` once it is done, or an error with its status. A client
 * that goes away cancels the pull: its partial file stays for the next pull to resume, and the model
 * folder gets nothing.
 */
import { PassThrough } from 'node:stream';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyReply } from 'fastify';
import { Type } from 'typebox';
import { ApiError, invalid } from '../../errors.js';
import { loadCatalogue } from '../../models/catalogue.js';
import type { DownloadProgress, FileOutcome } from '../../models/download-progress.js';
import {
  DownloadError,
  parsePullSpec,
  pullModel,
  PullRefusal,
  PullSpecError,
  type PullTarget,
} from '../../models/download.js';
import { Hub, HubError, hubOptions, type Checksum } from '../../models/hub.js';
import { parseVariant, type Variant } from '../../models/variants.js';
import { requireAdmin } from '../auth.js';
import { connectionSignal } from '../client-signal.js';
import type { HttpServices } from '../services.js';

const tags = ['Ollama compatibility'];

const OllamaError = Type.Object(
  { error: Type.String(), code: Type.Optional(Type.String({ description: "The error catalogue's stable code" })) },
  { description: "Ollama's error shape, with the catalogue's status and code." },
);

const PullBody = Type.Object(
  {
    model: Type.Optional(
      Type.String({
        minLength: 1,
        description:
          'A Hub repository id (`owner/name`, also `hf.co/owner/name`) or a catalogue id, optionally with `@revision` ' +
          'and a `:variant` tag (`:latest` or none: the onnxVariant setting).',
      }),
    ),
    name: Type.Optional(
      Type.String({ minLength: 1, description: 'The older name of `model`, which the ollama npm client sends.' }),
    ),
    insecure: Type.Optional(
      Type.Boolean({ description: 'Accepted and ignored: the Hub is reached at the hfEndpoint setting.' }),
    ),
    stream: Type.Optional(
      Type.Boolean({ description: 'false: one answer once the pull is done, not a line per step (default true).' }),
    ),
  },
  { additionalProperties: true },
);

const PullStatus = Type.Object({
  status: Type.String({
    description:
      '`pulling manifest`, `pulling <digest>` for each file, `verifying sha256 digest`, `writing manifest`, `success`.',
  }),
  digest: Type.Optional(
    Type.String({
      description:
        "The file's checksum: `sha256:<hex>` for files stored with Git LFS, `git-sha1:<hex>` (its git blob) for the others.",
    }),
  ),
  total: Type.Optional(Type.Integer({ description: 'Bytes of the file.' })),
  completed: Type.Optional(Type.Integer({ description: 'Bytes of it on disk so far.' })),
});
type PullStatus = { status: string; digest?: string; total?: number; completed?: number };

const PullResponse = {
  description:
    'A line per step (application/x-ndjson; the last is `success` or an error), or with `stream: false` one `success`.',
  content: {
    'application/x-ndjson': { schema: Type.Union([PullStatus, OllamaError]) },
    'application/json': { schema: PullStatus },
  },
};

const errorResponses = Object.fromEntries(
  [400, 401, 403, 404, 413, 415, 502, 503].map((status) => [status, OllamaError]),
);

export const ollamaPullRoutes: FastifyPluginAsyncTypebox<HttpServices> = async (app, { config, onModelPulled }) => {
  const catalogue = loadCatalogue(config.manifestsDir);
  const hub = new Hub(hubOptions(config.hfEndpoint));
  // A shutdown stops the pulls under way (their partial files are kept) rather than waiting for them.
  const closing = new AbortController();
  app.addHook('preClose', (done) => {
    closing.abort();
    done();
  });
  const stopped = () =>
    new ApiError(
      'shutting_down',
      'The server is shutting down: the pull stopped; its partial files are kept, and the next pull resumes them.',
    );

  /** What to pull: the repository, checked against pullAllow, and the id the model will be served by. */
  const planPull = (name: string): { target: PullTarget; servedId: string; variant: Variant } => {
    let target: PullTarget;
    let variant: Variant | undefined;
    try {
      ({ target, variant } = parsePullSpec(ollamaToSpec(name), catalogue, config.modelsDir));
    } catch (error) {
      if (error instanceof PullSpecError) throw invalid('model', error.message);
      throw error;
    }
    if (!pullAllowed(target.repo, config.pullAllow)) {
      const why =
        config.pullAllow.length === 0
          ? 'no repository may be pulled over HTTP: ONNX_GATEWAY_PULL_ALLOW is empty (set it to *, or to the repository ids and owners ' +
            'that may be)'
          : `ONNX_GATEWAY_PULL_ALLOW (${config.pullAllow.join(', ')}) does not name it or its owner`;
      throw new ApiError('forbidden', `${target.repo} can not be pulled here: ${why}.`, { param: 'model' });
    }
    return {
      target,
      servedId: variant ? `${target.id}:${variant}` : target.id,
      variant: variant ?? parseVariant(config.onnxVariant),
    };
  };

  app.post(
    '/api/pull',
    {
      onRequest: requireAdmin,
      schema: {
        tags,
        summary: 'Pull a model from the Hugging Face Hub (Ollama; admin keys)',
        body: PullBody,
        response: { 200: PullResponse, ...errorResponses },
      },
    },
    async (request, reply) => {
      const { model, name, stream = true } = request.body;
      const spec = model ?? name;
      if (spec === undefined) throw invalid('model', 'model is required: the Hub repository id to pull (owner/name).');
      const { target, servedId, variant } = planPull(spec);
      // A pull runs as long as the download takes: bounded by its client, not by the request timeout.
      const client = connectionSignal(request);
      const signal = AbortSignal.any([client, closing.signal]);
      const run = async (progress?: DownloadProgress) => {
        await pullModel(target, { modelsDir: config.modelsDir, hub, variants: [variant], progress, signal });
        await onModelPulled?.(servedId);
      };

      if (!stream) {
        try {
          await run();
        } catch (error) {
          throw closing.signal.aborted ? stopped() : asApiError(error);
        }
        return { status: 'success' };
      }

      const lines = new PassThrough();
      const send = (line: PullStatus | { error: string }) => {
        if (!lines.destroyed && !lines.writableEnded) lines.write(`${JSON.stringify(line)}\n`);
      };
      // A stream is sent as it is, never serialised: the typed reply only knows the schema's objects.
      (reply as FastifyReply).type('application/x-ndjson').send(lines);
      send({ status: 'pulling manifest' });
      run(new NdjsonProgress(send))
        .then(() => {
          // Ollama's closing steps, said once they are done: each file was verified as it arrived,
          // and the lock file (the manifest of the commit and its files) went in last.
          send({ status: 'verifying sha256 digest' });
          send({ status: 'writing manifest' });
          send({ status: 'success' });
        })
        .catch((error: unknown) => {
          if (client.aborted) {
            return request.log.info({ model: servedId }, 'pull cancelled by the client; partial files kept');
          }
          const apiError = closing.signal.aborted ? stopped() : asApiError(error);
          if (apiError.code === 'internal') request.log.error({ err: error }, 'pull failed');
          send({ error: apiError.message });
        })
        .finally(() => {
          // Its headers said keep-alive before the shutdown began: end the connection with the
          // answer, or closing the server waits for the client to leave.
          if (closing.signal.aborted) reply.raw.once('finish', () => request.raw.socket?.end());
          lines.end();
        });
      return reply;
    },
  );
};

/**
 * An Ollama model name as a pull spec: Ollama's Hugging Face prefix (`hf.co/owner/name`) dropped,
 * and its default tag `:latest` too (the onnxVariant setting's variant is pulled then).
 */
function ollamaToSpec(name: string): string {
  return name
    .trim()
    .replace(/^(https?:\/\/)?(hf\.co|huggingface\.co)\//i, '')
    .replace(/:latest$/, '');
}

/** Whether pullAllow names the repository, its owner, or `*` (the Hub's ids are case-insensitive). */
function pullAllowed(repo: string, allow: readonly string[]): boolean {
  const id = repo.toLowerCase();
  const owner = id.split('/')[0];
  return allow.some((entry) => entry === '*' || [id, owner].includes(entry.toLowerCase()));
}

/** A failed pull as the catalogue's error: a refusal is the request's fault, the Hub's answers keep their meaning. */
function asApiError(error: unknown): ApiError {
  if (error instanceof ApiError) return error;
  if (error instanceof PullRefusal) return invalid('model', error.message);
  if (error instanceof DownloadError) {
    let status: number | undefined;
    for (let cause = error.cause; cause instanceof Error; cause = cause.cause)
      if (cause instanceof HubError) status = cause.status;
    // The Hub answers 401 for a repository it does not show to this client, whether or not it exists.
    const code = status === 401 || status === 403 || status === 404 ? 'model_not_found' : 'upstream_error';
    return new ApiError(code, error.message, { param: code === 'model_not_found' ? 'model' : null, cause: error });
  }
  return new ApiError('internal', undefined, { cause: error });
}

/** `sha256:<hex>` or `git-sha1:<hex>`: a file's checksum as an Ollama digest names a layer. */
const digestOf = (checksum: Checksum) => `${checksum.algorithm}:${checksum.hex}`;

/**
 * The pull's progress as Ollama's lines: one when a file starts (or resumes), then at each
 * hundredth of it (each MiB when its size is unknown), and one when it is done, present files
 * included.
 */
class NdjsonProgress implements DownloadProgress {
  private readonly files = new Map<
    string,
    { status: string; digest?: string; total?: number; completed: number; reported: number }
  >();

  constructor(private readonly send: (line: PullStatus) => void) {}

  start(file: string, total: number | undefined, from: number, checksum?: Checksum): void {
    const state = { ...this.describe(file, checksum), total, completed: from, reported: from };
    this.files.set(file, state);
    this.report(state);
  }

  advance(file: string, bytes: number): void {
    const state = this.files.get(file);
    if (!state) return;
    state.completed += bytes;
    if (state.completed - state.reported >= (state.total ? state.total / 100 : 1 << 20)) this.report(state);
  }

  /** The transfer's next start says where it resumes. */
  retry(): void {}

  finish(file: string, outcome: FileOutcome): void {
    const state = this.files.get(file) ?? { ...this.describe(file, outcome.checksum), completed: 0, reported: -1 };
    this.files.delete(file);
    // A file already present gets its one line here; a download's last line may have said it all.
    if (state.reported !== outcome.bytes || state.total !== outcome.bytes) {
      this.report({ ...state, total: outcome.bytes, completed: outcome.bytes });
    }
  }

  stop(): void {}

  /** Ollama's `pulling <first 12 digits of the digest>`; the path when the Hub gave no checksum. */
  private describe(file: string, checksum?: Checksum): { status: string; digest?: string } {
    return checksum
      ? { status: `pulling ${checksum.hex.slice(0, 12)}`, digest: digestOf(checksum) }
      : { status: `pulling ${file}` };
  }

  private report(state: {
    status: string;
    digest?: string;
    total?: number;
    completed: number;
    reported: number;
  }): void {
    state.reported = state.completed;
    const { status, digest, total, completed } = state;
    this.send({ status, ...(digest ? { digest } : {}), ...(total !== undefined ? { total } : {}), completed });
  }
}
