/**
 * V8 flags for a long-running server. `serve` sets those node's command line did not give, before
 * the worker threads start (they inherit them); a flag given on the command line, in any spelling
 * (`--x` / `--no-x`, dashes or underscores), is kept as given.
 */
import { setFlagsFromString } from 'node:v8';

const noMemoryReducer = '--no-memory-reducer';

export const serverFlags = [
  // V8 optimises a function after it has run a budget of bytecode a few times over. At a model
  // server's rates (tens of requests per second beside busy workers) the default budget leaves much
  // of the request path in the baseline tier for minutes: a third of the main thread's samples at
  // c=32. An eighth of it tiers up within seconds (baseline samples 36% -> 15%), and the main
  // thread spends about 13% less per request at c=32.
  '--interrupt-budget=8192',
  // The memory reducer runs up to three extra full collections once a process goes quiet, to hand
  // memory back as a browser tab would. They do not keep maps without live objects, and the
  // optimised code that names such maps is thrown away ("weak objects": about 150 functions of
  // the main thread, most of the request path), so traffic after every idle spell ran in the
  // baseline tier again: about 40% more main-thread CPU per request for 10 s, more than warm for
  // 10-20 s after. Without it, that garbage goes at the next ordinary collection. V8 reads this
  // flag when it sets up a heap: set here it reaches the worker threads; the main thread needs it
  // on node's command line.
  noMemoryReducer,
] as const;

/** Flags V8 reads only when it sets up the main thread's heap. */
export const commandLineFlags = [noMemoryReducer] as const;

/** The flag's name without `--`, `no-` and a value, dashes for underscores: `--no-memory_reducer` -> `memory-reducer`. */
function flagName(arg: string): string {
  return arg.replace(/^--/, '').split('=')[0]!.replace(/_/g, '-').replace(/^no-/, '');
}

/** Which of `flags` node's command line (`execArgv`) did not give, in any spelling. */
export function flagsNotGiven<T extends string>(
  flags: readonly T[],
  execArgv: readonly string[] = process.execArgv,
): T[] {
  const given = new Set(execArgv.filter((arg) => arg.startsWith('--')).map(flagName));
  return flags.filter((flag) => !given.has(flagName(flag)));
}

export function setServerFlags(): void {
  for (const flag of flagsNotGiven(serverFlags)) setFlagsFromString(flag);
}
