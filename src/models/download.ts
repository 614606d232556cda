/**
 * Pulls a model from the Hugging Face Hub by its repository id (or a catalogue id, an alias of its
 * repository) into `<modelsDir>/<owner>/<name>`.
 *
 * - The file list comes from the Hub's API for the revision, and the commit it answers is the one
 *   every file is fetched at. Taken: the configuration, tokenizer and sentence-transformers files
 *   that exist, and one ONNX graph per variant asked for, with its external-data files.
 * - Locked: the commit and every file's size and checksum are written to the folder's lock file;
 *   the next pull re-uses that commit unless a revision is named or `update` is set.
 * - Refused before anything is installed, with what to do: no ONNX export, an architecture that
 *   needs remote code, the variant missing, anything that keeps the server from serving the
 *   model exactly (facts.ts: a Dense module the graph lacks, an unknown or combined pooling, ...).
 * - Staged: files go into a hidden folder beside the model folder (same file system, so the final
 *   rename is atomic) and reach the model folder only once every file has been verified and the
 *   model's files checked. The graphs, then the lock file, are moved in last.
 * - Verified and resumable file by file (file-transfer.ts).
 */
import { existsSync, readFileSync } from 'node:fs';
import { copyFile, mkdir, readdir, rename, rm, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { Config } from '../config.js';
import { isAccelerator } from '../devices.js';
import { loadCatalogue, type Catalogue, type Manifest } from './catalogue.js';
import { ModelFilesError, readModelFacts, type ModelFacts } from './facts.js';
import { DownloadError, stageFile, verify, type TransferOptions } from './file-transfer.js';
import { Hub, HubError, hubOptions, type ListedFile, type RemoteFile, type RepoListing } from './hub.js';
import { formatLock, LOCK_FILE, readLock, type LockedFile, type ModelLock } from './lock.js';
import { filesIn, isRepoId, modelDir, stagingDirOf } from './paths.js';
import { wantedDevices } from './registry.js';
import {
  formatBytes,
  progressFor,
  silentProgress,
  type DownloadProgress,
  type FileOutcome,
} from './download-progress.js';
import {
  isSafePath,
  METADATA_FILES,
  missingVariantRefusal,
  moduleConfigFiles,
  noOnnxRefusal,
  variantFiles,
} from './repo-files.js';
import { findVariantGraph, parseServedId, parseVariant, type Variant } from './variants.js';

export { DownloadError } from './file-transfer.js';

/** A model the Hub has but this server can not serve as it is; says why and what to do. */
export class PullRefusal extends DownloadError {
  override name = 'PullRefusal';
  constructor(
    message: string,
    readonly reason: 'no-onnx' | 'variant-missing' | 'not-servable',
    /** For `variant-missing`: the variant the repository lacks. */
    readonly variant?: Variant,
  ) {
    super(message);
  }
}

/** A pull request that names no model of the Hub; a usage error. */
export class PullSpecError extends Error {
  override name = 'PullSpecError';
}

/** What to pull: a repository into a model folder. */
export interface PullTarget {
  /** The id as the user named it: a catalogue id or a repository id. */
  id: string;
  repo: string;
  /** A revision the user named (`@revision`): it overrides the lock file and the catalogue's pin. */
  revision?: string;
  manifest?: Manifest;
  dir: string;
}

export interface PullOptions extends TransferOptions {
  modelsDir: string;
  progress?: DownloadProgress;
  /** The variants to pull (default fp32). Variants already in the lock file are pulled again with them. */
  variants?: Variant[];
  /** Resolve the default revision again (the catalogue's pin, else `main`) instead of re-using the locked commit. */
  update?: boolean;
  /** What the pull decided (the revision, the graph of each variant), a line each. */
  log?: (line: string) => void;
}

export interface PullReport {
  id: string;
  repo: string;
  dir: string;
  lock: ModelLock;
  files: Array<{ path: string } & FileOutcome>;
}

/**
 * `<id>[@revision][:variant]` as a pull: a catalogue id (an alias of its repository) or a Hub
 * repository id `owner/name`.
 */
export function parsePullSpec(
  spec: string,
  catalogue: Catalogue,
  modelsDir: string,
): { target: PullTarget; variant?: Variant } {
  let rest = spec.trim();
  let variant: Variant | undefined;
  const colon = rest.lastIndexOf(':');
  if (colon >= 0) {
    try {
      variant = parseVariant(rest.slice(colon + 1));
    } catch (error) {
      throw new PullSpecError(`${spec}: ${(error as Error).message}`);
    }
    rest = rest.slice(0, colon);
  }
  const at = rest.indexOf('@');
  const id = at >= 0 ? rest.slice(0, at) : rest;
  const revision = at >= 0 ? rest.slice(at + 1) : undefined;
  if (revision === '') throw new PullSpecError(`${spec}: name a revision after "@" (a branch, tag or commit).`);
  const manifest = catalogue.get(id);
  if (manifest?.source.kind === 'generated') {
    throw new PullSpecError(
      `"${id}" is not on the Hub: it is generated locally with: ${manifest.source.command.replace('<models-dir>', modelsDir)}`,
    );
  }
  const target = pullTarget(id, catalogue, modelsDir, revision);
  if (!target) {
    const known = catalogue
      .list()
      .filter((m) => m.source.kind === 'hub')
      .map((m) => m.id);
    throw new PullSpecError(
      `No manifest names "${id}" and it is not a Hub repository id (owner/name, as in BAAI/bge-small-en-v1.5). Catalogue ids: ${known.join(', ')}.`,
    );
  }
  return { target, variant };
}

/** The pull of a catalogue or repository id; undefined for ids that are not on the Hub (local folders, generated models). */
export function pullTarget(
  id: string,
  catalogue: Catalogue,
  modelsDir: string,
  revision?: string,
): PullTarget | undefined {
  const manifest = catalogue.get(id);
  const repo =
    manifest?.source.kind === 'hub' ? manifest.source.repo : manifest === undefined && isRepoId(id) ? id : undefined;
  if (!repo) return undefined;
  return { id, repo, revision, manifest, dir: modelDir(modelsDir, id, catalogue) };
}

/** "id (owner/name)", or the repository alone when it is the id. */
export function describeTarget(target: PullTarget): string {
  return target.id === target.repo ? target.repo : `${target.id} (${target.repo})`;
}

/** "<id>: downloaded 3 of 9 files (133.5 MB), verified, commit <sha> (fp32: onnx/model.onnx), in <dir>" */
export function formatPullReport(report: PullReport): string {
  const fetched = report.files.filter((f) => f.status === 'downloaded');
  const bytes = fetched.reduce((sum, f) => sum + f.bytes, 0);
  const what =
    fetched.length > 0
      ? `downloaded ${fetched.length} of ${report.files.length} files (${formatBytes(bytes)})`
      : `all ${report.files.length} files present`;
  const graphs = Object.entries(report.lock.variants)
    .map(([variant, graph]) => `${variant}: ${graph}`)
    .join(', ');
  return `${report.id}: ${what}, verified, commit ${report.lock.commit} (${graphs}), in ${report.dir}`;
}

/** The pull of each model folder under way in this process. */
const pullsUnderWay = new Map<string, Promise<unknown>>();

/**
 * Fetches the model's files into its folder; files already there that match the Hub are kept.
 * Pulls of one folder run one after another (two at once would write the same partial files):
 * the second finds what the first fetched.
 */
export async function pullModel(target: PullTarget, options: PullOptions): Promise<PullReport> {
  const before = pullsUnderWay.get(target.dir);
  const pull = (async () => {
    await before; // settled, never rejected
    options.signal?.throwIfAborted();
    return pullInto(target, options);
  })();
  const settled = pull.catch(() => {});
  pullsUnderWay.set(target.dir, settled);
  try {
    return await pull;
  } finally {
    if (pullsUnderWay.get(target.dir) === settled) pullsUnderWay.delete(target.dir);
  }
}

async function pullInto(target: PullTarget, options: PullOptions): Promise<PullReport> {
  const progress = options.progress ?? silentProgress;
  const log = options.log ?? (() => {});
  const staging = stagingDirOf(target.dir);
  const previous = lockOf(target);
  const { revision, requested, note } = revisionToPull(target, previous, options.update);
  try {
    const listing = await options.hub.listing(target.repo, revision, options.signal);
    log(note(listing.commit));
    const pull = new Pull(target, listing, staging, progress, options);
    const lock = await pull.run(
      requested,
      options.variants ?? ['fp32'],
      Object.keys(previous?.variants ?? {}) as Variant[],
      log,
    );
    await install(staging, target.dir, pull.staged, lock, previous);
    return { id: target.id, repo: target.repo, dir: target.dir, lock, files: pull.outcomes };
  } catch (error) {
    // Nothing of a refused model is kept; a broken transfer keeps its partial file for the next pull.
    if (error instanceof PullRefusal) await rm(staging, { recursive: true, force: true });
    if (error instanceof HubError) throw new DownloadError(error.message, { cause: error });
    throw error;
  } finally {
    progress.stop();
  }
}

/** The lock file of the target's folder, when it is of the same repository. */
function lockOf(target: PullTarget): ModelLock | undefined {
  try {
    const lock = readLock(target.dir);
    return lock && lock.repo.toLowerCase() === target.repo.toLowerCase() ? lock : undefined;
  } catch {
    return undefined; // an unreadable lock is rewritten by this pull
  }
}

/** The revision to ask the Hub for: the one named, else the locked commit, else the catalogue's pin, else main. */
function revisionToPull(
  target: PullTarget,
  lock: ModelLock | undefined,
  update = false,
): { revision: string; requested: string; note: (commit: string) => string } {
  const short = (commit: string) => commit.slice(0, 7);
  const is = (revision: string, commit: string) =>
    revision === commit ? `${target.repo}: commit ${commit}` : `${target.repo}: ${revision} is commit ${commit}`;
  if (target.revision)
    return {
      revision: target.revision,
      requested: target.revision,
      note: (commit) => `${is(target.revision!, commit)}, as asked`,
    };
  const pin = target.manifest?.source.kind === 'hub' ? target.manifest.source.revision : undefined;
  if (lock && !update) {
    const moved =
      pin && pin !== lock.commit && pin !== lock.revision
        ? ` The catalogue pins ${short(pin)}: --update moves to it.`
        : '';
    return {
      revision: lock.commit,
      requested: lock.revision,
      note: (commit) =>
        `${target.repo}: commit ${commit}, as locked in ${LOCK_FILE} (pulled from ${lock.revision} on ${lock.pulledAt.slice(0, 10)}); ` +
        `--update or @<revision> moves it.${moved}`,
    };
  }
  if (pin) return { revision: pin, requested: pin, note: (commit) => `${is(pin, commit)}, as the catalogue pins` };
  return { revision: 'main', requested: 'main', note: (commit) => is('main', commit) };
}

/** One pull's files: fetched into the staging folder, or kept from the model folder when they match. */
class Pull {
  readonly outcomes: Array<{ path: string } & FileOutcome> = [];
  /** Files fetched into the staging folder. */
  readonly staged: string[] = [];
  private readonly taken = new Map<string, LockedFile>();
  private readonly listed: Map<string, ListedFile>;

  constructor(
    private readonly target: PullTarget,
    private readonly listing: RepoListing,
    private readonly staging: string,
    private readonly progress: DownloadProgress,
    private readonly options: PullOptions,
  ) {
    // A listing names files of the repository: none may land outside the model folder.
    this.listed = new Map(listing.files.filter((file) => isSafePath(file.path)).map((file) => [file.path, file]));
  }

  /**
   * Takes the files of the `asked` variants and of those `locked` before (kept up to date with
   * them, or dropped when the commit has them no more), checks them, and returns the new lock.
   */
  async run(requested: string, asked: Variant[], locked: Variant[], log: (line: string) => void): Promise<ModelLock> {
    const paths = [...this.listed.keys()];
    const where = { id: this.target.id, repo: this.target.repo, commit: this.listing.commit, dir: this.target.dir };
    // What the listing alone can refuse is refused before any large file is fetched.
    if (!paths.some((path) => path.endsWith('.onnx'))) {
      if (this.listed.has('config.json')) await this.take('config.json');
      throw new PullRefusal(
        noOnnxRefusal(where, this.json('config.json') as Record<string, unknown> | undefined),
        'no-onnx',
      );
    }
    const graphs: Partial<Record<Variant, string>> = {};
    /** A two-tower export's vision graphs, taken with the text graphs the lock names. */
    const towers: string[] = [];
    const data: string[] = [];
    for (const variant of new Set([...asked, ...locked])) {
      const files = variantFiles(variant, paths);
      if (!files) {
        if (asked.includes(variant))
          throw new PullRefusal(missingVariantRefusal(where, variant, paths), 'variant-missing', variant);
        log(`${variant}: no such graph at commit ${this.listing.commit.slice(0, 7)}; dropped from the lock file`);
        continue;
      }
      log(
        `${variant}: ${files.graph}${files.data.length > 0 ? ` with its external data ${files.data.join(', ')}` : ''}`,
      );
      graphs[variant] = files.graph;
      towers.push(...files.towers);
      data.push(...files.data);
    }
    for (const path of METADATA_FILES) if (this.listed.has(path)) await this.take(path);
    for (const path of moduleConfigFiles(this.json('modules.json'))) if (this.listed.has(path)) await this.take(path);
    // The graphs before their data: what they contain decides whether the data is worth fetching,
    // and which files it is (a graph names its external-data files, whatever they are called).
    for (const tower of towers) await this.take(tower);
    for (const graph of new Set(Object.values(graphs))) {
      await this.take(graph);
      const folder = graph.slice(0, graph.lastIndexOf('/') + 1);
      const facts = await this.checkFacts(graph);
      // A vision tower's graph is in the text tower's folder: its data files are named from there too.
      for (const location of [...facts.externalData, ...(facts.multimodal?.vision.externalData ?? [])]) {
        const path = `${folder}${location}`;
        if (!this.listed.has(path)) {
          throw new PullRefusal(
            `${this.target.repo} at ${this.listing.commit.slice(0, 7)}: ${graph} keeps weights in ${path}, which the repository does not have. Nothing was installed.`,
            'not-servable',
          );
        }
        data.push(path);
      }
    }
    for (const path of new Set(data)) await this.take(path);
    return {
      version: 1,
      repo: this.target.repo,
      revision: requested,
      commit: this.listing.commit,
      variants: graphs,
      files: [...this.taken.values()],
      pulledAt: new Date().toISOString(),
    };
  }

  /** Fetches a listed file into the staging folder, unless the model folder has it as the Hub says. */
  private async take(path: string): Promise<void> {
    if (this.taken.has(path)) return;
    const { hub, signal, force } = this.options;
    const remote = await hub.remoteFile(this.listing, this.listed.get(path)!, signal);
    let outcome: FileOutcome | undefined;
    if (!force && existsSync(join(this.target.dir, path))) {
      const check = await verify(join(this.target.dir, path), remote);
      if (check.ok)
        outcome = { status: 'present', bytes: check.bytes, verifiedBy: check.verifiedBy, checksum: remote.checksum };
    }
    if (!outcome) {
      outcome = await stageFile(remote, join(this.staging, path), this.progress, this.options);
      this.staged.push(path);
    }
    this.progress.finish(path, outcome);
    this.outcomes.push({ path, ...outcome });
    this.taken.set(path, lockedFile(remote, outcome.bytes));
  }

  /**
   * Reads the model's facts as the server will at start (facts.ts), so that a model it could not
   * serve exactly is refused before it is installed. They are read from one folder: the staging
   * folder, given copies of the small files the model folder already had (left behind at install).
   */
  private async checkFacts(graph: string): Promise<ModelFacts> {
    for (const path of this.taken.keys()) {
      if (this.staged.includes(path) || !path.endsWith('.json')) continue;
      await mkdir(dirname(join(this.staging, path)), { recursive: true });
      await copyFile(join(this.target.dir, path), join(this.staging, path));
    }
    try {
      return await readModelFacts(this.staging, this.local(graph), this.target.id, this.target.manifest?.task);
    } catch (error) {
      if (error instanceof ModelFilesError)
        throw new PullRefusal(`${error.message} Nothing was installed.`, 'not-servable');
      throw error;
    }
  }

  /** Where a taken file is now. */
  private local(path: string): string {
    return join(this.staged.includes(path) ? this.staging : this.target.dir, path);
  }

  /** A taken JSON file's content; undefined when it was not taken (the repository has none). */
  private json(path: string): unknown {
    if (!this.taken.has(path)) return undefined;
    try {
      return JSON.parse(readFileSync(this.local(path), 'utf8'));
    } catch (error) {
      throw new PullRefusal(
        `${this.target.repo}: ${path} at commit ${this.listing.commit.slice(0, 7)} is not valid JSON (${(error as Error).message}).`,
        'not-servable',
      );
    }
  }
}

function lockedFile(remote: RemoteFile, bytes: number): LockedFile {
  const file: LockedFile = { path: remote.path, size: bytes };
  if (remote.checksum?.algorithm === 'sha256') file.sha256 = remote.checksum.hex;
  if (remote.checksum?.algorithm === 'git-sha1') file.gitSha1 = remote.checksum.hex;
  return file;
}

/**
 * Moves the staged files and the lock file into the model folder. A new folder is the staging
 * folder renamed; an existing one gets the files one by one, graphs after the rest and the lock
 * file last, and loses the files of its old lock that the new one does not list.
 */
async function install(
  staging: string,
  dir: string,
  staged: string[],
  lock: ModelLock,
  previous: ModelLock | undefined,
): Promise<void> {
  await mkdir(staging, { recursive: true });
  await writeFile(join(staging, LOCK_FILE), formatLock(lock));
  const isGraph = (path: string) => path.endsWith('.onnx');
  const order = [...staged.filter((path) => !isGraph(path)), ...staged.filter(isGraph), LOCK_FILE];
  if (!existsSync(dir)) {
    // Only what this pull verified goes in: partial files and files of other pulls stay behind.
    const keep = new Set(order);
    for (const stray of filesIn(staging).filter((path) => !keep.has(path)))
      await rm(join(staging, stray), { force: true });
    await removeEmptyFolders(staging);
    await mkdir(dirname(dir), { recursive: true });
    await rename(staging, dir);
    return;
  }
  for (const path of order) {
    await mkdir(dirname(join(dir, path)), { recursive: true });
    await rename(join(staging, path), join(dir, path));
  }
  const listed = new Set(lock.files.map((file) => file.path));
  // readLock refused a previous lock with paths outside the folder; checked again where it deletes.
  for (const file of previous?.files ?? [])
    if (!listed.has(file.path) && isSafePath(file.path)) await rm(join(dir, file.path), { force: true });
  await rm(staging, { recursive: true, force: true });
}

async function removeEmptyFolders(dir: string): Promise<void> {
  const folders = (await readdir(dir, { recursive: true, withFileTypes: true }))
    .filter((entry) => entry.isDirectory())
    .map((entry) => join(entry.parentPath, entry.name));
  // Deepest first, so a folder whose subfolders were all empty goes too.
  for (const folder of folders.sort((a, b) => b.length - a.length)) {
    if ((await readdir(folder)).length === 0) await rm(folder, { recursive: true, force: true });
  }
}

/** Whether a model folder has the variant, all its locked files and a config: what the server needs to start without a pull. */
export function hasVariant(dir: string, variant: Variant): boolean {
  const files = new Set(filesIn(dir));
  let lock: ModelLock | undefined;
  try {
    lock = readLock(dir);
  } catch {
    return false;
  }
  // A graph made here (models quantize) counts as much as a pulled one.
  const graph = lock?.variants[variant] ?? findVariantGraph(variant, files);
  return (
    graph !== undefined &&
    files.has(graph) &&
    files.has('config.json') &&
    (lock?.files ?? []).every((file) => files.has(file.path))
  );
}

/**
 * Pulls the Hub models among `ids` (served ids: `<id>` means the default variant, `<id>:<variant>`
 * that one) whose folders lack the variant or a locked file. Used at server start, before the
 * registry loads the models. An int8 variant the repository lacks is made from fp32 by
 * `models quantize`, so for it the fp32 graph is pulled and the registry says how.
 */
export async function downloadMissing(
  ids: string[],
  catalogue: Catalogue,
  options: PullOptions & {
    defaultVariant?: Variant;
    onModel?: (target: PullTarget, variants: Variant[]) => void;
    /** The configured ids that run on an accelerator: where none of its graphs is here yet, such a model gets its fp16 one. */
    onAccelerator?: ReadonlySet<string>;
  },
): Promise<PullReport[]> {
  const wanted = new Map<string, { target: PullTarget; variants: Set<Variant> }>();
  // Variants chosen here rather than named: where the repository lacks one, its fp32 graph serves instead.
  const preferred = new Set<Variant>(['int8']);
  for (const id of ids.length > 0 ? ids : catalogue.defaults()) {
    let parsed: { baseId: string; variant: Variant };
    try {
      parsed = parseServedId(id, options.defaultVariant);
    } catch {
      continue; // the registry says what is wrong with the id
    }
    const target = pullTarget(parsed.baseId, catalogue, options.modelsDir);
    if (!target) continue;
    const entry = wanted.get(target.dir) ?? { target, variants: new Set<Variant>() };
    // As the registry serves it: on an accelerator the half-precision graph, where no variant is named. Not for a
    // model whose fp32 graph is here, so that such a server starts without the Hub.
    const half =
      options.onAccelerator?.has(id) &&
      !id.includes(':') &&
      parsed.variant === 'fp32' &&
      !hasVariant(target.dir, 'fp32');
    if (half) preferred.add('fp16');
    entry.variants.add(half ? 'fp16' : parsed.variant);
    wanted.set(target.dir, entry);
  }
  const reports: PullReport[] = [];
  for (const { target, variants } of wanted.values()) {
    let missing = [...variants].filter((variant) => !hasVariant(target.dir, variant));
    if (missing.length === 0) continue;
    options.onModel?.(target, missing);
    try {
      reports.push(await pullModel(target, { ...options, variants: missing }));
    } catch (error) {
      if (!(error instanceof PullRefusal && error.reason === 'variant-missing' && preferred.has(error.variant!)))
        throw error;
      const lacking = error.variant;
      missing = [...new Set(missing.map((variant) => (variant === lacking ? 'fp32' : variant)))].filter(
        (variant) => !hasVariant(target.dir, variant),
      );
      if (missing.length > 0) reports.push(await pullModel(target, { ...options, variants: missing }));
    }
  }
  return reports;
}

/** The server's start: the configured models' missing files, with progress on stderr. */
export async function downloadConfiguredModels(
  config: Pick<Config, 'models' | 'modelsDir' | 'manifestsDir' | 'hfEndpoint' | 'onnxVariant' | 'device' | 'devices'>,
  stream: NodeJS.WriteStream = process.stderr,
): Promise<PullReport[]> {
  const catalogue = loadCatalogue(config.manifestsDir);
  const devices = wantedDevices(config.models, config.device, config.devices, catalogue);
  return downloadMissing(config.models, catalogue, {
    onAccelerator: new Set([...devices].filter(([, device]) => isAccelerator(device)).map(([id]) => id)),
    modelsDir: config.modelsDir,
    hub: new Hub(hubOptions(config.hfEndpoint)),
    defaultVariant: parseVariant(config.onnxVariant),
    onModel: (target, variants) =>
      stream.write(`${describeTarget(target)}: ${variants.join(', ')} missing, downloading into ${target.dir}\n`),
    log: (line) => stream.write(`${line}\n`),
    progress: progressFor(stream),
  });
}
