/** The messages between the reader's main-thread side (page-parser.ts) and its worker (parse-worker.ts). */
import type { ConvertedPage, ReadFormat } from './convert.js';

export interface ParseTask {
  html: string;
  url: string;
  format: ReadFormat;
}

export type ParseReply = { ready: true } | { page: ConvertedPage } | { error: { name: string; message: string } };
