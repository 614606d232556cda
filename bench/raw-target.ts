/**
 * Raw ONNX Runtime as a target of the HTTP bench: the ceiling measured in the same rotation as the
 * servers, so that "server / ceiling" compares the same minutes of a machine whose speed drifts
 * (on the shared VM the bench was built on, the ceiling moved by 25% between runs an hour apart).
 *
 * A child process (IPC) holds the sessions of one layout (sessions x intra-op threads x batch; the
 * bench runs one such target per layout that can win, see rawLayoutSet in http.ts) for the embedder
 * and the reranker, and one session of the layout's threads for the latency of one input run alone. The inputs are those of the HTTP workloads, pre-tokenised:
 * the embedding mix in its order and the pairs of the rerank requests. Each measurement continues
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
import type { BertBatch } from './ceiling-worker.js';
import { type Encoded, embeddingMix, rerankMix, tokenizeMix, tokenizePairs } from './mix.js';

export interface RawLayout {
  sessions: number;
  threads: number;
  batch: number;
}

export interface RawInit {
  type: 'init';
  /** model ids (`id` or `id:int8`) and their ONNX files */
  embed: { id: string; path: string; layout: RawLayout };
  rerank: { id: string; path: string; layout: RawLayout };
  /** embedding mix size and rerank requests, as the HTTP workloads use */
  n: number;
  rerankRequests: number;
}

export interface RawJob {
  type: 'measure';
  id: number;
  workload: 'embed' | 'rerank';
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
    private readonly batches: BertBatch[],
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
    return new Lane(group, batches, layout.batch === 1);
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
        units += this.batches[(this.offset + i) % this.batches.length]!.count;
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
        const embedded = tokenizeMix(msg.embed.id, embeddingMix(msg.n));
        const pairs = tokenizePairs(msg.rerank.id, rerankMix(msg.rerankRequests));
        lanes.set('embed/throughput', await Lane.open(msg.embed.path, msg.embed.layout, embedded, null));
        lanes.set(
          'embed/latency',
          await Lane.open(msg.embed.path, { sessions: 1, threads: msg.embed.layout.threads, batch: 1 }, embedded, '1'),
        );
        lanes.set('rerank/throughput', await Lane.open(msg.rerank.path, msg.rerank.layout, pairs, null));
        process.send!({ type: 'ready' } satisfies RawMessage);
      } else if (msg.type === 'measure') {
        try {
          const lane = lanes.get(`${msg.workload}/${msg.mode}`);
          if (!lane) throw new Error(`no ${msg.mode} lane for ${msg.workload}`);
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
