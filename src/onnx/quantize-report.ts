/**
 * What a weight quantization pass did, for logs, the CLI and tests: which
 * MatMuls became DynamicQuantizeMatMul, which stayed float and why, and what
 * it did to the model size.
 */

export interface ConvertedMatMul {
  /** The MatMul's node name (its first output's name when it has none). */
  name: string;
  /** The float32 weight initializer that was replaced. */
  weight: string;
  /** The weight's [K, N]: K inputs, N output columns (one scale each). */
  shape: [number, number];
  /** Whether a following bias Add was folded into the node (and removed). */
  biasFolded: boolean;
}

export interface SkippedMatMul {
  name: string;
  /** The second input, when there is one. */
  weight?: string;
  reason: string;
}

export interface QuantizeReport {
  converted: ConvertedMatMul[];
  skipped: SkippedMatMul[];
  /** Encoded model size before and after, in bytes. */
  bytesBefore: number;
  bytesAfter: number;
}

/** A short human-readable summary: counts, sizes and one line per distinct skip reason. */
export function formatQuantizeReport(report: QuantizeReport): string {
  const mb = (bytes: number) => `${(bytes / 1e6).toFixed(1)} MB`;
  const folded = report.converted.filter((c) => c.biasFolded).length;
  const lines = [
    `${report.converted.length} MatMul(s) -> DynamicQuantizeMatMul (int8 weights, per-column scales), ${folded} bias Add(s) folded`,
    `${mb(report.bytesBefore)} -> ${mb(report.bytesAfter)}`,
  ];
  const reasons = new Map<string, number>();
  for (const s of report.skipped) reasons.set(s.reason, (reasons.get(s.reason) ?? 0) + 1);
  for (const [reason, count] of reasons) lines.push(`kept float: ${count} x ${reason}`);
  return lines.join('\n');
}
