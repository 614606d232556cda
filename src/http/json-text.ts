/**
 * Responses a route writes as JSON text itself (vectors straight from their Float32Array, image
 * bytes as base64), past the serializer fastify compiles from the route's response schema; that
 * schema still describes the response in the OpenAPI document.
 */
import type { FastifyReply } from 'fastify';

export function sendJsonText(reply: FastifyReply, json: string): FastifyReply {
  return reply
    .type('application/json')
    .serializer((text: string) => text)
    .send(json);
}
