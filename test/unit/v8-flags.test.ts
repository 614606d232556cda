import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { commandLineFlags, flagsNotGiven, serverFlags } from '../../src/v8-flags.js';

describe('V8 flags of a serving process', () => {
  it('sets every server flag when node was given none', () => {
    expect(flagsNotGiven(serverFlags, [])).toEqual([...serverFlags]);
    expect(flagsNotGiven(serverFlags, ['--enable-source-maps'])).toEqual([...serverFlags]);
  });

  it('keeps a flag given on the command line, in any of its spellings', () => {
    expect(flagsNotGiven(serverFlags, ['--interrupt-budget=100000'])).toEqual(['--no-memory-reducer']);
    expect(flagsNotGiven(serverFlags, ['--interrupt_budget=100000'])).toEqual(['--no-memory-reducer']);
    expect(flagsNotGiven(serverFlags, ['--memory-reducer'])).toEqual(['--interrupt-budget=8192']);
    expect(flagsNotGiven(serverFlags, ['--memory_reducer', '--no-interrupt-budget'])).toEqual([]);
  });

  it('names the command-line-only flags node was started without', () => {
    expect(flagsNotGiven(commandLineFlags, [])).toEqual(['--no-memory-reducer']);
    expect(flagsNotGiven(commandLineFlags, ['--no-memory-reducer'])).toEqual([]);
    expect(flagsNotGiven(commandLineFlags, ['--no_memory_reducer', '--interrupt-budget=1'])).toEqual([]);
    // A flag set at run time does not count: it never reaches the main thread's heap.
    expect(flagsNotGiven(commandLineFlags, ['--interrupt-budget=8192'])).toEqual(['--no-memory-reducer']);
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
