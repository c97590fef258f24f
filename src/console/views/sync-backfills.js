import { api } from '../api.js';
import { field, h, identifier, notice, setFieldError, showNotice, toast } from '../dom.js';
import { count, counted } from '../format.js';
import { backfillTable } from './backfill-list.js';

/** Asked every 2 s while a backfill runs; every 10 s otherwise (one may be started elsewhere). */
const POLL_MS = 2000;
const IDLE_POLLS = 5;

/** The sync's webhooks by id (their URLs); none where webhooks are not configured. */
async function webhooksOf(sync) {
  try {
    return (await api('GET', `/api/syncs/${sync.id}/webhooks`)).data;
  } catch {
    return [];
  }
}

/**
 * Backfills on demand: start one (every collection or some, to every consumer or one webhook),
 * and follow them: state, rows read, the collection being read, Cancel while one runs.
 */
export async function backfillsTab(ctx, panel, sync) {
  const prefix = `svc.${sync.id}.`;
  const [tables, webhooks] = await Promise.all([api('GET', `/api/syncs/${sync.id}/tables`), webhooksOf(sync)]);
  // A collection is the last part of a table's topic; its row count sizes the progress bar.
  const collections = tables.data
    .filter((t) => t.topic?.startsWith(prefix))
    .map((t) => ({ name: t.topic.slice(prefix.length), upstream: t.upstream_name, rows: t.rows }))
    .sort((a, b) => a.name.localeCompare(b.name));
  const rows = new Map(collections.map((c) => [c.name, c.rows]));
  const webhookUrls = new Map(webhooks.map((w) => [w.id, w.url]));

  // ── start one ──
  const every = h('input', { type: 'radio', name: 'scope', value: 'all', id: 'scope-all', checked: true });
  const some = h('input', { type: 'radio', name: 'scope', value: 'some', id: 'scope-some' });
  const boxes = collections.map((c) => h('input', { type: 'checkbox', name: 'collections', value: c.name, id: `collection-${c.name}`, disabled: true }));
  const chooseSome = () => {
    for (const box of boxes) /** @type {HTMLInputElement} */ (box).disabled = !(/** @type {HTMLInputElement} */ (some).checked);
  };
  every.addEventListener('change', chooseSome);
  some.addEventListener('change', chooseSome);
  const collectionsError = h('p', { class: 'field-error', id: 'collections-error', hidden: true });
  const target = h(
    'select',
    { name: 'webhook' },
    h('option', { value: '' }, 'Every consumer of the topics (REST, Kafka, every webhook)'),
    webhooks.map((w) => h('option', { value: w.id }, `Only the webhook to ${w.url}`)),
  );
  const status = h('div', { class: 'form-status' });
  const start = h('button', { type: 'submit' }, 'Start backfill');
  const form = h(
    'form',
    { class: 'card', novalidate: true },
    h('h3', null, 'Start a backfill'),
    h(
      'p',
      { class: 'hint' },
      'Each current row becomes one event with "event": "read" and the row as its data, so a new consumer gets what already exists. Live changes keep flowing meanwhile, and a read never overtakes a newer change of its record.',
    ),
    h(
      'fieldset',
      { 'aria-describedby': 'collections-error' },
      h('legend', null, 'Collections'),
      collections.length === 0
        ? h('p', { class: 'muted' }, 'No collections yet: they appear with the tables.')
        : [
            h('label', { class: 'radio', for: 'scope-all' }, every, ` Every collection (${count(collections.length)})`),
            h('label', { class: 'radio', for: 'scope-some' }, some, ' Only these:'),
            h(
              'div',
              { class: 'topic-list' },
              collections.map((c, i) =>
                h(
                  'label',
                  { class: 'radio', for: boxes[i].id },
                  boxes[i],
                  ' ',
                  identifier(c.name),
                  // A Stripe collection's upstream name is its own: said once.
                  h('span', { class: 'muted' }, ` ${c.upstream && c.upstream !== c.name ? `${c.upstream} · ` : '· '}${counted(c.rows, 'row', 'rows')}`),
                ),
              ),
            ),
          ],
      collectionsError,
    ),
    field({
      label: 'Send the reads to',
      control: target,
      hint: 'A webhook alone gets the reads of its own topics; nothing else sees them. Otherwise every consumer of the topics gets them.',
    }),
    status,
    start,
  );

  const showCollectionsError = (message) => {
    collectionsError.textContent = message ?? '';
    collectionsError.hidden = !message;
  };

  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    showCollectionsError(null);
    setFieldError(target, null);
    showNotice(status, 'error', null);
    /** @type {{collections?: string[], webhook?: string}} */
    const body = {};
    if (/** @type {HTMLInputElement} */ (some).checked) {
      body.collections = boxes.filter((b) => /** @type {HTMLInputElement} */ (b).checked).map((b) => b.getAttribute('value') ?? '');
      if (body.collections.length === 0) {
        showCollectionsError('Tick at least one collection, or choose every collection.');
        showNotice(status, 'error', 'Not started: please correct the fields marked above.');
        return;
      }
    }
    const webhook = /** @type {HTMLSelectElement} */ (target).value;
    if (webhook) body.webhook = webhook;
    start.setAttribute('disabled', '');
    try {
      const created = await api('POST', `/api/syncs/${sync.id}/backfills`, body);
      showNotice(
        status,
        'ok',
        `Backfill ${created.id} started: ${created.collections.length === 1 ? created.collections[0] : `${count(created.collections.length)} collections`}.`,
      );
      await refresh();
    } catch (error) {
      // The server's message, at the field it is about: a collection, or the webhook.
      const message = error.message;
      if (/^collections\b/.test(message)) showCollectionsError(message);
      else if (/webhook/i.test(message)) setFieldError(target, message);
      showNotice(status, 'error', `Not started: ${message}`);
    } finally {
      start.removeAttribute('disabled');
    }
  });

  // ── the list ──
  const listBox = h('div');
  const listStatus = h('div', { class: 'form-status' });
  /** Backfills seen running, so the page can say when one finishes. */
  const wasRunning = new Set();
  let running = false;

  const cancel = async (backfill) => {
    try {
      await api('DELETE', `/api/syncs/${sync.id}/backfills/${backfill.id}`);
      toast(`Backfill ${backfill.id} canceled`);
      showNotice(listStatus, 'error', null);
    } catch (error) {
      showNotice(listStatus, 'error', `Not canceled: ${error.message}`);
    }
    await refresh();
  };

  const refresh = async () => {
    let answer;
    try {
      answer = await api('GET', `/api/syncs/${sync.id}/backfills`);
    } catch (error) {
      listBox.replaceChildren(notice('error', `Could not refresh the backfills: ${error.message}`));
      return;
    }
    /** @type {import('./backfill-list.js').Backfill[]} */
    const backfills = answer.data;
    running = backfills.some((b) => b.state === 'running');
    for (const b of backfills) {
      if (b.state === 'running') wasRunning.add(b.id);
      else if (wasRunning.delete(b.id)) toast(`Backfill ${b.id} ${b.state}: ${counted(b.rows, 'row', 'rows')}`);
    }
    // A refresh rebuilds the rows; the Cancel button that had focus gets it back.
    const focused = listBox.contains(document.activeElement) ? document.activeElement?.getAttribute('data-key') : null;
    listBox.replaceChildren(
      backfills.length === 0 ? h('p', { class: 'muted' }, 'No backfills yet.') : backfillTable(backfills, { rows, webhooks: webhookUrls, cancel }),
    );
    if (focused) /** @type {HTMLElement | null} */ (listBox.querySelector(`[data-key="${focused}"]`))?.focus();
  };

  panel.append(
    form,
    h('h3', null, 'Backfills'),
    h(
      'p',
      { class: 'hint' },
      'Newest first, refreshed every 2 s while one runs. A sync’s backfills run one at a time, oldest first; finished ones are kept 7 days.',
    ),
    listStatus,
    listBox,
  );
  await refresh();
  let polls = 0;
  ctx.every(POLL_MS, async () => {
    polls++;
    if (running || polls % IDLE_POLLS === 0) await refresh();
  });
}
