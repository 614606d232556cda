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
  /** How its int8 values were chosen: GPTQ on calibration statistics, or round-to-nearest. */
  rounding: 'gptq' | 'nearest';
}

export interface SkippedMatMul {
  name: string;
  /** The second input, when there is one. */
  weight?: string;
  reason: string;
}

/** The calibration data GPTQ rounding used. */
export interface CalibrationSummary {
  /** The text file it came from. */
  source: string;
  /** Model inputs (texts or pairs) run, and their tokens. */
  inputs: number;
  tokens: number;
  /** Time to run them and collect the statistics. */
  seconds: number;
}

export interface QuantizeReport {
  converted: ConvertedMatMul[];
  skipped: SkippedMatMul[];
  /** Encoded model size before and after, in bytes. */
  bytesBefore: number;
  bytesAfter: number;
  calibration?: CalibrationSummary;
  /** Why there was no calibration (the weights were rounded to nearest), when asked for none or it was not possible. */
  uncalibrated?: string;
}

/** A short human-readable summary: counts, sizes and one line per distinct skip reason. */
export function formatQuantizeReport(report: QuantizeReport): string {
  const mb = (bytes: number) => `${(bytes / 1e6).toFixed(1)} MB`;
  const folded = report.converted.filter((c) => c.biasFolded).length;
  const gptq = report.converted.filter((c) => c.rounding === 'gptq').length;
  const c = report.calibration;
  const rounding =
    gptq === 0
      ? `rounding: to nearest${report.uncalibrated ? ` (${report.uncalibrated})` : ''}`
      : `rounding: GPTQ${gptq < report.converted.length ? ` for ${gptq} (the others to nearest)` : ''}` +
        (c
          ? `, calibrated on ${c.inputs} inputs (${c.tokens} tokens) from ${c.source} in ${c.seconds.toFixed(1)} s`
          : '');
  const lines = [
    `${report.converted.length} MatMul(s) -> DynamicQuantizeMatMul (int8 weights, per-column scales), ${folded} bias Add(s) folded`,
    rounding,
    `${mb(report.bytesBefore)} -> ${mb(report.bytesAfter)}`,
  ];
  const reasons = new Map<string, number>();
  for (const s of report.skipped) reasons.set(s.reason, (reasons.get(s.reason) ?? 0) + 1);
  for (const [reason, count] of reasons) lines.push(`kept float: ${count} x ${reason}`);
  return lines.join('\n');
}
