/**
 * V8 flags for a long-running server. `serve` sets those node's command line did not give, before
 * the worker threads start (they inherit them); a flag given on the command line, in any spelling
 * (`--x` / `--no-x`, dashes or underscores), is kept as given. Each is set only where the running V8
 * has it: V8 prints "unrecognized flag" for one it lacks and goes on without it, and flags come and
 * go between Node majors (V8 12, from Node 22, counts invocations where V8 11 had an interrupt budget).
 */
import { execFileSync } from 'node:child_process';
import { setFlagsFromString } from 'node:v8';

const noMemoryReducer = '--no-memory-reducer';

export const serverFlags = [
  // V8 11 (Node 20) optimises a function after it has run a budget of bytecode a few times over.
  // At a model server's rates (tens of requests per second beside busy workers) the default budget
  // leaves much of the request path in the baseline tier for minutes: a third of the main
  // thread's samples at c=32. An eighth of it tiers up within seconds (baseline samples 36% ->
  // 15%), and the main thread spends about 13% less per request at c=32.
  '--interrupt-budget=8192',
  // V8 12 and 13 (Node 22, 24) tier a function up after a count of its invocations instead (its
  // budget is that count times its bytecode's length): Maglev after 400, TurboFan after 3,000. An
  // eighth of each, as for V8 11: on Node 24 the main thread spent 2.00 ms of CPU per request at
  // c=32 with them, 2.18 without (8% less; docs/performance.md, a heavily loaded machine).
  '--invocation-count-for-maglev=50',
  '--invocation-count-for-turbofan=375',
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
export function flagName(arg: string): string {
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

/** The names of the flags a V8 has, from its `--v8-options` listing (`  --name (what it does)`). */
export function parseV8Options(listing: string): Set<string> {
  return new Set([...listing.matchAll(/^ {2}--([a-z0-9-]+) \(/gm)].map((match) => match[1]!));
}

/** The flags the running V8 has: what this node binary lists (a node with its V8 built in, about 60 ms of CPU). */
export function runningV8Flags(execPath: string = process.execPath): Set<string> {
  try {
    return parseV8Options(execFileSync(execPath, ['--v8-options'], { encoding: 'utf8', timeout: 10_000 }));
  } catch {
    return new Set();
  }
}

/** Which of `flags` a V8 with the flags `known` has. */
export function flagsKnown<T extends string>(flags: readonly T[], known: ReadonlySet<string>): T[] {
  return flags.filter((flag) => known.has(flagName(flag)));
}

/** Sets the server flags the command line did not give and the running V8 has; returns those it set. */
export function setServerFlags(known: ReadonlySet<string> = runningV8Flags()): string[] {
  const flags = flagsKnown(flagsNotGiven(serverFlags), known);
  for (const flag of flags) setFlagsFromString(flag);
  return flags;
}
