import { describe, expect, it } from 'vitest';
import { placeModels, placementBytes, type PlacementLimits } from '../../src/engine/placement.js';

const MB = 2 ** 20;
const GB = 2 ** 30;
/** An 8-core machine with the defaults: 8 sessions of 1 thread, a solo session of 8. */
const eightCores: PlacementLimits = { maxSessions: 8, threadsPerSession: 1, soloThreads: 8, budgetBytes: 16 * GB };

describe('placeModels', () => {
  it("gives a small model today's fastest layout: a single-threaded session per core and a solo session", () => {
    const { placements, refused } = placeModels([{ id: 'minilm', sessionBytes: 95 * MB, device: 'cpu' }], eightCores);
    expect(refused).toEqual([]);
    expect(placements.get('minilm')).toEqual({ device: 'cpu', sessions: 8, threadsPerSession: 1, soloThreads: 8 });
  });

  it('gives a large model fewer sessions with more threads each, inside the budget', () => {
    const budgetBytes = 6 * GB;
    const { placements } = placeModels([{ id: 'bge-m3', sessionBytes: 1.2 * GB, device: 'cpu' }], {
      ...eightCores,
      budgetBytes,
    });
    const placement = placements.get('bge-m3')!;
    // 8 sessions would hold 9.6 GB and 5 fit, but 5 single-threaded sessions leave 3 cores idle: 4 of 2
    // threads keep all 8 busy, and the session's worth left over holds the solo session.
    expect(placement).toEqual({ device: 'cpu', sessions: 4, threadsPerSession: 2, soloThreads: 8 });
    expect(placementBytes(placement, 1.2 * GB)).toBeLessThanOrEqual(budgetBytes);
  });

  it('keeps the solo session where memory allows one more session', () => {
    const { placements } = placeModels([{ id: 'big', sessionBytes: 1 * GB, device: 'cpu' }], {
      ...eightCores,
      budgetBytes: 2.5 * GB,
    });
    // 2 sessions of 4 threads, and the half GB left is not one more session: no solo.
    expect(placements.get('big')).toEqual({ device: 'cpu', sessions: 2, threadsPerSession: 4, soloThreads: 0 });
    // With 3 GB, 3 sessions would fit, but 3 x 2 threads leave 2 cores idle: 2 x 4 and a solo session.
    const roomy = placeModels([{ id: 'big', sessionBytes: 1 * GB, device: 'cpu' }], {
      ...eightCores,
      budgetBytes: 3 * GB,
    });
    expect(roomy.placements.get('big')).toEqual({ device: 'cpu', sessions: 2, threadsPerSession: 4, soloThreads: 8 });
  });

  it('refuses a model that does not fit even as one session, naming its size and the budget', () => {
    const { placements, refused } = placeModels([{ id: 'huge', sessionBytes: 3 * GB, device: 'cpu' }], {
      ...eightCores,
      budgetBytes: 2 * GB,
    });
    expect(placements.size).toBe(0);
    expect(refused).toHaveLength(1);
    expect(refused[0]!.message).toMatch(/"huge" needs 3072 MB for one session, but the memory budget is 2048 MB/);
    expect(refused[0]!.message).toMatch(/ONNX_GATEWAY_MEMORY_BUDGET_MB/);
  });

  it('says what other models hold when the free part of the budget is too small', () => {
    const { refused } = placeModels(
      [{ id: 'b', sessionBytes: 2 * GB, device: 'cpu' }],
      { ...eightCores, budgetBytes: 4 * GB },
      1 * GB,
    );
    expect(refused[0]!.message).toMatch(/with 3072 MB held by other loaded models/);
  });

  it('shares the budget between two large models: the larger holder gives way first, both keep at least one session', () => {
    const requests = [
      { id: 'embedder', sessionBytes: 1.2 * GB, device: 'cpu' },
      { id: 'reranker', sessionBytes: 2.2 * GB, device: 'cpu' },
    ];
    const budgetBytes = 10 * GB;
    const { placements, refused } = placeModels(requests, { ...eightCores, budgetBytes });
    expect(refused).toEqual([]);
    const embedder = placements.get('embedder')!;
    const reranker = placements.get('reranker')!;
    expect(embedder.sessions * 1.2 + reranker.sessions * 2.2).toBeLessThanOrEqual(10);
    expect(placementBytes(embedder, 1.2 * GB) + placementBytes(reranker, 2.2 * GB)).toBeLessThanOrEqual(budgetBytes);
    // Greedy from the largest holder: 8 x 1.2 + 8 x 2.2 = 27.2 GB comes down to 4 + 2 sessions (9.2 GB).
    expect(embedder).toMatchObject({ sessions: 4, threadsPerSession: 2 });
    expect(reranker).toMatchObject({ sessions: 2, threadsPerSession: 4 });
  });

  it('keeps a small model at its full layout beside a large one that has to shrink', () => {
    const { placements } = placeModels(
      [
        { id: 'small', sessionBytes: 90 * MB, device: 'cpu' },
        { id: 'large', sessionBytes: 2 * GB, device: 'cpu' },
      ],
      { ...eightCores, budgetBytes: 8 * GB },
    );
    expect(placements.get('small')).toMatchObject({ sessions: 8, threadsPerSession: 1 });
    // 3 sessions fit (6 GB), 2 of 4 threads keep the 8 cores busy.
    expect(placements.get('large')).toMatchObject({ sessions: 2, threadsPerSession: 4 });
  });

  it('refuses only the model that does not fit, in the order given', () => {
    const { placements, refused } = placeModels(
      [
        { id: 'first', sessionBytes: 3 * GB, device: 'cpu' },
        { id: 'second', sessionBytes: 2 * GB, device: 'cpu' },
        { id: 'third', sessionBytes: 1 * GB, device: 'cpu' },
      ],
      { ...eightCores, budgetBytes: 4.5 * GB },
    );
    expect([...placements.keys()]).toEqual(['first', 'third']);
    expect(refused.map((error) => error.model)).toEqual(['second']);
  });

  it('runs an accelerator model as one session, with no solo session', () => {
    const { placements } = placeModels([{ id: 'gpu', sessionBytes: 300 * MB, device: 'webgpu' }], eightCores);
    expect(placements.get('gpu')).toEqual({ device: 'webgpu', sessions: 1, threadsPerSession: 1, soloThreads: 0 });
  });

  it('never gives a model more sessions than the workers setting, nor fewer threads than the intra-op setting', () => {
    const limits = { maxSessions: 2, threadsPerSession: 4, soloThreads: 8, budgetBytes: 64 * GB };
    expect(placeModels([{ id: 'm', sessionBytes: 100 * MB, device: 'cpu' }], limits).placements.get('m')).toEqual({
      device: 'cpu',
      sessions: 2,
      threadsPerSession: 4,
      soloThreads: 8,
    });
  });
});
