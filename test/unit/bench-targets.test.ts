/**
 * The bench's targets on another node binary (bench/http.ts, `gateway@NODE`): named after the
 * Node's major, or as labelled, with the node flags given after the path; nothing is started here.
 */
import { describe, expect, it } from 'vitest';
import { targetSpecs } from '../../bench/http.js';

const opts = { embedModel: 'e', rerankModel: 'r', gatewayFromSrc: false, apiKey: null };
const major = process.versions.node.split('.')[0];

describe('bench targets on another node', () => {
  it('names a gateway@NODE target after its Node and records the version', () => {
    const [spec] = targetSpecs([`gateway@${process.execPath}`], opts);
    expect(spec).toMatchObject({ name: `gateway-node${major}`, kind: 'gateway', node: process.versions.node });
  });

  it('takes a label and node flags, and leaves the URL and built-in targets as they were', () => {
    const specs = targetSpecs(
      [
        `untuned=gateway@${process.execPath} --invocation-count-for-turbofan=3000`,
        'peer=http://127.0.0.1:9',
        'gateway',
      ],
      opts,
    );
    expect(specs.map((s) => [s.name, s.kind, s.node])).toEqual([
      ['untuned', 'gateway', process.versions.node],
      ['peer', 'url', undefined],
      ['gateway', 'gateway', undefined],
    ]);
  });
});
