/**
 * The reader's worker thread: converts one page at a time (convert.ts) and posts the result back.
 * It says `ready` once its modules are loaded, so that a page's time limit counts the conversion
 * alone. A page that runs over the limit gets the thread terminated (page-parser.ts).
 */
import { parentPort } from 'node:worker_threads';
import { convertPage } from './convert.js';
import type { ParseReply, ParseTask } from './parse-messages.js';

const port = parentPort!;
port.on('message', ({ html, url, format }: ParseTask) => {
  let reply: ParseReply;
  try {
    reply = { page: convertPage(html, url, format) };
  } catch (error) {
    reply = { error: { name: (error as Error).name ?? 'Error', message: (error as Error).message ?? String(error) } };
  }
  port.postMessage(reply);
});
port.postMessage({ ready: true } satisfies ParseReply);
