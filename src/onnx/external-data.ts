/**
 * Initializers kept in external data files (large exports: `model.onnx_data`) read into the model,
 * so that a rewrite of the model (the int8 variant) writes one self-contained file.
 */
import { closeSync, openSync, readSync } from 'node:fs';
import { isAbsolute, join, normalize } from 'node:path';
import { DataLocation, type GraphProto } from './proto.js';
import type { OnnxModel } from './model.js';

/** Reads every external initializer of `model` from its file under `dir` (the graph's folder) into raw_data. */
export function inlineExternalData(model: OnnxModel, dir: string): void {
  const files = new Map<string, number>();
  try {
    for (const graph of graphsOf(model.graph)) {
      for (const t of graph.initializer ?? []) {
        if (t.dataLocation !== DataLocation.EXTERNAL) continue;
        const entry = (key: string) => t.externalData?.find((e) => e.key === key)?.value;
        const location = entry('location');
        if (!location || isAbsolute(location) || normalize(location).startsWith('..'))
          throw new Error(
            `initializer ${t.name}: external data location "${location ?? ''}" is not a file beside the graph`,
          );
        let fd = files.get(location);
        if (fd === undefined) files.set(location, (fd = openSync(join(dir, location), 'r')));
        const length = Number(entry('length') ?? -1);
        if (length < 0) throw new Error(`initializer ${t.name}: its external data has no length`);
        const bytes = new Uint8Array(length);
        if (readSync(fd, bytes, 0, length, Number(entry('offset') ?? 0)) !== length)
          throw new Error(`initializer ${t.name}: ${location} ends before its data`);
        t.rawData = bytes;
        t.externalData = [];
        t.dataLocation = DataLocation.DEFAULT;
      }
    }
  } finally {
    for (const fd of files.values()) closeSync(fd);
  }
}

function graphsOf(graph: GraphProto | undefined): GraphProto[] {
  if (!graph) return [];
  const nested = (graph.node ?? []).flatMap((n) =>
    (n.attribute ?? []).flatMap((a) => [a.g, ...(a.graphs ?? [])].filter((g): g is GraphProto => !!g)),
  );
  return [graph, ...nested.flatMap(graphsOf)];
}
