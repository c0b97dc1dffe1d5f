// Which test file starts next (scripts/test.mjs). A file's load is the CPU it keeps busy while it runs (CPU seconds
// per wall second, from scripts/test-durations.json): an end-to-end file running a fabric, two agents and their
// runners keeps about one core busy, a file waiting on PostgreSQL or a socket a fraction of one. Files start while
// the running files' loads fit the machine's capacity, so heavy files do not starve each other's watchdogs and
// deadlines, and light files fill the gaps.

const UNKNOWN_LOAD = 1;
const MIN_LOAD = 0.1;
const MAX_LOAD = 1.5;

/**
 * The files to run, in the order to offer them: known files longest first (so a long one does not end the run
 * alone), files the table lacks (new ones) after them, in their given order. Each with its load.
 */
export function planFiles(files, table, sourceOf) {
  return files
    .map((file, i) => {
      const known = table[sourceOf(file)];
      const load =
        known && known.wall > 0 ? Math.min(MAX_LOAD, Math.max(MIN_LOAD, known.cpu / known.wall)) : UNKNOWN_LOAD;
      return { file, i, wall: known?.wall ?? -1, load };
    })
    .sort((a, b) => b.wall - a.wall || a.i - b.i)
    .map(({ file, wall, load }) => ({ file, wall, load }));
}

/**
 * The index in `queue` of the file to start now, or -1 to wait for a running one to end. The head of the queue
 * starts when it fits; another file that fits may pass it while the head has waited less than `maxPassMs`, so light
 * files fill the gaps beside heavy ones without starving the head. With nothing running, the head starts whatever
 * its load.
 */
export function pickNext(queue, running, { capacity, maxFiles, headWaitedMs = 0, maxPassMs = 20_000 }) {
  if (queue.length === 0) return -1;
  if (running.length === 0) return 0;
  if (running.length >= maxFiles) return -1;
  const load = running.reduce((s, r) => s + r.load, 0);
  if (load + queue[0].load <= capacity) return 0;
  if (headWaitedMs >= maxPassMs) return -1;
  for (let i = 1; i < queue.length; i++) if (load + queue[i].load <= capacity) return i;
  return -1;
}
