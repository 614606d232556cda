/**
 * libuv's thread pool, where sharp decodes the images of every thread of the process, has 4 threads
 * unless UV_THREADPOOL_SIZE says otherwise: 4 images decoding at once however many cores the
 * preprocessing threads have (engine/image-preprocess-pool.ts). Sized to the cores here, imported
 * first by the command line so that it runs before anything uses the pool (libuv makes it at its
 * first use, and reads the variable then). An operator's own setting stands. Node 20's module
 * loader uses the pool before any module runs: there the variable must be set outside.
 */
import { availableParallelism } from 'node:os';

process.env.UV_THREADPOOL_SIZE ??= String(Math.max(4, availableParallelism()));
