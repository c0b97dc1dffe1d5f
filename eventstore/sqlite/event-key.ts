// The event id index key: a 32-bit hash of the id. Event ids are random-looking UUIDs, so an index on the id text
// (45 bytes an entry) dirties about one index page per appended event, and every dirty page is a WAL write at
// commit; an index on this integer key is a quarter of the size, so a group commit's events share its pages.
// Lookups match the key and then the id itself (a key may be shared); ids stay unique because every append
// checks its ids inside the write lock before inserting (SqliteEventStore.planLocked).

/** FNV-1a over the UTF-16 code units of the id, as a signed 32-bit integer. Stored: never change it. */
export function eventIdKey(id: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < id.length; i++) h = Math.imul(h ^ id.charCodeAt(i), 0x01000193);
  return h | 0;
}
