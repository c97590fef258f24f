import { api } from '../api.js';
import { h, notice } from '../dom.js';
import { ago, duration, kindName, syncName } from '../format.js';
import { indicator, progressBar } from '../status.js';

const POLL_MS = 2000;

/** Every sync of the account (the operator: of every account), live. */
export async function syncsView(ctx) {
  ctx.title('Syncs');
  const admin = ctx.principal.kind === 'admin';
  const headers = ['Name', 'Kind', 'Status', 'Lag', 'Last completed sync', ...(admin ? ['Account'] : [])];
  const tbody = h('tbody');
  const list = h(
    'div',
    { class: 'table-wrap' },
    h(
      'table',
      { class: 'syncs' },
      h('caption', { class: 'sr-only' }, 'Syncs, refreshed every two seconds'),
      h(
        'thead',
        null,
        h(
          'tr',
          null,
          headers.map((name) => h('th', { scope: 'col' }, name)),
        ),
      ),
      tbody,
    ),
  );
  const empty = h(
    'div',
    { class: 'card empty', hidden: true },
    h('p', null, 'No syncs yet.'),
    h('p', null, h('a', { class: 'button', href: '#/connect' }, 'Connect an Airtable base or a Stripe account')),
  );
  const problem = h('div');
  ctx.root.append(
    h('div', { class: 'page-head' }, h('h1', null, 'Syncs'), h('a', { class: 'button', href: '#/connect' }, 'Connect a sync')),
    problem,
    list,
    empty,
  );

  /** Rows are kept by id and updated in place, so focus and hover survive a refresh. */
  const rows = new Map();
  const cellsOf = (sync) => [
    h('a', { href: `#/syncs/${sync.id}` }, syncName(sync)),
    kindName(sync.kind),
    // A sync that needs attention says why in the row itself, not only on hover.
    h(
      'div',
      { class: 'status-cell' },
      indicator(sync.status, { reason: sync.status.indicator !== 'normal' }),
      progressBar(sync.status),
      sync.status.slowed_by ? h('span', { class: 'slowed', title: sync.status.slowed_by }, 'slowed by an upstream limit') : null,
    ),
    sync.status.lag_seconds === null ? h('span', { class: 'muted' }, '—') : duration(sync.status.lag_seconds),
    ago(sync.status.completed_at),
    ...(admin ? [accountCell(sync.account_id)] : []),
  ];
  /** The operator sees whose sync it is by name; the id stays at hand on hover. */
  let accountNames = new Map();
  const accountCell = (id) => h('span', { title: id }, accountNames.get(id) ?? id);

  const refresh = async () => {
    let answer;
    try {
      answer = await api('GET', '/api/syncs');
      // A new account may own a listed sync: its name is asked for again when one is unknown.
      if (admin && answer.data.some((sync) => !accountNames.has(sync.account_id))) {
        accountNames = new Map((await api('GET', '/api/accounts')).data.map((account) => [account.id, account.name]));
      }
    } catch (error) {
      problem.replaceChildren(notice('error', `Could not refresh the syncs: ${error.message}`));
      return;
    }
    problem.replaceChildren();
    const seen = new Set();
    answer.data.forEach((sync, index) => {
      seen.add(sync.id);
      const cells = cellsOf(sync);
      let tr = rows.get(sync.id);
      if (!tr) {
        tr = h(
          'tr',
          { 'data-sync': sync.id },
          cells.map((_cell, i) => h(i === 0 ? 'th' : 'td', { scope: i === 0 ? 'row' : null, 'data-label': headers[i] })),
        );
        rows.set(sync.id, tr);
      }
      // The name cell keeps its link element unless the name changed (a focused link stays focused).
      [...tr.children].forEach((td, i) => {
        if (i === 0 && td.textContent === cells[0].textContent) return;
        td.replaceChildren(cells[i]);
      });
      // In the API's order; a row already in place is not moved (moving would drop focus).
      if (tbody.children[index] !== tr) tbody.insertBefore(tr, tbody.children[index] ?? null);
    });
    for (const [id, tr] of rows) {
      if (!seen.has(id)) {
        tr.remove();
        rows.delete(id);
      }
    }
    list.hidden = rows.size === 0;
    empty.hidden = rows.size !== 0;
  };
  await refresh();
  ctx.every(POLL_MS, refresh);
}
