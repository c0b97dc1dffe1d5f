// The `ndif` CLI run in the test's own process: its main() with stdout and stderr captured.
import { main } from '../../client/cli/main.js';

export interface CliRun {
  code: number;
  out: string;
  err: string;
}

/** `ndif <args>` with `env` as its whole environment (NDIF_URL, NDIF_API_KEY…). */
export async function runNdif(args: string[], env: NodeJS.ProcessEnv, signal?: AbortSignal): Promise<CliRun> {
  let out = '';
  let err = '';
  const code = await main(args, {
    stdout: {
      write: (s: string) => {
        out += s;
      },
    },
    stderr: {
      write: (s: string) => {
        err += s;
      },
    },
    env,
    ...(signal ? { signal } : {}),
  });
  return { code, out, err };
}
