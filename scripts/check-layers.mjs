// Checks the source layering (docs/architecture.md, "Source layout") with dependency-cruiser: the rules are
// .dependency-cruiser.mjs. Runs dependency-cruiser through its API rather than its CLI: the CLI refuses Node 20,
// which the project supports; and it parses with swc, since its TypeScript parser does not support TypeScript 7.
import { cruise } from 'dependency-cruiser';
import config from '../.dependency-cruiser.mjs';

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

const { enhancedResolveOptions, tsConfig: _ignored, ...options } = config.options;
const started = performance.now();
const result = await cruise(
  FOLDERS,
  {
    ...options,
    validate: true,
    ruleSet: { allowed: config.allowed, allowedSeverity: config.allowedSeverity, forbidden: config.forbidden },
  },
  enhancedResolveOptions,
);
const { summary } = result.output;
if (summary.error > 0 || summary.warn > 0) {
  for (const v of summary.violations)
    console.error(
      `${v.rule.name === 'not-in-allowed' ? 'not in the layering table' : v.rule.name}: ${v.from} → ${v.to}`,
    );
  console.error(`layering: ${summary.error} violations (docs/architecture.md, .dependency-cruiser.mjs)`);
  process.exit(1);
}
console.log(
  `layering: ${summary.totalCruised} modules, ${summary.totalDependenciesCruised} imports, no violations (${Math.round(performance.now() - started)} ms)`,
);
