import { api, ApiError } from '../api.js';
import { h } from '../dom.js';
import { kindName, syncName } from '../format.js';
import { indicator } from '../status.js';
import { backfillsTab } from './sync-backfills.js';
import { connectTab } from './sync-connect.js';
import { deleteTab } from './sync-delete.js';
import { overviewTab } from './sync-overview.js';
import { settingsTab } from './sync-settings.js';
import { webhooksTab } from './sync-webhooks.js';

const TABS = [
  ['overview', 'Overview', overviewTab],
  ['connect', 'Connect', connectTab],
  ['settings', 'Settings', settingsTab],
  ['webhooks', 'Webhooks', webhooksTab],
  ['backfills', 'Backfills', backfillsTab],
  ['delete', 'Delete', deleteTab],
];

/** One sync: a heading with its status, and a page per tab (each its own URL, so links and Back work). */
export async function syncView(ctx) {
  const [id, tab = 'overview'] = ctx.params;
  let sync;
  try {
    sync = await api('GET', `/api/syncs/${encodeURIComponent(id)}`);
  } catch (error) {
    if (error instanceof ApiError && error.status === 404) {
      ctx.title('Sync not found');
      ctx.root.append(
        h('h1', null, 'Sync not found'),
        h('p', null, ctx.principal.kind === 'admin' ? `There is no sync ${id}.` : `There is no sync ${id} in your account.`),
        h('p', null, h('a', { href: '#/' }, 'Back to the syncs')),
      );
      return;
    }
    throw error;
  }
  const [, label, render] = TABS.find(([name]) => name === tab) ?? TABS[0];
  ctx.title(`${syncName(sync)} · ${label}`);
  const status = h('span', { class: 'head-status' }, indicator(sync.status));
  const panel = h('section', { class: 'panel', 'aria-labelledby': 'tab-title' });
  ctx.root.append(
    h('p', { class: 'crumbs' }, h('a', { href: '#/' }, 'Syncs'), ' / ', syncName(sync)),
    h('div', { class: 'page-head' }, h('h1', null, syncName(sync), ' ', h('span', { class: 'badge' }, kindName(sync.kind))), status),
    h(
      'nav',
      { class: 'tabs', 'aria-label': 'Sync pages' },
      h(
        'ul',
        null,
        TABS.map(([name, text]) => h('li', null, h('a', { href: `#/syncs/${sync.id}/${name}`, 'aria-current': name === tab ? 'page' : null }, text))),
      ),
    ),
    panel,
  );
  panel.append(h('h2', { id: 'tab-title' }, label));
  /** Tabs call this with a fresher view of the sync (the heading's indicator follows). */
  const updated = (fresh) => status.replaceChildren(indicator(fresh.status));
  await render(ctx, panel, sync, updated);
}
