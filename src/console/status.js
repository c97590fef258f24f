// A sync's status as the console shows it: the indicator and the first-load progress bar.

import { h } from './dom.js';
import { count } from './format.js';

/**
 * normal / yellow / red, in words as well as colour; the rule's reason on hover and for
 * screen readers.
 */
export function indicator(status, { reason = false } = {}) {
  return h(
    'span',
    { class: `indicator indicator-${status.indicator}`, title: status.reason, 'data-indicator': status.indicator },
    h('span', { class: 'dot', 'aria-hidden': 'true' }),
    status.indicator,
    reason ? h('span', { class: 'reason' }, ` — ${status.reason}`) : h('span', { class: 'sr-only' }, `: ${status.reason}`),
  );
}

/** Tables a backfill's progress names as still loading; past these, a count. */
const PENDING_NAMED = 6;

/** What the running first load has done, when one is running: { label, value, max, detail? }. */
export function progressOf(status) {
  const p = status.progress;
  if (!p || typeof p !== 'object') return null;
  if (p.phase === 'backfill' && p.lists_total > 0) {
    const label = `Backfill: ${count(p.objects)} objects, ${count(p.lists_done)} of ${count(p.lists_total)} lists`;
    if (!Array.isArray(p.tables_pending) || !(p.tables_total > 0)) return { label, value: p.lists_done, max: p.lists_total };
    // Which tables can be queried already: the ones not named as still loading.
    const ready = p.tables_total - p.tables_pending.length;
    const named = p.tables_pending.slice(0, PENDING_NAMED).join(', ');
    const more = p.tables_pending.length > PENDING_NAMED ? ` and ${count(p.tables_pending.length - PENDING_NAMED)} more` : '';
    return {
      label: `${label}; ${count(ready)} of ${count(p.tables_total)} tables ready`,
      value: p.lists_done,
      max: p.lists_total,
      detail: p.tables_pending.length > 0 ? `Still loading: ${named}${more}` : undefined,
    };
  }
  // Between the platform's passes, connected accounts' backfills while some are not done.
  const accounts = accountsOf(status);
  if (accounts && accounts.value < accounts.max) return accounts;
  const first = !status.completed_at;
  if ((first || p.phase === 'rebuild') && p.tables_total > 0) {
    const what = first ? 'First sweep' : 'Rebuilding';
    const table = p.table ? `table ${p.table} (${Math.min(p.tables_done + 1, p.tables_total)} of ${p.tables_total})` : '';
    return { label: `${what}: ${table}, ${count(p.records)} records`, value: p.tables_done, max: p.tables_total };
  }
  return null;
}

/**
 * A Stripe platform's connected accounts (kept in the progress while any are followed):
 * { label, value, max, words }, words as in "12 of 50 backfilled, 3,400 objects"; null without.
 */
export function accountsOf(status) {
  const p = status.progress;
  if (!p || typeof p !== 'object' || !(p.accounts_total > 0)) return null;
  // Every account's core tables come before the rest of any: say so while that is the difference.
  const core = p.accounts_core_ready > p.accounts_done ? `; core tables ready in ${count(p.accounts_core_ready)}` : '';
  const words = `${count(p.accounts_done)} of ${count(p.accounts_total)} backfilled, ${count(p.accounts_objects)} objects${core}`;
  return { label: `Connected accounts: ${words}`, value: p.accounts_done, max: p.accounts_total, words };
}

/** A labelled <progress> for a running backfill or first sweep; null when none runs. */
export function progressBar(status) {
  const progress = progressOf(status);
  if (!progress) return null;
  const label = h('span', { class: 'progress-label' }, progress.label);
  const bar = h('progress', { max: progress.max, value: progress.value, 'aria-label': progress.label });
  if (!progress.detail) return h('div', { class: 'progress' }, bar, label);
  return h('div', { class: 'progress' }, bar, label, h('div', { class: 'progress-detail' }, progress.detail));
}
