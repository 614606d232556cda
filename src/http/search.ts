/**
 * Web search tasks and the local index:
 * - POST /v1/web-search/search: creates a task and answers its record at once (state "pending").
 * - GET /v1/web-search/search/{id}[?wait=N]: the record, with results once succeeded; `wait`
 *   holds the request up to N seconds until the task is finished.
 * - DELETE /v1/web-search/search/{id}: cancels a pending or running task.
 * - POST /v1/web-search/index/documents, GET /v1/web-search/index,
 *   DELETE /v1/web-search/index/documents/{key}: the local index.
 * A task belongs to the API key that created it; other keys get 404. Every key may search the
 * index; adding, replacing and deleting documents needs a key with write rights (auth.ts).
 */
import { createHash } from 'node:crypto';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type, type Static } from 'typebox';
import type { FastifyRequest } from 'fastify';
import { ApiError, invalid } from '../errors.js';
import { settings } from '../config.js';
import type { IndexDocument } from '../search/index/document-index.js';
import { imageDocumentFromInput } from '../search/index/images.js';
import { documentFromInput } from '../search/index/sources.js';
import { imageSourceOptions, loadImages } from './image-sources.js';
import { renderMarkdown } from '../search/markdown.js';
import { freshnessValues, normaliseSearchRequest } from '../search/request.js';
import type { SearchService } from '../search/service.js';
import type { TaskView } from '../search/tasks/local-tasks.js';
import { requireIndexWrite } from './auth.js';
import type { HttpServices } from './services.js';
import { errorResponses } from './schemas.js';

/** Longest long-poll a client may ask for, in seconds. */
const maxWaitSeconds = 60;

const SearchBody = Type.Object(
  {
    query: Type.String({ description: 'What to search for.' }),
    area: Type.Optional(
      Type.String({ description: '"global" (worldwide, the default) or a language tag: "en", "en-US", "pt-BR".' }),
    ),
    freshness: Type.Optional(
      Type.String({
        description: `How recent results must be: ${freshnessValues.join(', ')} (default noLimit; "day", "week", "7d", "past_month" and similar spellings are accepted).`,
      }),
    ),
    includeImages: Type.Optional(Type.Boolean({ description: 'Also return images.' })),
    page: Type.Optional(Type.Integer({ description: '1-based page of results (default 1).' })),
    count: Type.Optional(Type.Integer({ description: 'Results per page, 1 to 50 (default 10).' })),
    format: Type.Optional(
      Type.String({ description: '"json" (default) or "markdown": the results also rendered as Markdown for an LLM.' }),
    ),
  },
  { additionalProperties: true },
);

const taskFields = {
  id: Type.String({ format: 'uuid' }),
  prompt: Type.String({ description: 'The query.' }),
  state: Type.Union([
    Type.Literal('pending'),
    Type.Literal('running'),
    Type.Literal('succeeded'),
    Type.Literal('failed'),
    Type.Literal('cancelled'),
  ]),
  created_at: Type.String({ description: 'ISO 8601 with milliseconds, UTC.' }),
  video: Type.Null(),
  liked: Type.Null(),
  estimate_wait_seconds: Type.Integer({
    description: 'Seconds until the task is expected to finish, from the queue and recent run times.',
  }),
};

const TaskRecord = Type.Object(taskFields, { description: 'A search task as created: always pending.' });

const SearchResultSchema = Type.Object({
  title: Type.String(),
  url: Type.String(),
  snippet: Type.String(),
  content: Type.Optional(
    Type.String({ description: 'The full text, when the provider has it (the local index does).' }),
  ),
  score: Type.Number({ description: 'Higher is better: the cross-encoder score (0..1) when reranked.' }),
  published_date: Type.Optional(Type.String()),
  source: Type.String({ description: 'The search engine (SearXNG) or the indexed source (local).' }),
});

const ImageSchema = Type.Object({
  url: Type.String(),
  thumbnail_url: Type.Optional(Type.String()),
  title: Type.Optional(Type.String()),
  page_url: Type.Optional(Type.String()),
  alt: Type.Optional(Type.String({ description: "An indexed image's alt text." })),
  score: Type.Optional(
    Type.Number({
      description:
        "Ranked by what it shows: the cosine similarity of the search image model's vectors of the query and the image (absent: an image a result links to, or one whose thumbnail could not be had).",
    }),
  ),
  source: Type.Optional(Type.String({ description: 'Where an indexed image came from.' })),
});

const TaskDetail = Type.Object(
  {
    ...taskFields,
    provider: Type.String(),
    started_at: Type.Union([Type.String(), Type.Null()]),
    finished_at: Type.Union([Type.String(), Type.Null()]),
    results: Type.Optional(Type.Array(SearchResultSchema)),
    images: Type.Optional(Type.Array(ImageSchema)),
    markdown: Type.Optional(Type.String({ description: 'With format "markdown": the results rendered for an LLM.' })),
    error: Type.Optional(Type.Object({ code: Type.String(), message: Type.String() })),
  },
  { description: 'A search task; `results` when succeeded, `error` when failed or cancelled.' },
);

const TaskParams = Type.Object({ id: Type.String() });
const WaitQuery = Type.Object(
  {
    wait: Type.Optional(
      Type.String({
        pattern: '^\\d+(\\.\\d+)?$',
        description: `Seconds (0 to ${maxWaitSeconds}) to wait for the task to finish before answering.`,
      }),
    ),
  },
  { additionalProperties: true },
);

const DocumentsBody = Type.Object(
  {
    documents: Type.Array(
      Type.Object(
        {
          id: Type.Optional(
            Type.String({ description: 'Stable id: a document with the same id (or url) replaces the old one.' }),
          ),
          url: Type.Optional(Type.String()),
          title: Type.Optional(Type.String()),
          text: Type.Optional(
            Type.String({ description: "A text document's text (required unless `image` is given)." }),
          ),
          image: Type.Optional(
            Type.String({
              description:
                'An image document instead of a text: the image as a data URI (PNG, JPEG or WebP; an http(s) URL with ONNX_GATEWAY_IMAGE_URLS=true), embedded by the search image model (ONNX_GATEWAY_SEARCH_IMAGE_MODEL) and ranked against queries by what it shows. The index keeps its vector, not its pixels: `url` is where results point (absent: an id of the image).',
            }),
          ),
          alt: Type.Optional(Type.String({ description: "An image document's alt text, shown with it." })),
          page_url: Type.Optional(Type.String({ description: 'The page an image document belongs to.' })),
          source: Type.Optional(Type.String()),
          language: Type.Optional(Type.String({ description: 'Language tag: "en", "de-CH".' })),
          region: Type.Optional(Type.String()),
          published_date: Type.Optional(Type.String({ description: 'ISO 8601.' })),
          images: Type.Optional(Type.Array(Type.String())),
        },
        { additionalProperties: true },
      ),
      { minItems: 1 },
    ),
  },
  { additionalProperties: true },
);

const IngestResponse = Type.Object({
  added: Type.Integer(),
  updated: Type.Integer(),
  embedded: Type.Integer({ description: 'Documents given a vector by the served embedder.' }),
  ids: Type.Array(Type.String(), {
    description: "The documents' keys (id, else url, else a hash of the text), in input order.",
  }),
});

const IndexStats = Type.Object({
  documents: Type.Integer(),
  vectors: Type.Record(Type.String(), Type.Integer(), { description: 'Documents with a vector, per embedder.' }),
  sparse: Type.Record(Type.String(), Type.Integer(), {
    description: 'Documents with a sparse vector, per sparse model (SPLADE).',
  }),
  images: Type.Object(
    {
      documents: Type.Integer(),
      vectors: Type.Record(Type.String(), Type.Integer(), { description: 'Image documents with a vector, per model.' }),
    },
    { description: 'Image documents (ranked by what they show with the search image model).' },
  ),
  embedder: Type.Union([Type.String(), Type.Null()]),
  image_model: Type.Union([Type.String(), Type.Null()], {
    description: 'The search image model (ONNX_GATEWAY_SEARCH_IMAGE_MODEL).',
  }),
  reranker: Type.Union([Type.String(), Type.Null()]),
  updated_at: Type.Union([Type.String(), Type.Null()]),
  rankings: Type.Array(Type.String(), { description: 'The rankings hybrid search fuses (searchRankings).' }),
  replication: Type.Union(
    [
      Type.Object({
        stream: Type.String({ description: 'The Redis stream of index writes.' }),
        last_applied_id: Type.Union([Type.String(), Type.Null()], {
          description: 'The last stream entry this replica applied.',
        }),
        applied: Type.Integer({ description: 'Entries applied, counted from the first ever written.' }),
        written: Type.Integer({ description: 'Entries written to the stream so far.' }),
        behind: Type.Integer({ description: 'Entries written and not yet applied here.' }),
        lag_seconds: Type.Number({
          description: 'Time between the newest entry and the last applied one (0 when caught up).',
        }),
        snapshots_loaded: Type.Integer({
          description: 'Snapshots this replica loaded since it started (after the stream was trimmed past it).',
        }),
      }),
      Type.Null(),
    ],
    {
      description: "With Redis: how far this replica's copy of the index is behind the stream of writes; null without.",
    },
  ),
});

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

function taskRecord(task: TaskView) {
  return {
    id: task.id,
    prompt: task.request.query,
    state: task.state,
    created_at: new Date(task.createdAt).toISOString(),
    video: null,
    liked: null,
    estimate_wait_seconds: task.estimateWaitSeconds,
  };
}

function taskDetail(task: TaskView, provider: string) {
  const detail: Static<typeof TaskDetail> = {
    ...taskRecord(task),
    provider,
    started_at: iso(task.startedAt),
    finished_at: iso(task.finishedAt),
  };
  if (task.state === 'succeeded' && task.outcome) {
    detail.results = task.outcome.results;
    if (task.request.includeImages) detail.images = task.outcome.images ?? [];
    if (task.request.format === 'markdown') {
      detail.markdown = renderMarkdown(
        task.request.query,
        task.outcome,
        (task.request.page - 1) * task.request.count + 1,
      );
    }
  }
  if (task.error) detail.error = task.error;
  return detail;
}

/** Tasks belong to the key that made them (stored as its digest); without keys, to one anonymous owner. */
const ownerOf = (request: FastifyRequest): string => request.apiKeyDigest ?? 'anonymous';

function notFound(id: string): ApiError {
  return new ApiError('not_found', `No search task "${id}" (it may have expired, or belong to another key).`, {
    param: 'id',
  });
}

export const searchRoutes: FastifyPluginAsyncTypebox<HttpServices> = async (app, services) => {
  const search: SearchService | undefined = services.search;
  if (!search) return;
  const tags = ['Web search'];
  const imageOptions = imageSourceOptions(services.config);
  // Long-polls answer at once on shutdown instead of holding the drain for up to a minute.
  app.addHook('preClose', async () => search.tasks.wakeWaiters());

  app.post(
    '/v1/web-search/search',
    {
      schema: {
        tags,
        summary: 'Create a web search task',
        body: SearchBody,
        response: { 200: TaskRecord, ...errorResponses },
      },
    },
    async (request) => {
      const task = await search.tasks.create(ownerOf(request), normaliseSearchRequest(request.body));
      return taskRecord(task);
    },
  );

  app.get(
    '/v1/web-search/search/:id',
    {
      schema: {
        tags,
        summary: 'Get a web search task',
        params: TaskParams,
        querystring: WaitQuery,
        response: { 200: TaskDetail, ...errorResponses },
      },
    },
    async (request) => {
      const wait = request.query.wait === undefined ? 0 : Number(request.query.wait);
      if (wait > maxWaitSeconds) throw invalid('wait', `wait must be at most ${maxWaitSeconds} seconds; got ${wait}.`);
      const task = await search.tasks.wait(ownerOf(request), request.params.id, wait * 1000, request.clientSignal);
      if (!task) throw notFound(request.params.id);
      return taskDetail(task, search.tasks.providerName);
    },
  );

  app.delete(
    '/v1/web-search/search/:id',
    {
      schema: {
        tags,
        summary: 'Cancel a web search task',
        params: TaskParams,
        response: { 200: TaskDetail, ...errorResponses },
      },
    },
    async (request) => {
      const task = await search.tasks.cancel(ownerOf(request), request.params.id);
      if (!task) throw notFound(request.params.id);
      return taskDetail(task, search.tasks.providerName);
    },
  );

  app.post(
    '/v1/web-search/index/documents',
    {
      onRequest: requireIndexWrite,
      schema: {
        tags,
        summary: 'Add documents to the local index',
        description:
          'Each document is embedded by the served embedder and indexed for BM25; a document with the id (or url) of an indexed one replaces it.',
        body: DocumentsBody,
        response: { 200: IngestResponse, ...errorResponses },
      },
    },
    async (request) => {
      const { documents } = request.body;
      if (documents.length > services.core.limits.maxInputs) {
        throw invalid(
          'documents',
          `documents has ${documents.length} items; at most ${services.core.limits.maxInputs} are accepted per request.`,
        );
      }
      const { indexMaxDocumentChars: maxChars, indexMaxDocuments: maxDocuments } = services.config;
      documents.forEach((doc, i) => {
        const chars = (doc.title?.length ?? 0) + (doc.text?.length ?? 0) + (doc.alt?.length ?? 0);
        if (chars > maxChars) {
          throw new ApiError(
            'payload_too_large',
            `documents[${i}] has ${chars} characters (title and text); a document may have at most ${maxChars} (ONNX_GATEWAY_INDEX_MAX_DOCUMENT_CHARS): split it.`,
            {
              param: `documents[${i}]`,
            },
          );
        }
      });
      const texts: { at: number; document: IndexDocument }[] = [];
      const pictures: { at: number; fields: (typeof documents)[number] & { image: string } }[] = [];
      documents.forEach((doc, i) => {
        if (doc.image === undefined) {
          const digest = createHash('sha256')
            .update(`${doc.title ?? ''}\n${doc.text ?? ''}`)
            .digest('hex')
            .slice(0, 32);
          const document = documentFromInput(
            doc,
            { key: digest, url: (key) => `urn:onnx-gateway:document:${encodeURIComponent(key)}`, source: 'api' },
            `documents[${i}]`,
          );
          texts.push({ at: i, document });
        } else if (doc.text !== undefined) {
          throw invalid(
            `documents[${i}].text`,
            `documents[${i}] has both text and image: a document is one or the other (an image's words go in alt).`,
          );
        } else pictures.push({ at: i, fields: { ...doc, image: doc.image } });
      });
      if (pictures.length > 0 && !search.retriever.options.imageModel)
        throw invalid(
          `documents[${pictures[0]!.at}].image`,
          `Image documents are embedded by the search image model, and none is set (${settings.searchImageModel.env}).`,
        );
      const loaded = await loadImages(
        pictures.map(({ at, fields }) => ({ source: fields.image, param: `documents[${at}].image` })),
        imageOptions,
        request.clientSignal,
      );
      const images = pictures.map(({ at, fields }, i) =>
        imageDocumentFromInput(fields, loaded[i]!.item.image, `documents[${at}]`),
      );
      const keyAt = new Array<string>(documents.length);
      texts.forEach(({ at, document }) => (keyAt[at] = document.key));
      pictures.forEach(({ at }, i) => (keyAt[at] = images[i]!.key));
      const keys = new Set(keyAt);
      const adding = keys.size - search.index.idsOf([...keys]).size;
      const stats = search.index.stats();
      const held = stats.documents + stats.images.documents;
      if (adding > 0 && held + adding > maxDocuments) {
        throw new ApiError(
          'index_full',
          `The index holds ${held} documents and these would add ${adding}; it may hold at most ${maxDocuments} (ONNX_GATEWAY_INDEX_MAX_DOCUMENTS). Delete documents first.`,
          {
            param: 'documents',
          },
        );
      }
      const signal = request.clientSignal;
      const reports = [
        texts.length > 0
          ? await search.ingest(
              texts.map((t) => t.document),
              { signal },
            )
          : undefined,
        images.length > 0 ? await search.ingestImages(images, { signal }) : undefined,
      ];
      const sum = (field: 'added' | 'updated' | 'embedded') =>
        reports.reduce((total, report) => total + (report?.[field] ?? 0), 0);
      return { added: sum('added'), updated: sum('updated'), embedded: sum('embedded'), ids: keyAt };
    },
  );

  app.get(
    '/v1/web-search/index',
    { schema: { tags, summary: 'Describe the local index', response: { 200: IndexStats, ...errorResponses } } },
    async () => {
      const stats = search.index.stats();
      const replication = await search.replication?.status();
      return {
        documents: stats.documents,
        vectors: stats.vectors,
        sparse: stats.sparse,
        images: stats.images,
        embedder: search.retriever.embedder ?? null,
        image_model: search.retriever.options.imageModel ?? null,
        reranker: search.retriever.reranker ?? null,
        updated_at: iso(stats.updatedAt),
        rankings: [...search.retriever.options.rankings],
        replication: replication
          ? {
              stream: replication.stream,
              last_applied_id: replication.lastAppliedId,
              applied: replication.lastAppliedSequence,
              written: replication.headSequence,
              behind: replication.behind,
              lag_seconds: replication.lagSeconds,
              snapshots_loaded: replication.snapshotsLoaded,
            }
          : null,
      };
    },
  );

  app.delete(
    '/v1/web-search/index/documents/:key',
    {
      onRequest: requireIndexWrite,
      schema: {
        tags,
        summary: 'Remove a document from the local index',
        params: Type.Object({ key: Type.String({ description: 'The document key (URL-encoded).' }) }),
        response: { 200: Type.Object({ id: Type.String(), deleted: Type.Boolean() }), ...errorResponses },
      },
    },
    async (request) => {
      if (!(await search.writer.remove(request.params.key, request.clientSignal)))
        throw new ApiError('not_found', `No document "${request.params.key}" in the index.`, { param: 'key' });
      return { id: request.params.key, deleted: true };
    },
  );
};
