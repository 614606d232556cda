/**
 * Where and how a model runs: on which device, in how many sessions, with how many intra-op threads
 * each, and whether it has a solo session (all the cores, for a batch that runs alone). Decided per
 * model at load from its measured resident size and the memory budget, so that a 90 MB model keeps the
 * fastest layout on a CPU (one single-threaded session per core) while a 2 GB one gets fewer sessions
 * with more threads each and every loaded model stays inside the budget. Pure: no I/O, no state.
 */

export interface Placement {
  /** `cpu`, or the accelerator the model's sessions run on. */
  device: string;
  sessions: number;
  threadsPerSession: number;
  /** Intra-op threads of the model's one solo session; 0 when it has none. */
  soloThreads: number;
}

export interface PlacementLimits {
  /** Most sessions one model may get (the workers setting). */
  maxSessions: number;
  /** Intra-op threads of a session when the model gets all its sessions (the intra-op threads setting). */
  threadsPerSession: number;
  /** Intra-op threads of a solo session (the solo threads setting); no solo session when not above a session's threads. */
  soloThreads: number;
  /** Bytes all loaded models together may hold. */
  budgetBytes: number;
}

/** A model to place: its id, the resident bytes one session of it measured, and its device. */
export interface PlacementRequest {
  id: string;
  sessionBytes: number;
  device: string;
}

/** What a model's sessions are expected to hold, for the budget. */
export function placementBytes(placement: Placement, sessionBytes: number): number {
  return sessionBytes * (placement.sessions + (placement.soloThreads > 0 ? 1 : 0));
}

export class PlacementError extends Error {
  override name = 'PlacementError';
  constructor(
    readonly model: string,
    readonly sessionBytes: number,
    readonly freeBytes: number,
    readonly budgetBytes: number,
  ) {
    const used = budgetBytes - freeBytes;
    super(
      `Model "${model}" needs ${mb(sessionBytes)} MB for one session, but the memory budget is ${mb(budgetBytes)} MB` +
        (used > 0 ? ` with ${mb(used)} MB held by other loaded models` : '') +
        '. Raise ONNX_GATEWAY_MEMORY_BUDGET_MB, serve fewer models, or serve a smaller variant (e.g. int8).',
    );
  }
}

const mb = (bytes: number) => Math.round(bytes / 2 ** 20);

/**
 * Places models together inside `freeBytes`. Each starts from the fastest layout (all its sessions,
 * the configured threads each); while the models together do not fit, the one holding the most gives
 * up a session, and the cores are shared among those left, in the layout that keeps the most of them
 * busy (4 sessions of 2 threads on 8 cores rather than 5 of 1). Solo sessions come
 * last, in the order given, where memory is left. A model that does not fit even as one session is
 * refused (PlacementError), the others keep their places. An accelerator model runs as one session.
 */
export function placeModels(
  requests: PlacementRequest[],
  limits: PlacementLimits,
  freeBytes = limits.budgetBytes,
): { placements: Map<string, Placement>; refused: PlacementError[] } {
  const refused: PlacementError[] = [];
  const sessions = new Map<string, number>();
  let free = freeBytes;
  // One session each first, in order: what does not fit as one session is refused.
  for (const request of requests) {
    if (request.sessionBytes > free) {
      refused.push(new PlacementError(request.id, request.sessionBytes, free, limits.budgetBytes));
      continue;
    }
    free -= request.sessionBytes;
    sessions.set(request.id, 1);
  }
  const placed = requests.filter((request) => sessions.has(request.id));
  // Then every CPU model wants all its sessions; the largest holder gives way until all fit.
  const cpu = placed.filter((request) => request.device === 'cpu');
  for (const request of cpu) sessions.set(request.id, limits.maxSessions);
  const total = () => placed.reduce((sum, request) => sum + sessions.get(request.id)! * request.sessionBytes, 0);
  while (total() > freeBytes) {
    let largest: PlacementRequest | undefined;
    for (const request of cpu) {
      const count = sessions.get(request.id)!;
      if (count > 1 && (!largest || count * request.sessionBytes > sessions.get(largest.id)! * largest.sessionBytes))
        largest = request;
    }
    sessions.set(largest!.id, sessions.get(largest!.id)! - 1);
  }
  const cores = limits.maxSessions * limits.threadsPerSession;
  for (const request of cpu) sessions.set(request.id, busiestLayout(sessions.get(request.id)!, cores));
  free = freeBytes - total();
  const placements = new Map<string, Placement>();
  for (const request of placed) {
    const count = sessions.get(request.id)!;
    if (request.device !== 'cpu') {
      placements.set(request.id, {
        device: request.device,
        sessions: 1,
        threadsPerSession: limits.threadsPerSession,
        soloThreads: 0,
      });
      continue;
    }
    const threadsPerSession = Math.max(limits.threadsPerSession, Math.floor(cores / count));
    let soloThreads = 0;
    if (limits.soloThreads > threadsPerSession && request.sessionBytes <= free) {
      soloThreads = limits.soloThreads;
      free -= request.sessionBytes;
    }
    placements.set(request.id, { device: request.device, sessions: count, threadsPerSession, soloThreads });
  }
  return { placements, refused };
}

/** Of up to `most` sessions, the count whose equal shares of the cores leave the fewest idle (the most sessions on a tie). */
function busiestLayout(most: number, cores: number): number {
  let best = 1;
  for (let count = 1; count <= most; count++) {
    if (count * Math.floor(cores / count) >= best * Math.floor(cores / best)) best = count;
  }
  return best;
}
