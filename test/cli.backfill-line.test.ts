/** The progress line `backfills start --wait` writes, for each state a backfill passes through. */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { backfillLine } from '../src/cli/backfill-wait.ts';
import type { BackfillRow } from '../src/cli/lists.ts';

const row = (fields: Partial<BackfillRow>): BackfillRow => ({
  id: 'bf_1',
  state: 'running',
  collections: ['tasks'],
  webhook: null,
  rows: 0,
  collection: null,
  error: null,
  created_at: '2026-11-27T10:00:00.000Z',
  updated_at: '2026-11-27T10:00:00.000Z',
  finished_at: null,
  ...fields,
});

test('a backfill that has read every collection says it is finishing, its collections counted in good English', () => {
  // The API names no collection once every one is read (it names the first while queued): the
  // line said "not started" there, after 1,500 rows (found by a fresh-clone run).
  assert.is(backfillLine(row({ rows: 1500 })), 'bf_1  running  finishing (1 collection read)  1,500 rows');
  assert.is(backfillLine(row({ collections: ['tasks', 'projects'] })), 'bf_1  running  finishing (2 collections read)  0 rows');
});

test('under way it names the collection it reads; finished, the rows and the time', () => {
  assert.is(backfillLine(row({ collection: 'projects', collections: ['tasks', 'projects'], rows: 1 })), 'bf_1  running  projects (2 of 2)  1 row');
  assert.is(backfillLine(row({ state: 'done', rows: 1200, finished_at: '2026-11-27T10:00:03.000Z' })), 'bf_1  done  1,200 rows of 1 collection in 3s');
  assert.is(backfillLine(row({ state: 'failed', rows: 5, error: 'the sync was deleted' })), 'bf_1  failed after 5 rows: the sync was deleted');
});

test.run();
