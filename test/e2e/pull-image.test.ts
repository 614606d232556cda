/**
 * `models pull <image pipeline>`: the graph fetched from its manifest's URL, verified by the
 * manifest's sha256, installed atomically, then served.
 */
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DownloadError } from '../../src/models/file-transfer.js';
import { ImageCatalogue, validateImageManifest, type ImageManifest } from '../../src/models/image-catalogue.js';
import { ImageRegistry } from '../../src/models/image-registry.js';
import { pullImagePipeline } from '../../src/models/image-download.js';
import { writeTinyImageModels } from '../fixtures/tiny-image-model.js';

describe('pulling an image pipeline', () => {
  let server: Server;
  let base: string;
  let bytes: Buffer;
  let manifest: ImageManifest;
  const requests: Array<{ url: string; range?: string }> = [];

  beforeAll(async () => {
    const fixtures = mkdtempSync(join(tmpdir(), 'onnx-gateway-images-'));
    await writeTinyImageModels(fixtures);
    bytes = readFileSync(join(fixtures, 'tiny-upscaler', 'onnx', 'model.onnx'));
    server = createServer((req, res) => {
      requests.push({ url: req.url!, range: req.headers.range });
      if (req.url !== '/models/upscaler.onnx') return void res.writeHead(404).end();
      res.writeHead(200, { 'content-length': bytes.length, 'content-type': 'application/octet-stream' }).end(bytes);
    });
    await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const own = JSON.parse(readFileSync(join(fixtures, 'tiny-upscaler', 'pipeline.json'), 'utf8')) as Record<
      string,
      unknown
    >;
    manifest = validateImageManifest(
      {
        ...own,
        source: { url: `${base}/models/upscaler.onnx`, sha256: createHash('sha256').update(bytes).digest('hex') },
      },
      'test',
    );
  });
  afterAll(() => new Promise<void>((done) => server.close(() => done())));

  it('downloads the graph, verified by sha256, where the image registry serves it; a second pull keeps it', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'onnx-gateway-image-models-'));
    const report = await pullImagePipeline(manifest, { imageModelsDir: dir });
    expect(report.file).toMatchObject({
      path: 'onnx/model.onnx',
      status: 'downloaded',
      bytes: bytes.length,
      verifiedBy: 'sha256',
    });
    expect(readFileSync(join(dir, manifest.id, 'onnx', 'model.onnx')).equals(bytes)).toBe(true);
    const registry = ImageRegistry.load([manifest.id], dir, new ImageCatalogue([manifest]));
    expect(registry.resolve(manifest.id).manifest.task).toBe('super-resolution');
    const before = requests.length;
    expect((await pullImagePipeline(manifest, { imageModelsDir: dir })).file.status).toBe('present');
    expect(requests.length).toBe(before);
  });

  it("refuses a file whose sha256 is not the manifest's and installs nothing", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'onnx-gateway-image-models-'));
    const wrong = { ...manifest, source: { ...manifest.source, sha256: '0'.repeat(64) } };
    await expect(pullImagePipeline(wrong, { imageModelsDir: dir, retries: 0 })).rejects.toThrow(DownloadError);
    await expect(pullImagePipeline(wrong, { imageModelsDir: dir, retries: 0 })).rejects.toThrow(
      /corrupt: its sha256 is [0-9a-f]{64} where its manifest says 0{64}/,
    );
    expect(existsSync(join(dir, manifest.id, 'onnx', 'model.onnx'))).toBe(false);
  });

  it('says what the server answered for a URL that is gone', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'onnx-gateway-image-models-'));
    const gone = { ...manifest, source: { ...manifest.source, url: `${base}/models/gone.onnx` } };
    await expect(pullImagePipeline(gone, { imageModelsDir: dir, retries: 0 })).rejects.toThrow(
      /Image pipeline "tiny-upscaler": .*gone\.onnx could not be fetched \(404\)/,
    );
  });
});
