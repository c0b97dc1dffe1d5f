// Reads a files-store blob while its writer (files-writer.ts) still writes it: the pieces as they land in its data
// file, each passed on at once, then, once the writer finished, a check of the whole against the recorded size and
// sha256. The piece that completes the size is held back until that check passed, so a reader never gets all of a
// blob's bytes unless they are the ones recorded.
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { blobCorrupt, blobWriteAborted, blobWriteStalled } from './errors.js';
import type { BlobPaths } from './files-paths.js';
import type { BlobInfo, GrowingOptions } from './port.js';

type FileHandle = Awaited<ReturnType<typeof open>>;

/** Pieces read at most this large. */
const PIECE_BYTES = 1024 * 1024;
/** Waits between looks at a blob that has no new bytes: from the first to the last, doubling. */
const FIRST_WAIT_MS = 1;
const LAST_WAIT_MS = 16;
const DEFAULT_STALLED_MS = 30_000;

/** Opens the data file where it is: in the temp folder while written, in its shard once finished. */
export async function openGrowing(ref: string, size: number, paths: BlobPaths): Promise<FileHandle> {
  for (const path of [paths.tmpData, paths.data]) {
    try {
      return await open(path, 'r');
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
    }
  }
  const info = finishedInfo(paths);
  if (info !== undefined) throw blobCorrupt(ref, info, { size: 0, sha256: '' });
  throw blobWriteAborted(ref, 0, size);
}

/**
 * The blob's `size` bytes from `file` as they land, checked at the end against its recorded metadata. `finished`: the
 * metadata of a blob already recorded, read as it is (nothing is waited for: bytes missing from its file are corrupt).
 */
export async function* growingPieces(
  file: FileHandle,
  ref: string,
  size: number,
  paths: BlobPaths,
  options: GrowingOptions = {},
  finished?: BlobInfo,
): AsyncGenerator<Buffer> {
  const stalledMs = options.stalledMs ?? DEFAULT_STALLED_MS;
  const hash = createHash('sha256');
  let got = 0;
  let held: Buffer | undefined;
  let wait = FIRST_WAIT_MS;
  let lastGrowth = performance.now();
  let info: BlobInfo | undefined = finished;
  try {
    for (;;) {
      if (got < size) {
        const want = Math.min(PIECE_BYTES, size - got);
        const piece = Buffer.allocUnsafe(want);
        const { bytesRead } = await file.read(piece, 0, want, got);
        if (bytesRead > 0) {
          got += bytesRead;
          const part = bytesRead === want ? piece : piece.subarray(0, bytesRead);
          hash.update(part);
          if (got < size) yield part;
          else held = part;
          wait = FIRST_WAIT_MS;
          lastGrowth = performance.now();
          continue;
        }
      }
      // Nothing new: the writer finished (what was not read yet is all there), gave up, or is still writing.
      if (info !== undefined) break;
      info = finishedInfo(paths);
      if (info !== undefined) continue;
      if (!existsSync(paths.tmpData) && !existsSync(paths.data)) throw blobWriteAborted(ref, got, size);
      if (options.abandoned?.() === true) throw blobWriteAborted(ref, got, size);
      if (performance.now() - lastGrowth > stalledMs) throw blobWriteStalled(ref, got, size, stalledMs);
      await sleep(wait);
      wait = Math.min(LAST_WAIT_MS, wait * 2);
    }
  } finally {
    await file.close();
  }
  const actual = { size: got, sha256: hash.digest('hex') };
  if (info.size !== size || actual.size !== size || actual.sha256 !== info.sha256) throw blobCorrupt(ref, info, actual);
  if (held !== undefined) yield held;
}

/** The metadata a finished blob has; undefined while it is written (or when it never finished). */
function finishedInfo(paths: BlobPaths): BlobInfo | undefined {
  try {
    return JSON.parse(readFileSync(paths.meta, 'utf8')) as BlobInfo;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw e;
  }
}
