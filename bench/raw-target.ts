/**
 * Raw ONNX Runtime as a target of the HTTP bench: the ceiling measured in the same rotation as the
 * servers, so that "server / ceiling" compares the same minutes of a machine whose speed drifts
 * (on the shared VM the bench was built on, the ceiling moved by 25% between runs an hour apart).
 *
 * A child process (IPC) holds the sessions of one layout (sessions x intra-op threads x batch; the
 * bench runs one such target per layout that can win, see rawLayoutSet in http.ts) for the embedder
 * and the reranker, and one session of the layout's threads for the latency of one input run alone; and
 * for the image workloads, the vision tower of an image-text model. The inputs are those of the HTTP
 * workloads, pre-tokenised: the embedding mix in its order and the pairs of the rerank requests; the
 * image workloads' images as pixel_values (bench/image-workloads.ts: preprocessed before the clock,
 * batches of the layout's size, NCHW float32 as the graph takes them). Each measurement continues
 * where the previous one stopped, so a measurement shorter than a pass is a window of the shuffled
 * mix, as the HTTP load's rotation is.
 *
 *   throughput: units/s of the best layout (what the server is held to at high concurrency)
 *   latency:    each input alone, back to back, on one session of the layout's threads (the best of the
 *               layouts is the concurrency-1 reference)
 */
import { pathToFileURL } from 'node:url';
import { median, percentile } from './lib/common.js';
import { SessionGroup, packBatches, sessionOptions } from './ceiling.js';
import type { Batch, RawFeed } from './ceiling-worker.js';
import { preprocessedImages, workloadImages } from './image-workloads.js';
import { type Encoded, embeddingMix, rerankMix, tokenizeMix, tokenizePairs } from './mix.js';

export interface RawLayout {
  sessions: number;
  threads: number;
  batch: number;
  /** An accelerator (`webgpu`) for the image layouts of `--image-device`; absent: the CPU. */
  device?: string;
}

export interface RawInit {
  type: 'init';
  /** model ids (`id` or `id:int8`) and their ONNX files; absent: the run measures no such workload */
  embed?: { id: string; path: string; layout: RawLayout };
  rerank?: { id: string; path: string; layout: RawLayout };
  /** an image-text model's folder and the image workloads to measure on its vision tower */
  image?: { folder: string; layout: RawLayout; workloads: string[] };
  /** embedding mix size and rerank requests, as the HTTP workloads use */
  n: number;
  rerankRequests: number;
}

export interface RawJob {
  type: 'measure';
  id: number;
  workload: 'embed' | 'rerank' | 'image';
  /** an image workload's name */
  name?: string;
  mode: 'throughput' | 'latency';
  durationS: number;
}

export type RawMessage =
  | { type: 'ready' }
  | {
      type: 'result';
      id: number;
      unitsPerSec: number;
      units: number;
      durationS: number;
      latencyMs: { p50: number; p90: number; p99: number; mean: number; max: number };
    }
  | { type: 'error'; id: number; message: string };

/** One loaded group of sessions and where its next measurement starts. */
class Lane {
  private offset = 0;

  private constructor(
    private readonly group: SessionGroup,
    private readonly batches: Batch[],
    /** the units (inputs, pairs, images) of each batch */
    private readonly counts: number[],
    private readonly inMixOrder: boolean,
  ) {}

  static async open(path: string, layout: RawLayout, encoded: Encoded[], spinning: '1' | null): Promise<Lane> {
    const group = await SessionGroup.start(
      { model: path, options: sessionOptions(layout.threads, { arena: true, spinning }) },
      layout.sessions,
    );
    // Batch 1 keeps the mix's order; larger batches are packed by length (as the ceiling sweep does) and measured in whole passes.
    const batches =
      layout.batch === 1 ? encoded.flatMap((e) => packBatches([e], 1)) : packBatches(encoded, layout.batch);
    const longest = batches.reduce(
      (best, b, i) => (b.count * b.seq > batches[best]!.count * batches[best]!.seq ? i : best),
      0,
    );
    await group.load(batches, [0, longest, longest]);
    return new Lane(
      group,
      batches,
      batches.map((b) => b.count),
      layout.batch === 1,
    );
  }

  /** Images' pixel_values in batches of the layout's (the images repeated to fill the last one). */
  static async openImages(path: string, layout: RawLayout, pixels: Float32Array[], height: number, width: number) {
    const group = await SessionGroup.start(
      { model: path, options: sessionOptions(layout.threads, { arena: true, spinning: null }, layout.device) },
      layout.sessions,
    );
    const plane = 3 * height * width;
    const batches = Array.from({ length: Math.ceil(pixels.length / layout.batch) }, (_, f): RawFeed => {
      const data = new Float32Array(layout.batch * plane);
      for (let i = 0; i < layout.batch; i++) data.set(pixels[(f * layout.batch + i) % pixels.length]!, i * plane);
      return { kind: 'raw', tensors: { pixel_values: { data, dims: [layout.batch, 3, height, width] } } };
    });
    await group.load(batches, [0]);
    return new Lane(
      group,
      batches,
      batches.map(() => layout.batch),
      layout.batch === 1,
    );
  }

  async measure(durationS: number): Promise<Omit<Extract<RawMessage, { type: 'result' }>, 'type' | 'id'>> {
    const ms: number[] = [];
    let units = 0;
    let wall = 0;
    // Chunks of a few runs per session, until the duration is reached.
    const chunk = this.inMixOrder ? 8 : this.batches.length;
    do {
      const { wallMs, runs } = await this.group.run(chunk, this.offset);
      for (const [i, runMs] of runs) {
        ms.push(runMs);
        units += this.counts[(this.offset + i) % this.batches.length]!;
      }
      this.offset = (this.offset + chunk) % this.batches.length;
      wall += wallMs;
    } while (wall < durationS * 1000);
    return {
      unitsPerSec: units / (wall / 1000),
      units,
      durationS: wall / 1000,
      latencyMs: {
        p50: median(ms),
        p90: percentile(ms, 90),
        p99: percentile(ms, 99),
        mean: ms.reduce((a, b) => a + b, 0) / ms.length,
        max: Math.max(...ms),
      },
    };
  }

  close(): Promise<void> {
    return this.group.close();
  }
}

async function main(): Promise<void> {
  const lanes = new Map<string, Lane>();
  process.on('message', (msg: RawInit | RawJob | { type: 'close' }) => {
    void (async () => {
      if (msg.type === 'init') {
        if (msg.embed) {
          const embedded = tokenizeMix(msg.embed.id, embeddingMix(msg.n));
          lanes.set('embed/throughput', await Lane.open(msg.embed.path, msg.embed.layout, embedded, null));
          const alone = { sessions: 1, threads: msg.embed.layout.threads, batch: 1 };
          lanes.set('embed/latency', await Lane.open(msg.embed.path, alone, embedded, '1'));
        }
        if (msg.rerank) {
          const pairs = tokenizePairs(msg.rerank.id, rerankMix(msg.rerankRequests));
          lanes.set('rerank/throughput', await Lane.open(msg.rerank.path, msg.rerank.layout, pairs, null));
        }
        for (const workload of msg.image?.workloads ?? []) {
          const { folder, layout } = msg.image!;
          const { vision, pixels, height, width } = await preprocessedImages(folder, await workloadImages(workload));
          lanes.set(`image:${workload}/throughput`, await Lane.openImages(vision, layout, pixels, height, width));
        }
        process.send!({ type: 'ready' } satisfies RawMessage);
      } else if (msg.type === 'measure') {
        try {
          const key = msg.workload === 'image' ? `image:${msg.name}` : msg.workload;
          const lane = lanes.get(`${key}/${msg.mode}`);
          if (!lane) throw new Error(`no ${msg.mode} lane for ${key}`);
          process.send!({ type: 'result', id: msg.id, ...(await lane.measure(msg.durationS)) } satisfies RawMessage);
        } catch (error) {
          process.send!({ type: 'error', id: msg.id, message: (error as Error).message } satisfies RawMessage);
        }
      } else {
        for (const lane of lanes.values()) await lane.close();
        process.exit(0);
      }
    })().catch((error: unknown) => {
      process.stderr.write(`raw target: ${(error as Error).stack ?? String(error)}\n`);
      process.exit(1);
    });
  });
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) void main();
