/**
 * The Hugging Face Hub as a file server: the files of a repository at a revision and the commit it
 * is (`{endpoint}/api/models/{repo}/revision/{revision}?blobs=true`, what huggingface_hub's
 * `model_info(..., files_metadata=True)` asks), where a file is
 * (`{endpoint}/{repo}/resolve/{revision}/{path}`), what the Hub says about it (size, checksum), and
 * its bytes from an offset. Works against mirrors that speak the same protocol (HF_ENDPOINT).
 *
 * The listing gives, per file (`siblings`): `rfilename`, `size`, `blobId` (the git blob sha1) and,
 * for files stored with Git LFS, `lfs: { sha256, size, pointerSize }`.
 *
 * What the Hub's resolve answer says about a file, as huggingface_hub reads it:
 * - a file stored with Git LFS (model weights): a redirect to a CDN whose `X-Linked-Etag` is the
 *   file's sha256 and `X-Linked-Size` its size;
 * - any other file: 200 with `ETag` the git blob sha1 of the content and `Content-Length` its size.
 */
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';

export const DEFAULT_HUB_ENDPOINT = 'https://huggingface.co';

export interface HubOptions {
  /** Base URL of the Hub or a mirror. */
  endpoint: string;
  /** A Hugging Face access token, sent as `Authorization: Bearer` (gated and private repositories). */
  token?: string;
}

/** The Hub endpoint and token from a setting and the environment variables huggingface_hub reads. */
export function hubOptions(
  endpointSetting: string | null | undefined,
  env: NodeJS.ProcessEnv = process.env,
): HubOptions {
  const endpoint = (endpointSetting || env.HF_ENDPOINT || DEFAULT_HUB_ENDPOINT).replace(/\/+$/, '');
  const token = env.HF_TOKEN?.trim() || undefined;
  return { endpoint, token };
}

/** What the Hub says about one file, before downloading it. */
export interface RemoteFile {
  repo: string;
  revision: string;
  path: string;
  url: string;
  /** Bytes, when the Hub says (X-Linked-Size, or Content-Length of a direct answer). */
  size?: number;
  /** The checksum the content must have, when the Hub gives one. */
  checksum?: Checksum;
  /** Who vouches for the size and checksum, in messages (default: the Hub). */
  authority?: string;
}

export interface Checksum {
  /** sha256 for LFS files; git-sha1 (the git blob hash) for the others. */
  algorithm: 'sha256' | 'git-sha1';
  hex: string;
}

/** One file of a repository's listing. */
export interface ListedFile {
  path: string;
  size?: number;
  /** The git blob sha1: of the content for regular files, of the LFS pointer for LFS files. */
  blobId?: string;
  lfs?: { sha256: string; size: number };
}

/** The files of a repository at a revision, and the commit that revision is. */
export interface RepoListing {
  repo: string;
  /** The requested revision, as asked. */
  revision: string;
  /** The commit sha the revision resolved to. */
  commit: string;
  files: ListedFile[];
}

/** A refusal or failure of the Hub, with a message that says what to do about it. */
export class HubError extends Error {
  override name = 'HubError';
  constructor(
    message: string,
    /** The HTTP status, when the Hub answered. */
    readonly status?: number,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

export class Hub {
  constructor(readonly options: HubOptions) {}

  fileUrl(repo: string, revision: string, path: string): string {
    const encodedPath = path.split('/').map(encodeURIComponent).join('/');
    return `${this.options.endpoint}/${repo}/resolve/${encodeURIComponent(revision)}/${encodedPath}`;
  }

  /** The repository's files at `revision` and the commit it resolves to (one API call). */
  async listing(repo: string, revision: string, signal?: AbortSignal): Promise<RepoListing> {
    const url = `${this.options.endpoint}/api/models/${repo}/revision/${encodeURIComponent(revision)}?blobs=true`;
    const response = await this.request(url, { method: 'GET', redirect: 'follow', signal }, { repo, revision });
    let body: { sha?: unknown; siblings?: unknown };
    try {
      body = (await response.json()) as typeof body;
    } catch (error) {
      throw new HubError(
        `${url} did not answer JSON: is ${this.options.endpoint} a Hugging Face Hub?`,
        response.status,
        { cause: error },
      );
    }
    if (typeof body?.sha !== 'string' || !/^[0-9a-f]{40}$/.test(body.sha) || !Array.isArray(body.siblings)) {
      throw new HubError(
        `${url} answered without a commit sha and a file list: is ${this.options.endpoint} a Hugging Face Hub?`,
        response.status,
      );
    }
    const files = (
      body.siblings as Array<{
        rfilename?: unknown;
        size?: unknown;
        blobId?: unknown;
        lfs?: { sha256?: unknown; size?: unknown } | null;
      }>
    )
      .filter((sibling) => typeof sibling?.rfilename === 'string')
      .map((sibling): ListedFile => ({
        path: sibling.rfilename as string,
        size: typeof sibling.size === 'number' ? sibling.size : undefined,
        blobId: typeof sibling.blobId === 'string' ? sibling.blobId : undefined,
        lfs:
          typeof sibling.lfs?.sha256 === 'string' && typeof sibling.lfs.size === 'number'
            ? { sha256: sibling.lfs.sha256, size: sibling.lfs.size }
            : undefined,
      }));
    return { repo, revision, commit: body.sha, files };
  }

  /**
   * A listed file as a download: its URL at the commit, its size and checksum from the listing
   * (sha256 for LFS files, the git blob sha1 for the others). A listing without them (a mirror
   * that ignores `blobs=true`) costs a HEAD per file instead.
   */
  async remoteFile(listing: RepoListing, file: ListedFile, signal?: AbortSignal): Promise<RemoteFile> {
    const size = file.lfs?.size ?? file.size;
    const checksum: Checksum | undefined = file.lfs
      ? { algorithm: 'sha256', hex: file.lfs.sha256.toLowerCase() }
      : file.blobId && /^[0-9a-f]{40}$/i.test(file.blobId)
        ? { algorithm: 'git-sha1', hex: file.blobId.toLowerCase() }
        : undefined;
    if (size === undefined || checksum === undefined)
      return this.metadata(listing.repo, listing.commit, file.path, signal);
    return {
      repo: listing.repo,
      revision: listing.commit,
      path: file.path,
      url: this.fileUrl(listing.repo, listing.commit, file.path),
      size,
      checksum,
    };
  }

  /**
   * HEADs the file without following the redirect to the CDN, since the checksum headers are on
   * the Hub's own answer. Relative redirects (a renamed repository) are followed.
   */
  async metadata(repo: string, revision: string, path: string, signal?: AbortSignal): Promise<RemoteFile> {
    const url = this.fileUrl(repo, revision, path);
    let target = url;
    for (let hop = 0; ; hop++) {
      const response = await this.request(
        target,
        { method: 'HEAD', redirect: 'manual', signal },
        { repo, revision, path },
      );
      const location = response.headers.get('location');
      const isRedirect = response.status >= 300 && response.status < 400 && location;
      if (
        isRedirect &&
        hop < 5 &&
        new URL(location, target).origin === new URL(target).origin &&
        !response.headers.has('x-linked-etag')
      ) {
        target = new URL(location, target).href;
        continue;
      }
      const headers = response.headers;
      const linkedSize = headers.get('x-linked-size');
      const length = isRedirect ? null : headers.get('content-length');
      const size = linkedSize ?? length;
      return {
        repo,
        revision,
        path,
        url,
        size: size === null ? undefined : Number(size),
        checksum: checksumOf(headers),
      };
    }
  }

  /**
   * GETs the file's bytes from `offset` on (a Range request), following redirects. Node's fetch
   * drops the Authorization header when a redirect leaves the Hub's origin, so the token never
   * reaches the CDN. The answer may be 206 (the range) or 200 (the whole file: the server ignored
   * the range); the caller checks which.
   */
  async open(file: RemoteFile, offset: number, signal?: AbortSignal): Promise<Response> {
    const headers: Record<string, string> = offset > 0 ? { range: `bytes=${offset}-` } : {};
    const response = await this.request(
      file.url,
      { method: 'GET', redirect: 'follow', headers, signal },
      file,
      offset > 0,
    );
    if (!response.body)
      throw new HubError(`${file.path}: the Hub answered ${response.status} without a body.`, response.status);
    return response;
  }

  private async request(
    url: string,
    init: Omit<RequestInit, 'headers'> & { headers?: Record<string, string> },
    where: { repo: string; revision: string; path?: string },
    acceptRangeError = false,
  ): Promise<Response> {
    const headers: Record<string, string> = {
      // Sizes and checksums are of the stored bytes: no transparent compression.
      'accept-encoding': 'identity',
      'user-agent': 'onnx-gateway',
      ...init.headers,
    };
    if (this.options.token) headers.authorization = `Bearer ${this.options.token}`;
    let response: Response;
    try {
      response = await fetch(url, { ...init, headers });
    } catch (error) {
      if ((error as Error).name === 'AbortError') throw error;
      const cause = (error as { cause?: { message?: string } }).cause?.message;
      throw new HubError(`Can not reach ${this.options.endpoint}: ${cause ?? (error as Error).message}.`, undefined, {
        cause: error,
      });
    }
    if (
      response.ok ||
      (response.status >= 300 && response.status < 400) ||
      (acceptRangeError && response.status === 416)
    )
      return response;
    await response.body?.cancel();
    throw new HubError(this.refusal(response, where), response.status);
  }

  /** The Hub's refusal in words, with its own error code and message when it sends them. */
  private refusal(
    response: Response,
    { repo, revision, path }: { repo: string; revision: string; path?: string },
  ): string {
    const code = response.headers.get('x-error-code');
    const said = response.headers.get('x-error-message');
    const detail = said ? ` The Hub says: ${said}` : '';
    const what = `${repo}${path ? `/${path}` : ''} at revision ${revision}`;
    if (code === 'RepoNotFound') {
      // The Hub answers 401 for a repository it does not show to an anonymous client, existing or not.
      const advice = this.options.token
        ? 'Check the id (owner/name, as on its Hub page).'
        : 'Check the id (owner/name, as on its Hub page); if it is private, set HF_TOKEN to an access token with read access (https://huggingface.co/settings/tokens).';
      return `The Hub has no repository ${repo} (${response.status} RepoNotFound). ${advice}${detail}`;
    }
    if (response.status === 401 || response.status === 403 || code === 'GatedRepo') {
      const advice = this.options.token
        ? "The token in HF_TOKEN has no access to it: accept the model's terms on its Hub page, or use a token with read access."
        : 'The repository is gated, private or does not exist: set HF_TOKEN to an access token with read access (https://huggingface.co/settings/tokens).';
      return `The Hub refused ${what} (${response.status}${code ? ` ${code}` : ''}). ${advice}${detail}`;
    }
    if (response.status === 404) {
      const which =
        code === 'RevisionNotFound'
          ? 'the revision does not exist'
          : code === 'RepoNotFound'
            ? 'the repository does not exist'
            : 'no such file';
      return `The Hub has no ${what} (404: ${which}).${detail}`;
    }
    return `The Hub answered ${response.status} ${response.statusText} for ${what}.${detail}`;
  }
}

/** The checksum in the answer's headers: X-Linked-Etag (LFS sha256) first, then ETag. */
function checksumOf(headers: Headers): Checksum | undefined {
  const linked = normalizeEtag(headers.get('x-linked-etag'));
  if (linked && /^[0-9a-f]{64}$/.test(linked)) return { algorithm: 'sha256', hex: linked };
  const etag = normalizeEtag(headers.get('etag'));
  if (!etag) return undefined;
  if (/^[0-9a-f]{64}$/.test(etag)) return { algorithm: 'sha256', hex: etag };
  if (/^[0-9a-f]{40}$/.test(etag)) return { algorithm: 'git-sha1', hex: etag };
  // Any other ETag (a mirror's own) says nothing about the content: the size has to do.
  return undefined;
}

function normalizeEtag(value: string | null): string | undefined {
  if (!value) return undefined;
  return value.replace(/^W\//, '').replace(/^"|"$/g, '').toLowerCase();
}

/** The file's checksum in the given algorithm; git-sha1 hashes `blob <size>\0` before the bytes, as git does. */
export async function fileChecksum(path: string, algorithm: Checksum['algorithm'], size: number): Promise<string> {
  const hash = createHash(algorithm === 'sha256' ? 'sha256' : 'sha1');
  if (algorithm === 'git-sha1') hash.update(`blob ${size}\0`);
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
  return hash.digest('hex');
}
