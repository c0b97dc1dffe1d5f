// Which test file starts next (scripts/test.mjs). A file's load is the CPU it keeps busy while it runs (CPU seconds
// per wall second, from scripts/test-durations.json): an end-to-end file running a fabric, two agents and their
// runners keeps about one core busy, a file waiting on PostgreSQL or a socket a fraction of one. Files start while
// the running files' loads fit the machine's capacity, so heavy files do not starve each other's watchdogs and
// deadlines, and light files fill the gaps.

const UNKNOWN_LOAD = 1;
const MIN_LOAD = 0.1;
const MAX_LOAD = 1.5;
/**
 * What a file using PostgreSQL or Kafka adds to the machine's load beyond its own processes' CPU (which is all the
 * table measures): the servers' work for it. In a full run where a two-core machine's end-to-end files got half a
 * core each, the distributed ones had measured 0.5 core of their own.
 */
export const SERVICE_LOAD = 0.3;

/**
 * The files to run, in the order to offer them: known files longest first (so a long one does not end the run
 * alone), files the table lacks (new ones) after them, in their given order. Each with its load; `usesServers(file)`
 * says whether it uses PostgreSQL or Kafka (SERVICE_LOAD more).
 */
export function planFiles(files, table, sourceOf, usesServers = () => false) {
  return files
    .map((file, i) => {
      const known = table[sourceOf(file)];
      const own =
        known && known.wall > 0 ? Math.min(MAX_LOAD, Math.max(MIN_LOAD, known.cpu / known.wall)) : UNKNOWN_LOAD;
      const load = Math.round((own + (usesServers(file) ? SERVICE_LOAD : 0)) * 100) / 100;
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
