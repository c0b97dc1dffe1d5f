// The data folder holds every prompt, result and key hash of every user: it and the stores in it are readable by
// their owner only. SQLite creates its -wal and -shm files with the mode of the database file, so creating the
// database file 0600 before SQLite opens it keeps those private too.
import { chmodSync, closeSync, existsSync, mkdirSync, openSync } from 'node:fs';

/** Creates the folder (and its parents) if missing and makes it 0700. */
export function privateDir(path: string): void {
  mkdirSync(path, { recursive: true, mode: 0o700 });
  chmodSync(path, 0o700);
}

/** Creates the file empty if missing and makes it (and a SQLite database's -wal and -shm files) 0600. */
export function privateFile(path: string): void {
  if (!existsSync(path)) closeSync(openSync(path, 'a', 0o600));
  for (const p of [path, `${path}-wal`, `${path}-shm`]) if (existsSync(p)) chmodSync(p, 0o600);
}
