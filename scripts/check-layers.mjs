// Checks the source layering (docs/architecture.md, "Source layout") with dependency-cruiser; the rules are in
// .dependency-cruiser.mjs. Two passes: the TypeScript sources against the allowed arrows, then the compiled
// JavaScript in dist/ (run `tsc -p .` first) against the arrows the table allows for types only, since a compiled
// file imports only what it loads. Uses dependency-cruiser's API with the swc parser: its TypeScript parser does
// not support TypeScript 7.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { cruise } from 'dependency-cruiser';
import config, { typeOnlyArrows } from '../.dependency-cruiser.mjs';

const FOLDERS = [
  'auth',
  'bench',
  'block-source',
  'blobstore',
  'catalog',
  'client',
  'command-api',
  'domain',
  'eventstore',
  'fabric',
  'forensics',
  'gpu-agent',
  'http',
  'metrics',
  'projections',
  'protocol',
  'query-api',
  'sandbox',
  'scheduler',
  'scripts',
  'tests',
  'transport',
];

const { enhancedResolveOptions, tsConfig: _unused, ...options } = config.options;
const started = performance.now();
const problems = [];

const sources = await cruise(
  FOLDERS,
  {
    ...options,
    validate: true,
    ruleSet: { allowed: config.allowed, allowedSeverity: config.allowedSeverity, forbidden: config.forbidden },
    // Unchanged files are not parsed again (by content, so a fresh clone or a switched branch is safe).
    cache: { folder: 'node_modules/.cache/dependency-cruiser/sources', strategy: 'content' },
  },
  enhancedResolveOptions,
);
for (const v of sources.output.summary.violations)
  problems.push(`${v.rule.name === 'not-in-allowed' ? 'not in the layering table' : v.rule.name}: ${v.from} → ${v.to}`);

// The compiled JavaScript: paths relative to dist/, so the same regexes apply (.js for .ts). Cruised from inside
// dist/: dependency-cruiser decides whether its cache is fresh by hashing the files under the working directory, which
// must be the files cruised (from the root it hashed the sources, never matched the cached modules, and cruised the
// whole of dist/ again on every other run).
const cacheDir = join(process.cwd(), 'node_modules', '.cache', 'dependency-cruiser');
const folders = FOLDERS.filter((f) => f !== 'scripts' && existsSync(`dist/${f}`));
process.chdir('dist');
const compiled = await cruise(
  folders,
  {
    ...options,
    parser: 'acorn',
    cache: { folder: join(cacheDir, 'compiled'), strategy: 'content' },
    validate: true,
    ruleSet: {
      forbidden: typeOnlyArrows.map((a) => ({
        name: 'types-only',
        comment: a.comment,
        severity: 'error',
        from: { path: a.from },
        to: { path: a.to },
      })),
    },
  },
  { extensions: ['.js'] },
);
process.chdir('..');
for (const v of compiled.output.summary.violations) {
  // A stale file of dist/ (its source is gone) is not the code's.
  if (!existsSync(v.from.replace(/\.js$/, '.ts'))) continue;
  problems.push(`allowed for types only, imported for its values: ${v.from.replace(/\.js$/, '.ts')} → ${v.to}`);
}

if (problems.length > 0) {
  for (const p of problems) console.error(p);
  console.error(`layering: ${problems.length} violations (docs/architecture.md, .dependency-cruiser.mjs)`);
  process.exit(1);
}
const s = sources.output.summary;
console.log(
  `layering: ${s.totalCruised} modules, ${s.totalDependenciesCruised} imports, no violations (${Math.round(performance.now() - started)} ms)`,
);
