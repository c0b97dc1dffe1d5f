// Where the files store keeps a blob: its data and metadata files in a shard folder named by two hex digits of the
// ref, and, while a put is in progress, its data in the temp folder under the same name.
import { join } from 'node:path';

export interface BlobPaths {
  shard: string;
  data: string;
  meta: string;
  tmpData: string;
  tmpMeta: string;
}

export function blobPaths(dir: string, ref: string): BlobPaths {
  const shard = join(dir, ref.slice(5, 7));
  const tmp = tmpDir(dir);
  return {
    shard,
    data: join(shard, `${ref}.bin`),
    meta: join(shard, `${ref}.json`),
    tmpData: join(tmp, `${ref}.bin`),
    tmpMeta: join(tmp, `${ref}.json`),
  };
}

export function tmpDir(dir: string): string {
  return join(dir, '.tmp');
}
