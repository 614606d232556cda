/**
 * The `serve` subcommand (the default): starts the HTTP server. A start that fails for a reason
 * the user can act on says what it was (and, without the Hub, what to do) and exits non-zero.
 */
import { resolve } from 'node:path';
import { Option, type Command } from 'commander';
import { loadConfig, settings, type Config, type SettingName } from '../config.js';
import type { StartupError } from '../errors.js';
import { serve } from '../main.js';
import { exitOnStartupError } from './exit.js';

export function registerServeCommand(program: Command): void {
  const serveCommand = program.command('serve', { isDefault: true }).description('start the HTTP server');
  // Flags are named after the settings (--max-batch-tokens -> maxBatchTokens); config.ts reads the
  // environment itself, so flags only override.
  for (const spec of Object.values(settings)) {
    serveCommand.addOption(
      new Option(
        `${spec.flag} ${spec.kind === 'boolean' ? '[value]' : '<value>'}`,
        `${spec.description} (env ${spec.env})`,
      ),
    );
  }
  serveCommand.action(async (options: Record<string, unknown>) => {
    let config: Config | undefined;
    try {
      const overrides: Partial<Record<SettingName, unknown>> = {};
      for (const name of Object.keys(settings) as SettingName[]) {
        if (options[name] !== undefined) overrides[name] = options[name];
      }
      config = loadConfig(overrides);
      await serve(config);
    } catch (error) {
      exitOnStartupError(error, (failure) => startFailure(failure, config));
    }
  });
}

/** A setting's error reads as a usage error; any other as a start that failed. */
function startFailure(error: StartupError, config: Config | undefined): string {
  if (error.code === 'config_invalid' || !config) return `onnx-gateway: ${error.message}`;
  const advice = error.code === 'hub_unreachable' ? `\n${withoutTheHub(config)}` : '';
  return `onnx-gateway can not start:\n${error.message}${advice}`;
}

/** Missing models and no Hub: the three ways to get the files here. */
function withoutTheHub(config: Config): string {
  const dir = resolve(config.modelsDir);
  return [
    `The models above are not in the models dir ${dir}, and the Hub can not be reached from here to download them. Three ways forward:`,
    `  - a mirror of the Hub: HF_ENDPOINT=<its URL> (or ${settings.hfEndpoint.env}) and start again;`,
    `  - the model folders copied into ${dir} from a machine that has them (or ${settings.modelsDir.env} set to where they are);`,
    `  - "onnx-gateway models pull <id>" on a machine that has the Hub, then its models dir copied here.`,
  ].join('\n');
}
