/**
 * How a command ends on an error it expects: one with a start-up code (errors.ts), whose message
 * goes to stderr and whose code picks the exit status. Any other error is a bug: it is thrown on,
 * stack and all.
 */
import { isStartupError, type StartupError } from '../errors.js';

/** 2 for a setting or flag to fix (as for a usage error), 1 for the rest. */
export function exitStatus(error: StartupError): 1 | 2 {
  return error.code === 'config_invalid' ? 2 : 1;
}

export function exitOnStartupError(
  error: unknown,
  describe: (error: StartupError) => string = (failure) => `onnx-gateway: ${failure.message}`,
): never {
  if (!isStartupError(error)) throw error;
  process.stderr.write(`${describe(error)}\n`);
  process.exit(exitStatus(error));
}
