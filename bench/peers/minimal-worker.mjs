// Piscina loads its worker with import(); under tsx the TypeScript loader does not reach worker
// threads, so this plain-JS entry registers tsx in the worker first, then loads the real worker.
import { register } from 'tsx/esm/api';

register();
const mod = await import('./minimal-worker.ts');
export default mod.default;
