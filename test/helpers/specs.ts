/**
 * The JSON Schemas of the APIs this server stands in for, from those APIs' own specifications
 * (test/fixtures/specs: TEI's docs/openapi.json, OpenAI's and Ollama's openapi.yaml, each naming
 * its source and version), compiled with ajv: answers are checked against what the real clients
 * were written from, not against our own route schemas.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Ajv, type ValidateFunction } from 'ajv';
import { expect } from 'vitest';

export const specFiles = {
  tei: 'tei-openapi-1.9.3.json',
  openai: 'openai-openapi-2.3.0.json',
  ollama: 'ollama-openapi-v0.33.0-rc2.json',
} as const;
export type Spec = keyof typeof specFiles;

interface SpecDocument {
  'x-source': string;
  info: { version: string };
  components: { schemas: Record<string, Record<string, unknown>> };
  'x-response-statuses'?: Record<string, Record<string, string[]>>;
  'x-examples'?: Record<string, { request?: unknown; response?: unknown }>;
}

const documents = Object.fromEntries(
  Object.entries(specFiles).map(([spec, file]) => [
    spec,
    JSON.parse(readFileSync(join(import.meta.dirname, '..', 'fixtures', 'specs', file), 'utf8')),
  ]),
) as Record<Spec, SpecDocument>;

// The specifications' own keywords (OpenAPI's `example`, `nullable`; formats such as float or unixtime) are not
// JSON Schema's: strict mode off, formats not checked. OpenAPI 3.0's `nullable` is one ajv knows.
const ajv = new Ajv({ strict: false, validateFormats: false, allErrors: true });
for (const [spec, document] of Object.entries(documents)) ajv.addSchema(document, spec);

const compiled = new Map<string, ValidateFunction>();

export function specDocument(spec: Spec): SpecDocument {
  return documents[spec];
}

/** The errors of `value` against the spec's schema `name` (empty when it conforms). */
export function specErrors(spec: Spec, name: string, value: unknown): string[] {
  const ref = `${spec}#/components/schemas/${name}`;
  if (!(name in documents[spec].components.schemas)) throw new Error(`${specFiles[spec]} has no schema ${name}`);
  let validate = compiled.get(ref);
  if (!validate) compiled.set(ref, (validate = ajv.compile({ $ref: ref })));
  validate(value);
  return (validate.errors ?? []).map((error) => `${error.instancePath || '(root)'} ${error.message}`);
}

/** Asserts that `value` conforms to the spec's schema `name`. */
export function expectConforms(spec: Spec, name: string, value: unknown, what = name): void {
  expect(specErrors(spec, name, value), `${what} against ${spec} ${documents[spec].info.version} ${name}`).toEqual([]);
}

/** The `example` of a property of a spec schema (the spec's own request examples). */
export function specExample(spec: Spec, schema: string, property: string): unknown {
  const properties = documents[spec].components.schemas[schema]?.properties as
    Record<string, { example?: unknown }> | undefined;
  const example = properties?.[property]?.example;
  if (example === undefined) throw new Error(`${specFiles[spec]} gives no example of ${schema}.${property}`);
  return example;
}
