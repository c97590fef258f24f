import { h, identifier } from '../dom.js';
import { at, count, counted, duration, kindName } from '../format.js';

const total = (d) => d.missing + d.differing + d.extra;

const words = (d) =>
  [d.missing && `${count(d.missing)} missing`, d.differing && `${count(d.differing)} differing`, d.extra && `${count(d.extra)} extra`]
    .filter(Boolean)
    .join(', ');

/**
 * The Overview's "Compared with upstream": the audit's rounds (Stripe) or the sweeps'
 * comparisons (Airtable), and the drift of the last 24 hours by table, each row of it fixed.
 */
export function driftSection(sync) {
  const d = sync.drift;
  const a = d.audit;
  const compared = d.tables.filter((t) => t.compared_at).sort((x, y) => Date.parse(x.compared_at) - Date.parse(y.compared_at));
  const drifted = d.tables.filter((t) => total(t) > 0).sort((x, y) => total(y) - total(x));
  const upstream = kindName(sync.kind);
  const rounds =
    sync.kind === 'stripe'
      ? [
          [
            'Audit (every table compared with Stripe in turn)',
            a?.last_completed_at
              ? [
                  `the last round took ${duration(a.last_round_seconds)} and ended `,
                  at(a.last_completed_at),
                  ` (at ${counted(a.share_per_second, 'request', 'requests')} a second)`,
                ]
              : a
                ? ['the first round is under way since ', at(a.round_started_at)]
                : 'the first round starts within 10 minutes of the backfill',
          ],
        ]
      : [];
  const oldest = compared[0];
  return h(
    'dl',
    { class: 'facts drift' },
    [
      ...rounds,
      ...(oldest ? [[`Every table compared with ${upstream} since`, at(oldest.compared_at)]] : []),
      [
        `Found unlike ${upstream} in the last 24 hours, and fixed`,
        total(d.last_24h) === 0
          ? compared.length > 0
            ? 'nothing: the tables matched'
            : 'nothing yet'
          : [
              `${counted(total(d.last_24h), 'row', 'rows')} (${words(d.last_24h)}): `,
              h(
                'ul',
                { class: 'drift-tables' },
                drifted.map((t) => h('li', null, identifier(t.table), `: ${words(t)}`)),
              ),
            ],
      ],
    ].map(([term, value]) => [h('dt', null, term), h('dd', null, value)]),
  );
}
