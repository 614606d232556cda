import { describe, expect, it } from 'vitest';
import { ortSessionOptions } from '../../src/worker/session-options.js';

const config = (options: Parameters<typeof ortSessionOptions>[0]) =>
  (ortSessionOptions(options).extra as { session: Record<string, unknown> }).session;

describe("ONNX Runtime options of a worker's sessions", () => {
  it('lets the threads spin, and stop when a run ends where asked (the solo session)', () => {
    const solo = config({ intraOpThreads: 4, spinning: true, stopSpinningAfterRun: true, memoryArena: true });
    expect(solo.intra_op).toEqual({ allow_spinning: '1' });
    expect(solo.force_spinning_stop).toBe('1');
  });

  it('leaves spinning after a run to ONNX Runtime where not asked', () => {
    const session = config({ intraOpThreads: 4, spinning: true, memoryArena: true });
    expect(session.intra_op).toEqual({ allow_spinning: '1' });
    expect(session).not.toHaveProperty('force_spinning_stop');
  });

  it('has nothing to stop when the threads do not spin', () => {
    const session = config({ intraOpThreads: 1, spinning: false, stopSpinningAfterRun: true, memoryArena: true });
    expect(session.intra_op).toEqual({ allow_spinning: '0' });
    expect(session).not.toHaveProperty('force_spinning_stop');
  });
});
