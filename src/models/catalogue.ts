/**
 * The catalogue: manifests of known models, one JSON file each in the top-level `models/` folder.
 * A manifest says where a model comes from and how to use it; the files themselves (read by the
 * registry) have the last word on sizes and shapes.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { BeforeCut } from '../vectors/normalize.js';
import { poolings, type Pooling } from '../vectors/pooling.js';
import { ModelFilesError, type Task } from './facts.js';

export type { Task } from './facts.js';
export type { Pooling } from '../vectors/pooling.js';
export type { BeforeCut } from '../vectors/normalize.js';

export interface HubSource {
  kind: 'hub';
  /** The Hub repository, `owner/name`: the manifest's id is an alias of it. */
  repo: string;
  /** The pinned commit; absent for a model listed without one checked (pulls take `main`, and the lock file records the commit). */
  revision?: string;
  /** The files to fetch; absent, the Hub's listing of the revision decides. */
  files?: string[];
}
export interface GeneratedSource {
  kind: 'generated';
  command: string;
}

export interface Manifest {
  id: string;
  task: Task;
  /** The catalogue's default model for its task (served when no models are configured). */
  default?: boolean;
  description?: string;
  source: HubSource | GeneratedSource;
  pooling?: Pooling;
  normalize?: boolean;
  maxTokens?: number;
  dimensions?: number;
  matryoshkaDimensions?: number[];
  /**
   * What the model's card does to the full-width vector before a Matryoshka cut (`dimensions`):
   * nomic-embed-text-v1.5's layer norm. Absent: the cut is the first N components, L2-normalised.
   */
  beforeCut?: BeforeCut;
  /**
   * The model's prompts by name (query, document, ...): used when its files declare none, as for
   * models whose prefixes are only documented (e5's "query: ", bge's query instruction).
   */
  prompts?: Record<string, string>;
  /** The architecture family, as the model table of docs/models.md names it. */
  family?: string;
  licence?: string;
  /** A moderation classifier: how its labels answer /v1/moderations. */
  moderation?: ModerationTable;
  /**
   * How its serving is checked here: `stand-in` (an exact-interface stand-in of this repository
   * against golden outputs), `family` (a stand-in of its architecture family), `none`.
   */
  verified?: 'stand-in' | 'family' | 'none';
}

/** The categories of OpenAI's moderation API, in its order. */
export const moderationCategories = [
  'sexual',
  'sexual/minors',
  'harassment',
  'harassment/threatening',
  'hate',
  'hate/threatening',
  'illicit',
  'illicit/violent',
  'self-harm',
  'self-harm/intent',
  'self-harm/instructions',
  'violence',
  'violence/graphic',
] as const;
export type ModerationCategory = (typeof moderationCategories)[number];

/**
 * How a moderation classifier's labels become OpenAI's categories: `categories` maps a label to
 * its OpenAI category, or to null for a label that is no harm (KoalaAI's "OK": never flags, not
 * returned). A label the table leaves out is returned under its own name. Several labels on one
 * category score as the highest of them. An input is flagged when a category scores `threshold`
 * or more (default 0.5).
 */
export interface ModerationTable {
  categories: Record<string, ModerationCategory | null>;
  threshold?: number;
}

/** The manifests folder shipped with the project (two levels up from src/models or dist/models). */
export const manifestsDir = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'models');

export class Catalogue {
  private readonly manifests = new Map<string, Manifest>();

  constructor(manifests: Manifest[]) {
    for (const manifest of manifests) this.manifests.set(manifest.id, manifest);
  }

  static load(dir: string = manifestsDir): Catalogue {
    const manifests = readdirSync(dir)
      .filter((name) => name.endsWith('.json'))
      .sort()
      .map((name) => validateManifest(JSON.parse(readFileSync(join(dir, name), 'utf8')), name));
    return new Catalogue(manifests);
  }

  /** The manifest of a short id or of a Hub repo id. */
  get(id: string): Manifest | undefined {
    return this.manifests.get(id) ?? this.list().find((m) => m.source.kind === 'hub' && m.source.repo === id);
  }

  list(): Manifest[] {
    return [...this.manifests.values()];
  }

  /** Ids served when no models are configured: the default of each task. */
  defaults(): string[] {
    return this.list()
      .filter((m) => m.default)
      .map((m) => m.id);
  }
}

/** The shipped manifests plus those in `extraDir` (the manifestsDir setting); an id there replaces a shipped one. */
export function loadCatalogue(extraDir?: string | null): Catalogue {
  const shipped = Catalogue.load();
  if (!extraDir) return shipped;
  if (!existsSync(extraDir)) throw new ModelFilesError(`The manifests dir ${extraDir} does not exist.`);
  return new Catalogue([...shipped.list(), ...Catalogue.load(extraDir).list()]);
}

function validateManifest(value: unknown, file: string): Manifest {
  const m = value as Manifest;
  const fail = (why: string): never => {
    throw new Error(`models/${file}: ${why}`);
  };
  if (typeof m !== 'object' || m === null) fail('not a JSON object');
  if (typeof m.id !== 'string' || !/^[A-Za-z0-9][A-Za-z0-9._-]*$/.test(m.id)) fail('id must be a plain name');
  if (m.task !== 'embedding' && m.task !== 'rerank' && m.task !== 'classify')
    fail('task must be "embedding", "rerank" or "classify"');
  if (!m.source || (m.source.kind !== 'hub' && m.source.kind !== 'generated'))
    fail('source.kind must be "hub" or "generated"');
  if (m.source.kind === 'hub' && !/^[\w.-]+\/[\w.-]+$/.test(m.source.repo ?? ''))
    fail('hub source needs repo (owner/name)');
  if (m.source.kind === 'hub' && m.source.revision !== undefined && !/^[0-9a-f]{40}$/.test(m.source.revision))
    fail('source.revision must be a 40-hex commit');
  if (m.source.kind === 'hub' && m.source.revision === undefined && m.verified !== 'none')
    fail('a hub source without a pinned revision must say "verified": "none"');
  if (m.moderation !== undefined) validateModeration(m, fail);
  if (m.source.kind === 'hub' && m.source.files !== undefined && !Array.isArray(m.source.files))
    fail('source.files must be a list of paths');
  if (m.pooling !== undefined && !poolings.includes(m.pooling)) fail(`pooling must be one of ${poolings.join(', ')}`);
  if (m.beforeCut !== undefined) validateBeforeCut(m, fail);
  return m;
}

function validateBeforeCut(m: Manifest, fail: (why: string) => never): void {
  const before = m.beforeCut!;
  if (m.task !== 'embedding') fail('beforeCut belongs to an "embedding" model');
  if (typeof before !== 'object' || before === null || before.step !== 'layer-norm')
    fail('beforeCut.step must be "layer-norm"');
  if (typeof before.epsilon !== 'number' || !(before.epsilon > 0) || !Number.isFinite(before.epsilon))
    fail("beforeCut.epsilon must be a positive number (torch's layer_norm eps: 1e-5)");
}

function validateModeration(m: Manifest, fail: (why: string) => never): void {
  const table = m.moderation!;
  if (m.task !== 'classify') fail('a moderation table belongs to a "classify" model');
  if (typeof table.categories !== 'object' || table.categories === null || Object.keys(table.categories).length === 0)
    fail('moderation.categories must map labels to OpenAI categories (or null)');
  for (const [label, category] of Object.entries(table.categories)) {
    if (category !== null && !(moderationCategories as readonly string[]).includes(category))
      fail(
        `moderation.categories["${label}"]: "${category}" is not one of OpenAI's categories (${moderationCategories.join(', ')}) or null`,
      );
  }
  if (
    table.threshold !== undefined &&
    !(typeof table.threshold === 'number' && table.threshold > 0 && table.threshold < 1)
  )
    fail('moderation.threshold must be a number between 0 and 1');
}
