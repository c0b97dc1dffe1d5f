// The catalog cache a test's fabric uses. A run of the suite (scripts/test.mjs) shares one, made for the run and
// removed after it: its entries are keyed by model key and folder stamp (catalog/cache.ts), so a model folder's
// manifest (a model load), files' sha256 and tokenizer check are computed once per run instead of by every control
// plane, agent and in-process fabric that starts. A file run on its own keeps the folder it passes.
export function testCatalogCache(own: string): string {
  return process.env.NDIF_TEST_CATALOG_CACHE || own;
}
