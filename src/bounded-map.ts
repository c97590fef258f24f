/**
 * Drops a Map's first entries until it holds at most `max`. A Map keeps insertion order, so
 * these are the oldest; a caller that deletes a key before setting it again keeps them in order
 * of last use instead. The one bound of every in-memory cache here.
 */
export function trimOldest(map: Map<unknown, unknown>, max: number): void {
  while (map.size > max) map.delete(map.keys().next().value);
}
