/**
 * How much memory the models may hold: the memory budget, by default 80% of what this process may
 * use (its cgroup's limit in a container, else the machine's memory), and the process's resident
 * size, which a model's first session is measured by.
 */
import { totalmem } from 'node:os';

/** Bytes this process may use: the cgroup limit when one is set below the machine's memory. */
export function memoryLimitBytes(): number {
  const total = totalmem();
  // Node reads cgroup v1 and v2 limits; 0 or a huge number mean none.
  const constrained = process.constrainedMemory?.() ?? 0;
  return constrained > 0 && constrained < total ? constrained : total;
}

/** The budget for loaded models: the setting in MB, else 80% of the memory limit. */
export function memoryBudgetBytes(budgetMb: number | null): number {
  return budgetMb !== null ? budgetMb * 2 ** 20 : Math.floor(memoryLimitBytes() * 0.8);
}

export function residentBytes(): number {
  return process.memoryUsage.rss();
}
