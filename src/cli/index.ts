#!/usr/bin/env node
/**
 * The onnx-gateway command: serve (the default), index, embed, bench and the model tools; each
 * subcommand lives in its own file beside this one.
 */
import { Command } from 'commander';
import { registerBenchCommand } from './bench.js';
import { registerEmbedCommand } from './embed.js';
import { registerModelsCommand } from './models.js';
import { registerIndexCommand } from './search-index.js';
import { registerServeCommand } from './serve.js';

const program = new Command('onnx-gateway').description('OpenAI-compatible embeddings and rerank on local ONNX models');

registerServeCommand(program);
registerIndexCommand(program);
registerEmbedCommand(program);
registerBenchCommand(program);
registerModelsCommand(program);

await program.parseAsync();
