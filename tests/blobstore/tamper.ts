// Changing a stored blob's bytes behind the files store's back (a disk fault, a hand edit), wherever the store keeps
// them: a data file in its shard folder, or a row of the small-blob file.
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { SMALL_BLOBS_FILE } from '../../blobstore/small-blobs.js';

/**
 * Replaces the bytes of the first stored blob `pick` chooses (by its ref and bytes) with `change(bytes)`; returns its
 * ref, or undefined when none was chosen.
 */
export function tamperStoredBlob(
  dir: string,
  pick: (ref: string, bytes: Buffer) => boolean,
  change: (bytes: Buffer) => Buffer,
): string | undefined {
  const db = existsSync(join(dir, SMALL_BLOBS_FILE)) ? new Database(join(dir, SMALL_BLOBS_FILE)) : undefined;
  try {
    for (const row of (db?.prepare('SELECT ref, bytes FROM small_blobs').all() ?? []) as {
      ref: string;
      bytes: Buffer;
    }[]) {
      if (!pick(row.ref, row.bytes)) continue;
      db!.prepare('UPDATE small_blobs SET bytes = ? WHERE ref = ?').run(change(row.bytes), row.ref);
      return row.ref;
    }
  } finally {
    db?.close();
  }
  for (const name of readdirSync(dir, { recursive: true, encoding: 'utf8' })) {
    const m = /(blob_[0-9a-f]{32})\.bin$/.exec(name);
    if (m === null || name.startsWith('.tmp')) continue;
    const file = join(dir, name);
    const bytes = readFileSync(file);
    if (!pick(m[1]!, bytes)) continue;
    writeFileSync(file, change(bytes));
    return m[1];
  }
  return undefined;
}
