/** Scores from model logits. */

/** The logistic function, without overflow: exp is only taken of a non-positive number. */
export function sigmoid(x: number): number {
  if (x >= 0) return 1 / (1 + Math.exp(-x));
  const e = Math.exp(x);
  return e / (1 + e);
}
