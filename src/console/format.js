// How times, durations and counts read in the console.

import { h } from './dom.js';

/** 0.4 s, 12 s, 3 min 5 s, 2 h 10 min, 3 d 4 h. */
export function duration(seconds) {
  if (seconds === null || seconds === undefined || Number.isNaN(seconds)) return '—';
  if (seconds < 10) return `${Math.round(seconds * 10) / 10} s`;
  if (seconds < 60) return `${Math.round(seconds)} s`;
  const s = Math.round(seconds);
  if (s < 3600) return `${Math.floor(s / 60)} min${s % 60 ? ` ${s % 60} s` : ''}`;
  if (s < 86400) return `${Math.floor(s / 3600)} h${Math.floor((s % 3600) / 60) ? ` ${Math.floor((s % 3600) / 60)} min` : ''}`;
  return `${Math.floor(s / 86400)} d${Math.floor((s % 86400) / 3600) ? ` ${Math.floor((s % 86400) / 3600)} h` : ''}`;
}

export const count = (n) => (n === null || n === undefined ? '—' : Number(n).toLocaleString('en-US'));

/** "1 delivery", "3 deliveries". */
export const counted = (n, one, many) => `${count(n)} ${Number(n) === 1 ? one : many}`;

export const dateTime = (iso) => (iso ? new Date(iso).toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'medium' }) : '—');

/** "12 s ago" in a <time> whose title and datetime give the exact moment. */
export function ago(iso) {
  if (!iso) return h('span', { class: 'muted' }, 'never');
  const seconds = Math.max(0, (Date.now() - Date.parse(iso)) / 1000);
  return h('time', { datetime: iso, title: dateTime(iso) }, seconds < 1 ? 'just now' : `${duration(seconds)} ago`);
}

/** A moment as an exact, readable <time>. */
export const at = (iso) => (iso ? h('time', { datetime: iso }, dateTime(iso)) : h('span', { class: 'muted' }, '—'));

export const kindName = (kind) => (kind === 'airtable' ? 'Airtable' : kind === 'stripe' ? 'Stripe' : kind);

/** What a sync is called: its base's or Stripe account's name, else its base id or id. */
export const syncName = (sync) => sync.name || sync.base_id || sync.id;
