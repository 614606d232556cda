import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import sharp from 'sharp';
import { writeTinyModels } from './test/fixtures/tiny-models.js';
import { loadConfig } from './src/config.js';
import { createServer } from './src/server.js';

const dir = await mkdtemp(join(tmpdir(), 'imgsmoke-'));
await writeTinyModels(dir);
const config = loadConfig({ modelsDir: dir, models: ['tiny-embedder'], imageModelsDir: resolve('../shared/models/trained'), imageModels: ['realesr-animevideov3', 'espcn-superres-x3-y', 'isnet-imgly-small', 'fast-neural-style-candy-nc16'], port: 0, workers: 1, logLevel: 'error' }, {});
const server = await createServer(config, { level: 'error' });
await server.ready;
// a synthetic photo-like image: gradient + shapes
const svg = (w: number, h: number) => Buffer.from(`<svg xmlns="http://www.w3.org/2000/svg" width="${w}" height="${h}"><defs><linearGradient id="g"><stop offset="0" stop-color="#3060a0"/><stop offset="1" stop-color="#f0c080"/></linearGradient></defs><rect width="100%" height="100%" fill="url(#g)"/><circle cx="${w/2}" cy="${h/2}" r="${h/4}" fill="#c03030"/><text x="10" y="${h/6}" font-size="${h/10}" fill="white">Hello 4K</text></svg>`);
const input = await sharp(svg(960, 540)).png().toBuffer();
for (const [model, size] of [['realesr-animevideov3', '3840x2160'], ['realesr-animevideov3', '2048x2048'], ['espcn-superres-x3-y', '2048x2048'], ['isnet-imgly-small', '3840x2160'], ['fast-neural-style-candy-nc16', '3840x2160']]) {
  const t = performance.now();
  const mem0 = process.memoryUsage().rss;
  const r = await server.app.inject({ method: 'POST', url: '/v1/images/edits', payload: { model, prompt: 'x', image: [input.toString('base64')], size } });
  const j = r.json();
  if (!j.data) { console.log(r.statusCode, r.body); continue; }
  const b = Buffer.from(j.data[0].b64_json, 'base64'); const m = await sharp(b).metadata();
  console.log(model, size, r.statusCode, m.width, m.height, m.channels, ((performance.now() - t) / 1000).toFixed(2), 's', r.headers['server-timing'], 'rss', (process.memoryUsage().rss / 1e6).toFixed(0));
  console.log('  ', j.data[0].revised_prompt);
}
await server.close();
