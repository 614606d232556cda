/**
 * The shapes of the JSON answers the tests read, as the wire has them (`res.json<T>()`), so that a
 * test that reaches for a field the answer does not have fails to type-check.
 */
import type { ErrorBody } from '../../src/errors.js';
import type { SearchImage, SearchResult } from '../../src/search/types.js';

export type { ErrorBody };

/** An embedding as any `encoding_format` gives it: floats, base64, quantized integers or sparse. */
export type Embedding = number[] | string | { indices: number[]; values: number[] };

export interface EmbeddingList {
  object: 'list';
  data: { object: 'embedding'; index: number; embedding: Embedding }[];
  model: string;
  usage: { prompt_tokens: number; total_tokens: number };
}

/** The float vectors of an embeddings answer (the default `encoding_format`). */
export const floatVectors = (body: EmbeddingList): number[][] => body.data.map((item) => item.embedding as number[]);

export interface RerankList {
  id: string;
  model: string;
  results: { index: number; relevance_score: number; document?: { text: string } }[];
  meta: {
    api_version: { version: string };
    tokens: { input_tokens: number; output_tokens: number };
    billed_units: { search_units: number };
  };
  usage: { total_tokens: number; prompt_tokens: number };
}

export interface ModelPlacement {
  device: string;
  sessions: number;
  threads_per_session: number;
  solo_threads: number;
  /** Text models only. */
  resident_bytes?: number;
}

export interface ModelCard {
  id: string;
  object: 'model';
  created: number;
  owned_by: string;
  task?: string;
  variant?: string;
  dimensions?: number;
  outputs?: string[];
  late_interaction?: boolean;
  max_tokens?: number;
  labels?: string[];
  scale?: number;
  ready: boolean;
  status?: string;
  placement?: ModelPlacement;
}

export interface ModelList {
  object: 'list';
  data: ModelCard[];
}

/** TEI's error body: its message and error type, with the catalogue's code. */
export interface TeiError {
  error: string;
  error_type: string;
  code: ErrorBody['error']['code'];
}

/** Ollama's error body: its message, with the catalogue's code. */
export interface OllamaError {
  error: string;
  code: ErrorBody['error']['code'];
}

export type { SearchResult };

/** A web search task: as created (the first fields), then as GET /v1/web-search/search/{id} answers it. */
export interface SearchTask {
  id: string;
  prompt: string;
  state: 'pending' | 'running' | 'succeeded' | 'failed' | 'cancelled';
  created_at: string;
  video: null;
  liked: null;
  estimate_wait_seconds: number;
  provider?: string;
  started_at?: string | null;
  finished_at?: string | null;
  results?: SearchResult[];
  images?: SearchImage[];
  markdown?: string;
  error?: { code: string; message: string };
}

/** An answer of POST /v1/images/edits: `b64_json` for the default `response_format`, `url` for `url`. */
export interface EditedImages {
  created: number;
  data: { b64_json?: string; url?: string; revised_prompt: string }[];
  background: 'transparent' | 'opaque';
  output_format: 'png' | 'jpeg' | 'webp';
  quality: 'low' | 'medium' | 'high';
  size: string;
  usage: {
    input_tokens: number;
    input_tokens_details: { image_tokens: number; text_tokens: number };
    output_tokens: number;
    output_tokens_details: { image_tokens: number; text_tokens: number };
    total_tokens: number;
  };
}
