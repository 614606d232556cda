import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  commandLineFlags,
  flagName,
  flagsKnown,
  flagsNotGiven,
  parseV8Options,
  runningV8Flags,
  serverFlags,
} from '../../src/v8-flags.js';

const tiering = ['interrupt-budget', 'invocation-count-for-maglev', 'invocation-count-for-turbofan'];

describe('V8 flags of a serving process', () => {
  it('sets every server flag when node was given none', () => {
    expect(flagsNotGiven(serverFlags, [])).toEqual([...serverFlags]);
    expect(flagsNotGiven(serverFlags, ['--enable-source-maps'])).toEqual([...serverFlags]);
  });

  it('keeps a flag given on the command line, in any of its spellings', () => {
    const others = (name: string) => serverFlags.filter((flag) => flagName(flag) !== name);
    expect(flagsNotGiven(serverFlags, ['--interrupt-budget=100000'])).toEqual(others('interrupt-budget'));
    expect(flagsNotGiven(serverFlags, ['--interrupt_budget=100000'])).toEqual(others('interrupt-budget'));
    expect(flagsNotGiven(serverFlags, ['--memory-reducer'])).toEqual(others('memory-reducer'));
    expect(flagsNotGiven(serverFlags, ['--invocation_count_for_turbofan=3000'])).toEqual(
      others('invocation-count-for-turbofan'),
    );
    expect(
      flagsNotGiven(
        serverFlags,
        serverFlags.map((flag) => `--${flagName(flag).replace(/-/g, '_')}`),
      ),
    ).toEqual([]);
  });

  it('names the command-line-only flags node was started without', () => {
    expect(flagsNotGiven(commandLineFlags, [])).toEqual(['--no-memory-reducer']);
    expect(flagsNotGiven(commandLineFlags, ['--no-memory-reducer'])).toEqual([]);
    expect(flagsNotGiven(commandLineFlags, ['--no_memory_reducer', '--interrupt-budget=1'])).toEqual([]);
    // A flag set at run time does not count: it never reaches the main thread's heap.
    expect(flagsNotGiven(commandLineFlags, ['--interrupt-budget=8192'])).toEqual(['--no-memory-reducer']);
  });

  it('reads the flag names from a --v8-options listing, not its syntax lines or defaults', () => {
    const listing = [
      'The following syntax for options is accepted (both - and -- are ok):',
      '  --flag        (bool flags only)',
      'Options:',
      '  --memory-reducer (use memory reducer)',
      '        type: bool  default: --memory-reducer',
      '  --invocation-count-for-maglev (invocation count required for optimizing with Maglev)',
      '        type: int  default: --invocation-count-for-maglev=400',
    ].join('\n');
    expect([...parseV8Options(listing)]).toEqual(['memory-reducer', 'invocation-count-for-maglev']);
    expect(flagsKnown(serverFlags, parseV8Options(listing))).toEqual([
      '--invocation-count-for-maglev=50',
      '--no-memory-reducer',
    ]);
  });

  it('sets only flags the running V8 has, and always one that tiers code up sooner', () => {
    const known = runningV8Flags();
    expect(known.size).toBeGreaterThan(100);
    const set = flagsKnown(serverFlags, known);
    expect(set.some((flag) => tiering.includes(flagName(flag)))).toBe(true);
    expect(set).toContain('--no-memory-reducer');
    // node's command line refuses a flag its V8 does not have (setFlagsFromString only prints an error).
    const run = spawnSync(process.execPath, [...set, '-e', ''], { encoding: 'utf8' });
    expect(run.stderr).toBe('');
    expect(run.status).toBe(0);
    expect(spawnSync(process.execPath, ['--no-such-v8-flag', '-e', ''], { encoding: 'utf8' }).status).not.toBe(0);
    for (const flag of commandLineFlags) expect(known.has(flagName(flag))).toBe(true);
  });

  it('npm start and the image start node with every command-line-only flag', () => {
    const start = (JSON.parse(readFileSync('package.json', 'utf8')) as { scripts: Record<string, string> }).scripts[
      'start'
    ]!;
    const entrypoint = /^ENTRYPOINT\s+(\[.*\])\s*$/m.exec(readFileSync('Dockerfile', 'utf8'))?.[1];
    expect(entrypoint).toBeDefined();
    const imageArgs = JSON.parse(entrypoint!) as string[];
    for (const flag of commandLineFlags) {
      // Between node and the script: after it, they would be the script's arguments.
      expect(start.split(/\s+/).slice(0, start.split(/\s+/).indexOf('dist/cli/index.js'))).toContain(flag);
      expect(imageArgs.slice(0, imageArgs.indexOf('dist/cli/index.js'))).toContain(flag);
    }
  });
});
