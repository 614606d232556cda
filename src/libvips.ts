/**
 * sharp (libvips) as this process uses it; import sharp from here, not from 'sharp', so that these
 * hold before any image is read.
 */
import sharp from 'sharp';

// Every image is new: libvips' operation cache would only hold memory.
sharp.cache(false);
// One thread per image. The images of a batch are decoded side by side, each on a preprocessing
// thread of its own (one per core), so libvips' threads within one image only hand its strips
// between threads: with them, a 1920x1080 JPEG's decode took 17.6-21.2 ms of CPU against 14.0-14.7
// with one (jemalloc, where sharp would use every core; on glibc's malloc sharp already uses one).
sharp.concurrency(1);

export default sharp;
