/**
 * OpenAI's Files and Batch APIs (openapi 2.3.0's shapes):
 * - POST /v1/files (multipart: `file`, `purpose` "batch"), GET /v1/files, GET /v1/files/{id},
 *   GET /v1/files/{id}/content, DELETE /v1/files/{id};
 * - POST /v1/batches, GET /v1/batches, GET /v1/batches/{id}, POST /v1/batches/{id}/cancel.
 * Uploads stream to the files dir and downloads stream from it. Files and batches belong to the
 * API key that made them; other keys get 404.
 */
import { createReadStream } from 'node:fs';
import multipart from '@fastify/multipart';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import type { Batches } from '../batch/batches.js';
import type { BatchRecord, FileRecord } from '../batch/types.js';
import { ApiError, invalid } from '../errors.js';
import type { HttpServices } from './services.js';
import { errorResponses } from './schemas.js';

const FileObject = Type.Object({
  id: Type.String(),
  object: Type.Literal('file'),
  bytes: Type.Integer(),
  created_at: Type.Integer({ description: 'Unix seconds.' }),
  expires_at: Type.Optional(
    Type.Integer({ description: 'Unix seconds: when the file is deleted (absent: kept until deleted).' }),
  ),
  filename: Type.String(),
  purpose: Type.Union([Type.Literal('batch'), Type.Literal('batch_output')]),
  status: Type.Literal('processed'),
});

const FileList = Type.Object({
  object: Type.Literal('list'),
  data: Type.Array(FileObject),
  first_id: Type.Union([Type.String(), Type.Null()]),
  last_id: Type.Union([Type.String(), Type.Null()]),
  has_more: Type.Boolean(),
});

const Timestamp = Type.Optional(Type.Integer({ description: 'Unix seconds; absent until then.' }));

const BatchObject = Type.Object({
  id: Type.String(),
  object: Type.Literal('batch'),
  endpoint: Type.String(),
  errors: Type.Optional(
    Type.Object({
      object: Type.Literal('list'),
      data: Type.Array(
        Type.Object({
          code: Type.String(),
          message: Type.String(),
          param: Type.Union([Type.String(), Type.Null()]),
          line: Type.Union([Type.Integer(), Type.Null()]),
        }),
      ),
    }),
  ),
  input_file_id: Type.String(),
  completion_window: Type.String(),
  status: Type.Union([
    Type.Literal('validating'),
    Type.Literal('failed'),
    Type.Literal('in_progress'),
    Type.Literal('finalizing'),
    Type.Literal('completed'),
    Type.Literal('expired'),
    Type.Literal('cancelling'),
    Type.Literal('cancelled'),
  ]),
  output_file_id: Type.Optional(Type.String({ description: 'Once the batch has ended, when a request succeeded.' })),
  error_file_id: Type.Optional(Type.String({ description: 'Once the batch has ended, when a request failed.' })),
  created_at: Type.Integer(),
  in_progress_at: Timestamp,
  expires_at: Type.Integer(),
  finalizing_at: Timestamp,
  completed_at: Timestamp,
  failed_at: Timestamp,
  expired_at: Timestamp,
  cancelling_at: Timestamp,
  cancelled_at: Timestamp,
  request_counts: Type.Object({ total: Type.Integer(), completed: Type.Integer(), failed: Type.Integer() }),
  usage: Type.Object(
    {
      input_tokens: Type.Integer(),
      input_tokens_details: Type.Object({ cached_tokens: Type.Integer() }),
      output_tokens: Type.Integer(),
      output_tokens_details: Type.Object({ reasoning_tokens: Type.Integer() }),
      total_tokens: Type.Integer(),
    },
    {
      description:
        "The input tokens of the requests answered so far with success, as each answer's usage counted them (cached inputs included); nothing is generated, so output_tokens is 0.",
    },
  ),
  metadata: Type.Union([Type.Record(Type.String(), Type.String()), Type.Null()]),
});

const BatchList = Type.Object({
  object: Type.Literal('list'),
  data: Type.Array(BatchObject),
  first_id: Type.Union([Type.String(), Type.Null()]),
  last_id: Type.Union([Type.String(), Type.Null()]),
  has_more: Type.Boolean(),
});

const CreateBatchBody = Type.Object(
  {
    input_file_id: Type.String({ description: 'A file uploaded with purpose "batch": JSONL, one request a line.' }),
    endpoint: Type.String({ description: '"/v1/embeddings", "/v1/rerank" or "/v1/classify".' }),
    completion_window: Type.String({ description: '"24h": a batch not done by then expires.' }),
    metadata: Type.Optional(
      Type.Union([Type.Record(Type.String(), Type.String({ maxLength: 512 }), { maxProperties: 16 }), Type.Null()]),
    ),
    output_expires_after: Type.Optional(
      Type.Object(
        {
          anchor: Type.Literal('created_at'),
          seconds: Type.Integer({ minimum: 3600, maximum: 2_592_000 }),
        },
        { description: 'The output and error files are deleted `seconds` after they are made (1 hour to 30 days).' },
      ),
    ),
  },
  { additionalProperties: true },
);

const ListQuery = Type.Object(
  {
    after: Type.Optional(Type.String({ description: 'The id of the last object of the previous page.' })),
    limit: Type.Optional(
      Type.String({ pattern: '^\\d+$', description: 'Objects per page, 1 to 10,000 (default 20).' }),
    ),
    order: Type.Optional(Type.Union([Type.Literal('asc'), Type.Literal('desc')])),
    purpose: Type.Optional(Type.String()),
  },
  { additionalProperties: true },
);

const FileIdParams = Type.Object({ file_id: Type.String() });
const BatchIdParams = Type.Object({ batch_id: Type.String() });

/** Files and batches belong to the key that made them (its digest); without keys, to one anonymous owner. */
const ownerOf = (request: FastifyRequest): string => request.apiKeyDigest ?? 'anonymous';

function fileObject(file: FileRecord) {
  return {
    id: file.id,
    object: 'file' as const,
    bytes: file.bytes,
    created_at: file.createdAt,
    expires_at: file.expiresAt ?? undefined,
    filename: file.filename,
    purpose: file.purpose,
    status: 'processed' as const,
  };
}

/** A batch as OpenAI's API shows it: a time or file that is not there yet is left out. */
function batchObject(batch: BatchRecord) {
  const present = <T>(value: T | null) => value ?? undefined;
  return {
    id: batch.id,
    object: 'batch' as const,
    endpoint: batch.endpoint,
    errors: batch.errors ? { object: 'list' as const, data: batch.errors } : undefined,
    input_file_id: batch.inputFileId,
    completion_window: batch.completionWindow,
    status: batch.status,
    output_file_id: present(batch.outputFileId),
    error_file_id: present(batch.errorFileId),
    created_at: batch.createdAt,
    in_progress_at: present(batch.inProgressAt),
    expires_at: batch.expiresAt,
    finalizing_at: present(batch.finalizingAt),
    completed_at: present(batch.completedAt),
    failed_at: present(batch.failedAt),
    expired_at: present(batch.expiredAt),
    cancelling_at: present(batch.cancellingAt),
    cancelled_at: present(batch.cancelledAt),
    request_counts: { total: batch.total, completed: batch.completed, failed: batch.failed },
    usage: {
      input_tokens: batch.inputTokens,
      input_tokens_details: { cached_tokens: 0 },
      output_tokens: 0,
      output_tokens_details: { reasoning_tokens: 0 },
      total_tokens: batch.inputTokens,
    },
    metadata: batch.metadata,
  };
}

function page<T extends { id: string }>(items: T[], limit: number) {
  const data = items.slice(0, limit);
  return {
    object: 'list' as const,
    data,
    first_id: data[0]?.id ?? null,
    last_id: data.at(-1)?.id ?? null,
    has_more: items.length > limit,
  };
}

function limitOf(query: { limit?: string }): number {
  const limit = query.limit === undefined ? 20 : Number(query.limit);
  if (limit < 1 || limit > 10_000) throw invalid('limit', `limit must be 1 to 10000; got ${limit}.`);
  return limit;
}

const noFile = (id: string) =>
  new ApiError('not_found', `No file "${id}" (it may have been deleted, or belong to another key).`, { param: 'id' });
const noBatch = (id: string) =>
  new ApiError('not_found', `No batch "${id}" (it may belong to another key).`, { param: 'id' });

export const batchRoutes: FastifyPluginAsyncTypebox<HttpServices> = async (app, services) => {
  const batch: Batches | undefined = services.batch;
  if (!batch) return;
  const maxBytes = services.config.fileMaxMb * 1024 * 1024;
  await app.register(multipart, {
    // One byte over: a larger file reaches the service's own count, which refuses it with the setting's name.
    limits: { fileSize: maxBytes + 1, files: 1, fields: 16, fieldSize: 64 * 1024, parts: 32 },
  });
  const fileTags = ['Files'];
  const batchTags = ['Batches'];

  app.post(
    '/v1/files',
    {
      schema: {
        tags: fileTags,
        summary: 'Upload a file',
        description:
          'multipart/form-data with `file` (JSONL, one request a line) and `purpose` "batch", and optionally `expires_after[anchor]` ("created_at") and `expires_after[seconds]` (3600 to 2592000): the file is deleted then. The file streams to disk.',
        consumes: ['multipart/form-data'],
        response: { 200: FileObject, ...errorResponses },
      },
    },
    async (request) => {
      if (!request.isMultipart())
        throw new ApiError('unsupported_media_type', 'Send the file as multipart/form-data with `file` and `purpose`.');
      let received: { id: string; bytes: number } | undefined;
      let filename = '';
      let purpose: string | undefined;
      const expiresAfter: { anchor?: string; seconds?: string } = {};
      try {
        for await (const part of request.parts()) {
          if (part.type === 'file') {
            if (part.fieldname !== 'file' || received) {
              part.file.resume();
              throw invalid(part.fieldname, 'The form takes one file, named `file`.');
            }
            filename = part.filename;
            received = await batch.receive(part.file);
          } else if (part.fieldname === 'purpose') purpose = String(part.value);
          else if (part.fieldname === 'expires_after[anchor]') expiresAfter.anchor = String(part.value);
          else if (part.fieldname === 'expires_after[seconds]') expiresAfter.seconds = String(part.value);
        }
      } catch (error) {
        if (received) batch.discard(received);
        throw error;
      }
      if (!received) throw invalid('file', 'file is required.');
      if (purpose === undefined) {
        batch.discard(received);
        throw invalid('purpose', 'purpose is required.');
      }
      const expiry =
        expiresAfter.anchor === undefined && expiresAfter.seconds === undefined
          ? undefined
          : { anchor: expiresAfter.anchor ?? '', seconds: Number(expiresAfter.seconds) };
      return fileObject(await batch.register(ownerOf(request), received, filename, purpose, expiry));
    },
  );

  app.get(
    '/v1/files',
    {
      schema: {
        tags: fileTags,
        summary: 'List files',
        querystring: ListQuery,
        response: { 200: FileList, ...errorResponses },
      },
    },
    async (request) => {
      const limit = limitOf(request.query);
      const files = await batch.files(
        ownerOf(request),
        { limit: limit + 1, after: request.query.after, order: request.query.order },
        request.query.purpose,
      );
      return page(files.map(fileObject), limit);
    },
  );

  app.get(
    '/v1/files/:file_id',
    {
      schema: {
        tags: fileTags,
        summary: 'Get a file',
        params: FileIdParams,
        response: { 200: FileObject, ...errorResponses },
      },
    },
    async (request) => {
      const file = await batch.file(ownerOf(request), request.params.file_id);
      if (!file) throw noFile(request.params.file_id);
      return fileObject(file);
    },
  );

  app.get(
    '/v1/files/:file_id/content',
    {
      schema: {
        tags: fileTags,
        summary: "Get a file's content",
        description: 'The file as it is on disk (JSONL), streamed.',
        params: FileIdParams,
        // The body is the file's bytes, streamed; only the errors have a JSON shape.
        response: errorResponses,
      },
    },
    async (request, reply) => {
      const file = await batch.file(ownerOf(request), request.params.file_id);
      if (!file) throw noFile(request.params.file_id);
      const content: unknown = createReadStream(batch.contentPath(file));
      return reply
        .type('application/octet-stream')
        .header('content-length', file.bytes)
        .header('content-disposition', `attachment; filename="${file.filename.replace(/["\\\r\n]/g, '_')}"`)
        .send(content as never);
    },
  );

  app.delete(
    '/v1/files/:file_id',
    {
      schema: {
        tags: fileTags,
        summary: 'Delete a file',
        params: FileIdParams,
        response: {
          200: Type.Object({ id: Type.String(), object: Type.Literal('file'), deleted: Type.Boolean() }),
          ...errorResponses,
        },
      },
    },
    async (request) => {
      if (!(await batch.deleteFile(ownerOf(request), request.params.file_id))) throw noFile(request.params.file_id);
      return { id: request.params.file_id, object: 'file' as const, deleted: true };
    },
  );

  app.post(
    '/v1/batches',
    {
      schema: {
        tags: batchTags,
        summary: 'Create a batch',
        description:
          "Runs every request of the input file against the endpoint, behind interactive requests. The file is checked first: a line that is not JSON, a repeated custom_id, or another method or url than the batch's fails the batch before anything runs.",
        body: CreateBatchBody,
        response: { 200: BatchObject, ...errorResponses },
      },
    },
    async (request) => {
      const body = request.body;
      const created = await batch.create(ownerOf(request), {
        inputFileId: body.input_file_id,
        endpoint: body.endpoint,
        completionWindow: body.completion_window,
        metadata: body.metadata,
        outputExpiresAfter: body.output_expires_after,
      });
      return batchObject(created);
    },
  );

  app.get(
    '/v1/batches',
    {
      schema: {
        tags: batchTags,
        summary: 'List batches',
        querystring: ListQuery,
        response: { 200: BatchList, ...errorResponses },
      },
    },
    async (request) => {
      const limit = limitOf(request.query);
      const batches = await batch.batches(ownerOf(request), { limit: limit + 1, after: request.query.after });
      return page(batches.map(batchObject), limit);
    },
  );

  app.get(
    '/v1/batches/:batch_id',
    {
      schema: {
        tags: batchTags,
        summary: 'Get a batch',
        params: BatchIdParams,
        response: { 200: BatchObject, ...errorResponses },
      },
    },
    async (request) => {
      const found = await batch.batch(ownerOf(request), request.params.batch_id);
      if (!found) throw noBatch(request.params.batch_id);
      return batchObject(found);
    },
  );

  app.post(
    '/v1/batches/:batch_id/cancel',
    {
      schema: {
        tags: batchTags,
        summary: 'Cancel a batch',
        description: 'The batch stops taking requests and ends `cancelled`; the answers it has are in its files.',
        params: BatchIdParams,
        response: { 200: BatchObject, ...errorResponses },
      },
    },
    async (request) => {
      const cancelled = await batch.cancel(ownerOf(request), request.params.batch_id);
      if (!cancelled) throw noBatch(request.params.batch_id);
      return batchObject(cancelled);
    },
  );
};
