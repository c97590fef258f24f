import { api } from '../api.js';
import { lineChart } from '../chart.js';
import { breakable, field, h, identifier, notice } from '../dom.js';
import { at, count, counted, duration } from '../format.js';
import { accountsOf, indicator, progressBar } from '../status.js';
import { driftSection } from './sync-drift.js';

const POLL_MS = 3000;

function definitions(pairs) {
  return h(
    'dl',
    { class: 'facts' },
    pairs.map(([term, value]) => [h('dt', null, term), h('dd', null, value)]),
  );
}

/** Status and `_sync_meta` times, lag and cycle time over the last hours, recent errors, tables. */
export async function overviewTab(ctx, panel, initial, updated) {
  const statusBox = h('div');
  const chartBox = h('div', { class: 'chart-box' });
  const tablesBox = h('div');
  const errorsBox = h('div');
  // A sync younger than the default span opens on the last hour: over six hours, its first
  // minutes would be a speck at the right edge.
  const age = Date.now() - Date.parse(initial.created_at);
  const shown = age < 6 * 3_600_000 ? 1 : 6;
  const hoursSelect = h(
    'select',
    { name: 'hours' },
    [1, 6, 24].map((n) => h('option', { value: n, selected: n === shown }, n === 1 ? 'the last hour' : `the last ${n} hours`)),
  );

  panel.append(
    h('h3', null, 'Status'),
    statusBox,
    h('div', { class: 'section-head' }, h('h3', null, 'Lag and cycle time'), field({ label: 'Show', control: hoursSelect })),
    chartBox,
    // Before the tables: a Stripe sync has more than a hundred, and errors under them go unseen.
    h('h3', null, 'Recent errors'),
    errorsBox,
    h('h3', null, 'Tables'),
    tablesBox,
  );

  const showStatus = (sync, meta) => {
    const s = sync.status;
    const source = meta ?? { started_at: s.started_at, completed_at: s.completed_at, duration_last: s.duration_last };
    const running = source.started_at && (!source.completed_at || source.started_at > source.completed_at);
    statusBox.replaceChildren(
      h('p', { class: 'status-line' }, indicator(s, { reason: true })),
      progressBar(s) ?? '',
      definitions([
        ['Sync', running ? `running since ${new Date(source.started_at).toLocaleTimeString()}` : source.completed_at ? 'between cycles' : 'not started yet'],
        // While a cycle runs, its start is newer than the last completion, and the duration is the completed one's.
        [running ? 'This cycle started (_sync_meta.started_at)' : 'Last cycle started (_sync_meta.started_at)', at(source.started_at)],
        ['Last cycle completed (_sync_meta.completed_at)', at(source.completed_at)],
        ['Duration of the last completed cycle (_sync_meta.duration_last)', duration(source.duration_last)],
        ...(s.paced_cycle_s
          ? [['Sweep pace', `spread over about ${duration(s.paced_cycle_s)}: change capture is healthy and the last cycle found nothing it had missed`]]
          : []),
        ['Lag (age of the oldest data the database may show)', duration(s.lag_seconds)],
        ...(accountsOf(s) ? [['Connected accounts', accountsOf(s).words]] : []),
        ['Events logged', count(sync.events.logged)],
        ...(s.events_lag_seconds !== null && s.events_lag_seconds !== undefined
          ? [
              [
                'Events behind the database by (age of the oldest change not yet an event)',
                s.events_lag_seconds === 0 ? 'nothing: caught up' : duration(s.events_lag_seconds),
              ],
            ]
          : []),
        ...(s.deliveries_lag_seconds !== null && s.deliveries_lag_seconds !== undefined
          ? [
              [
                'Deliveries behind the event log by (Kafka relay, webhooks)',
                s.deliveries_lag_seconds === 0 ? 'nothing: all delivered' : `${duration(s.deliveries_lag_seconds)} (${s.deliveries_behind})`,
              ],
            ]
          : []),
        ...(sync.events.slot_lag_bytes !== null ? [['Decoder behind the database by', `${count(sync.events.slot_lag_bytes)} bytes`]] : []),
      ]),
      h('h4', null, 'Compared with upstream'),
      driftSection(sync),
      // The latest lost replication slot: what happened and when, and how far the re-read is.
      ...(sync.events.slot_gap ? [gapNotice(sync.events.slot_gap)] : []),
      // A limit shared with other syncs (Airtable: the user's 50 requests a second) held this one back lately.
      ...(s.slowed_by ? [notice('info', h('strong', null, 'Slowed by an upstream limit: '), s.slowed_by)] : []),
      // Lists not complete right now and why (a rate limit, an upstream error, a permission); gone once read.
      ...((s.incomplete ?? []).length > 0
        ? [
            notice(
              'info',
              h('strong', null, 'Incomplete lists: '),
              h(
                'ul',
                { class: 'incomplete-lists' },
                s.incomplete.map((l) => h('li', null, identifier(l.table), ` (${l.list}): ${l.reason}, since `, at(l.since))),
              ),
            ),
          ]
        : []),
      ...(sync.warnings.length > 0
        ? [
            notice(
              'info',
              h('strong', null, 'What the key cannot read: '),
              h(
                'ul',
                null,
                sync.warnings.map((w) => h('li', null, w)),
              ),
            ),
          ]
        : []),
    );
  };

  let meta = null;
  let sync = initial;
  const refreshTables = async () => {
    try {
      const answer = await api('GET', `/api/syncs/${sync.id}/tables`);
      meta = answer.sync_meta;
      // Tables with rows first; the empty ones (most of a Stripe sync's 100-odd) folded away.
      const filled = answer.data.filter((t) => t.rows > 0);
      const empty = answer.data.filter((t) => !(t.rows > 0));
      // The refresh keeps the fold as the user left it.
      const unfolded = /** @type {HTMLDetailsElement | null} */ (tablesBox.querySelector('details.empty-tables'))?.open === true;
      tablesBox.replaceChildren(
        ...(answer.data.length === 0
          ? [h('p', { class: 'muted' }, 'No tables yet: they appear as the first sync builds them.')]
          : [
              ...(filled.length > 0 ? [tablesTable(filled, 'Tables of the database with rows, and their row counts')] : []),
              ...(empty.length > 0
                ? [
                    h(
                      'details',
                      { class: 'empty-tables', open: unfolded },
                      h('summary', null, `${counted(empty.length, 'empty table', 'empty tables')}${filled.length === 0 ? ' (no rows yet)' : ''}`),
                      tablesTable(empty, 'Tables of the database with no rows yet'),
                    ),
                  ]
                : []),
            ]),
      );
    } catch (error) {
      tablesBox.replaceChildren(notice('error', error.message));
    }
  };

  const refreshHistory = async () => {
    const hours = Number(/** @type {HTMLSelectElement} */ (hoursSelect).value);
    try {
      const history = await api('GET', `/api/syncs/${sync.id}/history?hours=${hours}`);
      const to = Date.now();
      const from = to - hours * 3_600_000;
      const lag = history.cycles.map((c) => [Date.parse(c.at), c.lag_seconds]);
      const cycle = history.cycles.map((c) => [Date.parse(c.at), c.duration_seconds]);
      const last = history.cycles.at(-1);
      const worst = Math.max(0, ...lag.map(([, v]) => v));
      const label = last
        ? `Lag and cycle time over ${hours === 1 ? 'the last hour' : `the last ${hours} hours`}: latest lag ${duration(last.lag_seconds)}, latest cycle ${duration(last.duration_seconds)}, worst lag ${duration(worst)}.`
        : 'No completed cycles in this period yet.';
      chartBox.replaceChildren(
        history.cycles.length === 0
          ? h('p', { class: 'muted' }, label)
          : lineChart({
              label,
              from,
              to,
              width: chartBox.clientWidth || panel.clientWidth,
              series: [
                { name: 'Lag', className: 'series-lag', points: lag },
                { name: 'Cycle time', className: 'series-cycle', points: cycle },
              ],
            }),
      );
      errorsBox.replaceChildren(
        history.errors.length === 0
          ? h('p', { class: 'muted' }, 'No errors in the last day.')
          : h(
              'ul',
              { class: 'errors' },
              history.errors.map((e) => h('li', null, at(e.at), ' ', h('span', { class: `badge badge-${e.kind}` }, e.kind), ' ', e.message)),
            ),
      );
    } catch (error) {
      chartBox.replaceChildren(notice('error', error.message));
    }
  };

  const refreshSync = async () => {
    try {
      sync = await api('GET', `/api/syncs/${sync.id}`);
      updated(sync);
    } catch {
      // Shown as stale; the next refresh tries again.
    }
    showStatus(sync, meta);
  };

  hoursSelect.addEventListener('change', refreshHistory);
  showStatus(sync, null);
  await Promise.all([refreshTables(), refreshHistory()]);
  showStatus(sync, meta);
  let tick = 0;
  ctx.every(POLL_MS, async () => {
    tick++;
    await refreshSync();
    if (tick % 2 === 0) await Promise.all([refreshTables(), refreshHistory()]);
  });
}

/**
 * A lost slot replaced (docs/events.md#gaps-a-lost-replication-slot): a warning while the
 * tables are read again, a note once they are.
 */
function gapNotice(gap) {
  const reread =
    gap.backfill_state === 'done'
      ? ['every collection was read again by backfill ', h('code', null, gap.backfill), ', done ', at(gap.reread_at)]
      : gap.recovered_at
        ? [
            'a new slot was made ',
            at(gap.recovered_at),
            '; every collection is being read again by backfill ',
            h('code', null, gap.backfill),
            ` (${gap.backfill_state ?? 'starting'})`,
          ]
        : ['a new slot is being made'];
  return notice(
    gap.backfill_state === 'done' ? 'info' : 'error',
    h('strong', null, 'Replication slot lost '),
    at(gap.lost_at),
    `: ${gap.detail}. Changes made until the new slot started are missing from the events; a gap marker (`,
    h('code', null, gap.id),
    ') in the stream says where the reads that replace them begin: ',
    ...reread,
    '.',
  );
}

/** The tables of a sync's database: name, upstream name, rows, event topic. */
function tablesTable(tables, caption) {
  const headers = ['Table', 'Upstream name', 'Rows', 'Event topic'];
  return h(
    'div',
    { class: 'table-wrap' },
    h(
      'table',
      { class: 'tables' },
      h('caption', { class: 'sr-only' }, caption),
      h(
        'thead',
        null,
        h(
          'tr',
          null,
          headers.map((name) => h('th', { scope: 'col' }, name)),
        ),
      ),
      h(
        'tbody',
        null,
        tables.map((t) =>
          h(
            'tr',
            null,
            h('th', { scope: 'row', 'data-label': headers[0] }, identifier(t.name)),
            h('td', { 'data-label': headers[1] }, t.upstream_name ? breakable(t.upstream_name) : '—'),
            h('td', { 'data-label': headers[2], class: 'num' }, `${t.rows_estimated ? '≈ ' : ''}${count(t.rows)}`),
            h('td', { 'data-label': headers[3] }, t.topic ? identifier(t.topic) : '—'),
          ),
        ),
      ),
    ),
  );
}
