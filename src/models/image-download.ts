/**
 * Downloads an image pipeline's graph from the URL its manifest names, verified by the manifest's
 * sha256, resumable and atomic like a Hub pull: the file is staged beside the pipeline's folder
 * and moved in only once it matches.
 */
import { existsSync } from 'node:fs';
import { mkdir, rename, rm } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import type { DownloadProgress, FileOutcome } from './download-progress.js';
import { silentProgress } from './download-progress.js';
import { DownloadError, stageFile, verify, type TransferOptions } from './file-transfer.js';
import { Hub, HubError, type RemoteFile } from './hub.js';
import { pipelineGraph, type ImageManifest } from './image-catalogue.js';
import { stagingDirOf } from './paths.js';

export interface ImagePullReport {
  id: string;
  dir: string;
  file: { path: string } & FileOutcome;
}

/** Fetches the pipeline's graph into `<imageModelsDir>/<id>/onnx/model.onnx`; a file already there that matches is kept. */
export async function pullImagePipeline(
  manifest: ImageManifest,
  options: Omit<TransferOptions, 'hub'> & { imageModelsDir: string; progress?: DownloadProgress },
): Promise<ImagePullReport> {
  const dir = resolve(options.imageModelsDir, manifest.id);
  const progress = options.progress ?? silentProgress;
  // The URL is not the Hub: no token goes with it.
  const hub = new Hub({ endpoint: new URL(manifest.source.url).origin });
  const remote: RemoteFile = {
    repo: manifest.id,
    revision: 'manifest',
    path: pipelineGraph,
    url: manifest.source.url,
    checksum: { algorithm: 'sha256', hex: manifest.source.sha256 },
    authority: 'its manifest',
  };
  const target = join(dir, pipelineGraph);
  try {
    if (!options.force && existsSync(target)) {
      const check = await verify(target, remote);
      if (check.ok) {
        const outcome: FileOutcome = {
          status: 'present',
          bytes: check.bytes,
          verifiedBy: check.verifiedBy,
          checksum: remote.checksum,
        };
        progress.finish(pipelineGraph, outcome);
        return { id: manifest.id, dir, file: { path: pipelineGraph, ...outcome } };
      }
    }
    const staging = stagingDirOf(dir);
    const outcome = await stageFile(remote, join(staging, pipelineGraph), progress, { ...options, hub });
    progress.finish(pipelineGraph, outcome);
    await mkdir(dirname(target), { recursive: true });
    await rename(join(staging, pipelineGraph), target);
    await rm(staging, { recursive: true, force: true });
    return { id: manifest.id, dir, file: { path: pipelineGraph, ...outcome } };
  } catch (error) {
    // The transfer says "the Hub" of any server that refuses: say which URL it was.
    const refusal = error instanceof HubError ? error : (error as Error).cause;
    if (refusal instanceof HubError)
      throw new DownloadError(
        `Image pipeline "${manifest.id}": ${manifest.source.url} could not be fetched (${refusal.status ?? refusal.message}).`,
        { cause: error },
      );
    throw error;
  } finally {
    progress.stop();
  }
}
