#!/usr/bin/env node
/**
 * The onnx-gateway command: serve (the default), index, embed, bench and the model tools; each
 * subcommand lives in its own file beside this one. A command named first is the only one loaded,
 * as each imports what it runs (the server, the index, the quantizer): `models list` starts without
 * the server's modules. Without one (serve by default, the root's --help), all are.
 */
import '../threadpool.js';
import { Command } from 'commander';

type Register = (program: Command) => void;

const commands: Record<string, () => Promise<Register>> = {
  serve: async () => (await import('./serve.js')).registerServeCommand,
  index: async () => (await import('./search-index.js')).registerIndexCommand,
  embed: async () => (await import('./embed.js')).registerEmbedCommand,
  bench: async () => (await import('./bench.js')).registerBenchCommand,
  models: async () => (await import('./models.js')).registerModelsCommand,
};

const program = new Command('onnx-gateway').description('OpenAI-compatible embeddings and rerank on local ONNX models');

const named = process.argv[2];
const wanted = named !== undefined && Object.hasOwn(commands, named) ? [named] : Object.keys(commands);
for (const name of wanted) (await commands[name]!())(program);

await program.parseAsync();
