// Installs Debian packages the test services need, one apt-get at a time (dpkg has one lock).
import { run } from './procs.mjs';

let chain = Promise.resolve();
let updated = false;

function isRoot() {
  return typeof process.getuid === 'function' && process.getuid() === 0;
}

/** Installs the packages with apt-get (root only); throws with apt's output when that fails. */
export function aptInstall(packages, why) {
  const job = chain.then(async () => {
    if (!isRoot()) {
      throw new Error(
        `${why}: the Debian packages ${packages.join(' ')} are missing and only root can install them. ` +
          `Run: sudo apt-get install -y --no-install-recommends ${packages.join(' ')}`,
      );
    }
    process.stderr.write(`services: installing ${packages.join(' ')} (${why})…\n`);
    const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
    const lock = ['-o', 'DPkg::Lock::Timeout=300'];
    if (!updated) {
      const u = await run('apt-get', [...lock, 'update', '-q'], { env });
      if (u.code !== 0) throw new Error(`apt-get update failed (${u.code}):\n${u.stderr.slice(-2000)}`);
      updated = true;
    }
    const r = await run('apt-get', [...lock, 'install', '-y', '-q', '--no-install-recommends', ...packages], { env });
    if (r.code !== 0) {
      throw new Error(
        `apt-get install ${packages.join(' ')} failed (${r.code}):\n${(r.stdout + r.stderr).slice(-3000)}`,
      );
    }
  });
  chain = job.catch(() => {});
  return job;
}
