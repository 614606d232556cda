/**
 * POST /v1/web-reader/read: a page as clean markdown, text or HTML, with its title and links.
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { readerRedirects } from '../search/reader/fetch-page.js';
import { Reader } from '../search/reader/read.js';
import type { HttpServices } from './services.js';
import { errorResponses, ErrorResponse } from './schemas.js';

const ReadBody = Type.Object(
  {
    url: Type.String({
      description:
        'An http(s) URL. Private, loopback and link-local addresses are refused unless the server allows them.',
    }),
    format: Type.Optional(
      Type.Union([Type.Literal('markdown'), Type.Literal('text'), Type.Literal('html')], { default: 'markdown' }),
    ),
  },
  { additionalProperties: true },
);

const ReadResponse = Type.Object({
  url: Type.String({ description: 'The URL after redirects' }),
  title: Type.String(),
  byline: Type.Union([Type.String(), Type.Null()]),
  excerpt: Type.Union([Type.String(), Type.Null()]),
  format: Type.String(),
  content: Type.String(),
  links: Type.Array(Type.Object({ text: Type.String(), url: Type.String() })),
});

export const readerRoutes: FastifyPluginAsyncTypebox<HttpServices> = async (app, { config }) => {
  const reader = new Reader({
    fetch: {
      maxBytes: config.readerMaxBytes,
      timeoutMs: config.readerTimeout,
      maxRedirects: readerRedirects,
      allowPrivate: config.readerAllowPrivate,
    },
    parseTimeoutMs: config.readerParseTimeout,
  });
  app.addHook('onClose', () => reader.close());
  app.post(
    '/v1/web-reader/read',
    {
      schema: {
        tags: ['Web reader'],
        summary: 'Read a web page as markdown, text or HTML',
        body: ReadBody,
        response: { 200: ReadResponse, ...errorResponses, 422: ErrorResponse, 502: ErrorResponse, 504: ErrorResponse },
      },
    },
    async (request) => reader.read(request.body.url, request.body.format ?? 'markdown', request.clientSignal),
  );
};
