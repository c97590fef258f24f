// The Backfills tab's list: each backfill's state, progress and times, Cancel for running ones.

import { h, identifier } from '../dom.js';
import { at, count, counted } from '../format.js';

/**
 * @typedef {{
 *   id: string, state: 'running' | 'done' | 'canceled' | 'failed', collections: string[],
 *   webhook: string | null, rows: number, collection: string | null, error: string | null,
 *   created_at: string, updated_at: string, finished_at: string | null,
 * }} Backfill
 */

/**
 * How far a running backfill is: { label, value, max }. Against the rows its collections had
 * when the page loaded (rows: collection → count) when all are known, else collections read.
 * @param {Backfill} backfill
 * @param {Map<string, number>} rows
 * @param {boolean} waiting an older one of the sync runs first
 */
export function backfillProgress(backfill, rows, waiting) {
  const { collections } = backfill;
  const index = backfill.collection ? collections.indexOf(backfill.collection) : -1;
  const where =
    waiting || index < 0
      ? 'waiting for the one before it to finish'
      : `reading ${backfill.collection} (${index + 1} of ${counted(collections.length, 'collection', 'collections')})`;
  const known = collections.every((c) => rows.has(c));
  const total = known ? collections.reduce((sum, c) => sum + (rows.get(c) ?? 0), 0) : 0;
  // Rows change while it reads: "about", and the bar never runs past full.
  if (total > 0)
    return { label: `${count(backfill.rows)} of about ${counted(total, 'row', 'rows')}, ${where}`, value: Math.min(backfill.rows, total), max: total };
  return { label: `${counted(backfill.rows, 'row', 'rows')}, ${where}`, value: Math.max(index, 0), max: collections.length };
}

/** The state in words, coloured like the sync indicator: done green, failed red. */
function stateBadge(backfill) {
  const badge = h('span', { class: `badge badge-backfill-${backfill.state}` }, backfill.state);
  if (backfill.state !== 'failed') return badge;
  return h('div', { class: 'status-cell' }, badge, h('span', { class: 'backfill-error' }, backfill.error ?? 'no reason given'));
}

/** The collections, all named while few; past six, the first six and how many more. */
function collectionsCell(collections) {
  const shown = collections.slice(0, 6).map((c, i) => [i ? ', ' : '', identifier(c)]);
  return collections.length > 6 ? [shown, ` and ${count(collections.length - 6)} more`] : shown;
}

const HEADERS = ['Backfill', 'State', 'Progress', 'Collections', 'Sent to', 'Started', 'Finished', 'Actions'];

/**
 * The list as a table, newest first.
 * @param {Backfill[]} backfills
 * @param {{ rows: Map<string, number>, webhooks: Map<string, string>, cancel: (b: Backfill) => void }} options
 */
export function backfillTable(backfills, { rows, webhooks, cancel }) {
  // A sync's backfills run one at a time, oldest first: the oldest running one reads, the rest wait.
  const reading = backfills.findLast((b) => b.state === 'running');
  const body = backfills.map((backfill) => {
    const running = backfill.state === 'running';
    const progress = running ? backfillProgress(backfill, rows, backfill !== reading) : null;
    const target = backfill.webhook
      ? h('span', null, 'webhook ', webhooks.has(backfill.webhook) ? h('code', null, webhooks.get(backfill.webhook)) : h('code', null, backfill.webhook))
      : 'every consumer of the topics';
    const cells = [
      backfill.reason === 'slot_lost'
        ? h('span', null, h('code', null, backfill.id), h('span', { class: 'muted' }, ' the re-read after a lost slot'))
        : h('code', null, backfill.id),
      stateBadge(backfill),
      progress
        ? h(
            'div',
            { class: 'progress' },
            h('progress', { max: progress.max, value: progress.value, 'aria-label': `Backfill ${backfill.id}: ${progress.label}` }),
            h('span', { class: 'progress-label' }, progress.label),
          )
        : h('span', { class: 'nowrap' }, counted(backfill.rows, 'row', 'rows')),
      collectionsCell(backfill.collections),
      target,
      at(backfill.created_at),
      at(backfill.finished_at),
      running
        ? h(
            'button',
            {
              type: 'button',
              class: 'secondary',
              'data-key': `${backfill.id}:cancel`,
              'aria-label': `Cancel backfill ${backfill.id}`,
              onclick: () => cancel(backfill),
            },
            'Cancel',
          )
        : h('span', { class: 'muted' }, '—'),
    ];
    return h(
      'tr',
      { 'data-backfill': backfill.id, 'data-state': backfill.state },
      cells.map((cell, i) => h(i === 0 ? 'th' : 'td', { 'data-label': HEADERS[i], scope: i === 0 ? 'row' : null }, cell)),
    );
  });
  return h(
    'div',
    { class: 'table-wrap' },
    h(
      'table',
      { class: 'backfills' },
      h('caption', { class: 'sr-only' }, 'Backfills, newest first'),
      h(
        'thead',
        null,
        h(
          'tr',
          null,
          HEADERS.map((name) => h('th', { scope: 'col' }, name)),
        ),
      ),
      h('tbody', null, body),
    ),
  );
}
