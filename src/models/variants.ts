/**
 * The ONNX graph variants a model may have, and the file names each goes by in a Hub repository
 * (Optimum, sentence-transformers and transformers.js exports) or a model folder. One place, read
 * by the pull (which graph of a repository to fetch) and the registry (which graph to load).
 */
import { arch } from 'node:process';

export const VARIANTS = ['fp32', 'fp16', 'int8', 'O1', 'O2', 'O3', 'O4'] as const;
export type Variant = (typeof VARIANTS)[number];

/**
 * Candidate graph paths of each variant, in order of preference. A `*` stands for any characters
 * (sentence-transformers ships one int8 graph per instruction set: `model_qint8_avx512.onnx`,
 * `model_qint8_arm64.onnx`, ...). `onnx/model_int8.onnx` is also what `models quantize` writes.
 */
const CANDIDATES: Record<Variant, readonly string[]> = {
  fp32: ['onnx/model.onnx', 'model.onnx'],
  fp16: ['onnx/model_fp16.onnx'],
  int8: ['onnx/model_int8.onnx', 'onnx/model_quantized.onnx', 'onnx/model_qint8*.onnx'],
  O1: ['onnx/model_O1.onnx'],
  O2: ['onnx/model_O2.onnx'],
  O3: ['onnx/model_O3.onnx'],
  O4: ['onnx/model_O4.onnx'],
};

export class VariantError extends Error {
  override name = 'VariantError';
}

/** A variant by name (case aside; `quantized` is int8). */
export function parseVariant(text: string): Variant {
  const name = text.trim().toLowerCase();
  const variant = name === 'quantized' ? 'int8' : VARIANTS.find((v) => v.toLowerCase() === name);
  if (!variant) throw new VariantError(`"${text}" is not an ONNX variant: use one of ${VARIANTS.join(', ')}.`);
  return variant;
}

/** The variant's candidate graph paths, in order of preference (a `*` matches any characters). */
export function variantCandidates(variant: Variant): string[] {
  return [...CANDIDATES[variant]];
}

/**
 * The graph of `variant` among `paths` (a repository's listing or a folder's files, relative with
 * forward slashes): the first candidate present. Of the names a `*` candidate matches, those built
 * for this machine's instruction set (`arm64` in the name on ARM, the others elsewhere) come first,
 * then by name: on x64 `model_qint8_avx512.onnx`, whose 7-bit range does not saturate on CPUs
 * without VNNI, before `model_qint8_avx512_vnni.onnx`.
 */
export function findVariantGraph(variant: Variant, paths: Iterable<string>): string | undefined {
  const all = [...paths];
  return findTowerGraphs(variant, all)?.text ?? firstCandidate(CANDIDATES[variant], all);
}

/**
 * A two-tower export's graphs of `variant` (transformers.js names them after the one-graph names:
 * `onnx/text_model.onnx` and `onnx/vision_model.onnx`, `onnx/text_model_fp16.onnx`, ...), where
 * both towers are among `paths`. They are preferred to a joint `onnx/model.onnx` of the same
 * repository: each tower then runs alone, without a dummy of the other modality.
 */
export function findTowerGraphs(
  variant: Variant,
  paths: Iterable<string>,
): { text: string; vision: string } | undefined {
  const all = [...paths];
  const text = firstCandidate(
    CANDIDATES[variant].map((candidate) => towerPath(candidate, 'text')),
    all,
  );
  if (text === undefined) return undefined;
  const vision = towerPath(text, 'vision', 'text');
  return all.includes(vision) ? { text, vision } : undefined;
}

/** A graph's path with its file name's leading `model` (or `<from>_model`) made `<tower>_model`. */
export function towerPath(path: string, tower: 'text' | 'vision', from?: 'text' | 'vision'): string {
  const slash = path.lastIndexOf('/') + 1;
  const prefix = from ? `${from}_model` : 'model';
  const name = path.slice(slash);
  return name.startsWith(prefix) ? `${path.slice(0, slash)}${tower}_model${name.slice(prefix.length)}` : path;
}

function firstCandidate(candidates: readonly string[], all: string[]): string | undefined {
  for (const candidate of candidates) {
    if (!candidate.includes('*')) {
      if (all.includes(candidate)) return candidate;
      continue;
    }
    const pattern = new RegExp(`^${candidate.split('*').map(escapeRegExp).join('[^/]*')}$`);
    const native = (path: string) => path.includes('arm64') === (arch === 'arm64');
    const matches = all
      .filter((path) => pattern.test(path))
      .sort((a, b) => Number(native(b)) - Number(native(a)) || (a < b ? -1 : a > b ? 1 : 0));
    if (matches.length > 0) return matches[0];
  }
  return undefined;
}

/** Every variant whose graph is among `paths`, with that graph. */
export function variantsIn(paths: Iterable<string>): Array<{ variant: Variant; graph: string }> {
  const all = [...paths];
  return VARIANTS.flatMap((variant) => {
    const graph = findVariantGraph(variant, all);
    return graph ? [{ variant, graph }] : [];
  });
}

/**
 * The external-data files of a graph: the files in its folder whose names start with the graph's
 * file name (`model.onnx_data`, `model.onnx.data`, `model.onnx_data_1`, ...), as exporters name
 * them for models over protobuf's 2 GB limit.
 */
export function externalDataFiles(graphPath: string, allPaths: Iterable<string>): string[] {
  const folder = graphPath.slice(0, graphPath.lastIndexOf('/') + 1);
  return [...allPaths]
    .filter((path) => path !== graphPath && path.startsWith(graphPath) && !path.slice(folder.length).includes('/'))
    .sort();
}

/**
 * A served id, `<id>` or `<id>:<variant>`, as its model id and variant (`defaultVariant` when it
 * names none). Repository ids have no colon, so the last one starts the variant.
 */
export function parseServedId(spec: string, defaultVariant: Variant = 'fp32'): { baseId: string; variant: Variant } {
  const colon = spec.lastIndexOf(':');
  if (colon < 0) return { baseId: spec, variant: defaultVariant };
  return { baseId: spec.slice(0, colon), variant: parseVariant(spec.slice(colon + 1)) };
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
