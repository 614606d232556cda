export { pool, poolings, meanPool, clsPool, maxPool, lastTokenPool, type Pooling } from './pooling.js';
export { l2NormalizeRows, cutDimensions, layerNormRows, applyBeforeCut, type BeforeCut } from './normalize.js';
export { cosine, sigmoid } from './scores.js';
export {
  calibrationRanges,
  packSignBits,
  quantize,
  quantizedWidth,
  type Precision,
  type QuantizationRanges,
} from './quantize.js';
export { float32ToBase64, float32ToJson } from './encoding.js';
export { percentile } from './percentile.js';
export { spladePool, tokenWeightsPool, topKSparse, tokenRows, type SparseRows } from './sparse.js';
