import { api } from '../api.js';
import { copyable, field, h, identifier, notice, setFieldError, showNotice, toast } from '../dom.js';
import { ago, at, count, counted } from '../format.js';
import { webhookControls } from './webhook-controls.js';
import { FilterInputError, filterEditor } from './webhook-filter.js';

const POLL_MS = 3000;

/**
 * Webhook destinations: add one (the secret is shown once), their state, filter and rate,
 * secret rotation and recovery (webhook-controls.js), delivery log, replay, delete.
 */
export async function webhooksTab(ctx, panel, sync) {
  const connection = await api('GET', `/api/syncs/${sync.id}/connection`);
  const topics = connection.events.topics;
  const listBox = h('div');
  const secretBox = h('div');

  // ── add a destination ──
  const url = h('input', { type: 'url', name: 'url', placeholder: 'https://example.com/hooks/tributary', spellcheck: 'false', autocomplete: 'off' });
  const topicBoxes = topics.map((topic) => h('input', { type: 'checkbox', name: 'topics', value: topic, id: `topic-${topic}` }));
  const all = h('input', { type: 'checkbox', id: 'topics-all' });
  all.addEventListener('change', () => {
    for (const box of topicBoxes) /** @type {HTMLInputElement} */ (box).checked = /** @type {HTMLInputElement} */ (all).checked;
  });
  const topicsError = h('p', { class: 'field-error', id: 'topics-error', hidden: true });
  const editor = filterEditor();
  const backfillFirst = h('input', { type: 'checkbox', id: 'webhook-backfill', 'aria-describedby': 'webhook-backfill-hint' });
  const status = h('div', { class: 'form-status' });
  const add = h('button', { type: 'submit' }, 'Add webhook');
  const form = h(
    'form',
    { class: 'card', novalidate: true },
    h('h3', null, 'Add a destination'),
    field({
      label: 'Destination URL',
      control: url,
      hint: 'Each event is POSTed here as JSON, signed per Standard Webhooks (webhook-id, webhook-timestamp, webhook-signature). Failures are retried with back-off.',
    }),
    h(
      'fieldset',
      { class: 'topics-choice', 'aria-describedby': 'topics-error' },
      h('legend', null, 'Topics'),
      topics.length === 0
        ? h('p', { class: 'muted' }, 'No topics yet: they appear with the tables.')
        : [
            h('label', { class: 'radio', for: 'topics-all' }, all, ' All topics'),
            h(
              'div',
              { class: 'topic-list' },
              topicBoxes.map((box) => h('label', { class: 'radio', for: box.id }, box, ' ', identifier(box.getAttribute('value')))),
            ),
          ],
      topicsError,
    ),
    h('details', null, h('summary', null, 'Filter and rate (optional)'), editor.element),
    h(
      'div',
      { class: 'field checkbox' },
      h('label', { for: backfillFirst.id }, backfillFirst, ' Backfill its current rows first'),
      h(
        'p',
        { class: 'hint', id: 'webhook-backfill-hint' },
        'The rows that exist now in its topics are sent to this webhook alone, as read events (kept by its filter only if it takes read events).',
      ),
    ),
    status,
    add,
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    setFieldError(url, null);
    editor.clearErrors();
    topicsError.hidden = true;
    showNotice(status, 'error', null);
    const chosen = topicBoxes.filter((b) => /** @type {HTMLInputElement} */ (b).checked).map((b) => b.getAttribute('value'));
    const value = /** @type {HTMLInputElement} */ (url).value.trim();
    let bad = false;
    if (!/^https?:\/\/[^\s/]+/i.test(value)) {
      setFieldError(url, 'Enter an absolute http:// or https:// URL.');
      url.focus();
      bad = true;
    }
    if (chosen.length === 0) {
      topicsError.textContent = 'Choose at least one topic.';
      topicsError.hidden = false;
      bad = true;
    }
    if (bad) {
      showNotice(status, 'error', 'Not added: please correct the fields marked above.');
      return;
    }
    let options;
    try {
      options = editor.read();
    } catch (error) {
      if (!(error instanceof FilterInputError)) throw error;
      form.querySelector('details')?.setAttribute('open', '');
      showNotice(status, 'error', `Not added: ${error.message}`);
      error.control.focus();
      return;
    }
    add.setAttribute('disabled', '');
    try {
      const body = {
        url: value,
        topics: chosen,
        ...(options.filter ? { filter: options.filter } : {}),
        ...(options.max_per_second ? { max_per_second: options.max_per_second } : {}),
        .../** @type {HTMLInputElement} */ (backfillFirst.checked ? { backfill: true } : {}),
      };
      const created = await api('POST', `/api/syncs/${sync.id}/webhooks`, body);
      form.reset();
      editor.reset();
      secretBox.replaceChildren(
        notice(
          'ok',
          h('p', null, h('strong', null, 'Webhook added. '), 'Its signing secret is shown only this once: copy it now.'),
          copyable('webhook secret', created.secret),
          created.backfill
            ? h(
                'p',
                null,
                `Backfill ${created.backfill.id} started: its current rows are sent to it first. `,
                h('a', { href: `#/syncs/${sync.id}/backfills` }, 'Follow it on the Backfills tab'),
              )
            : null,
          h('button', { type: 'button', class: 'secondary', onclick: () => secretBox.replaceChildren() }, 'I have copied it'),
        ),
      );
      await refresh();
      secretBox.querySelector('button')?.focus();
    } catch (error) {
      const message = error.message;
      if (/^url:|address|resolve|host/i.test(message)) {
        setFieldError(url, message);
        url.focus();
      }
      showNotice(status, 'error', `Not added: ${message}`);
    } finally {
      add.removeAttribute('disabled');
    }
  });

  // ── the destinations and their delivery logs ──
  const controls = webhookControls({ syncId: sync.id, refresh: () => refresh() });
  /** webhook id → its card: kept from one refresh to the next, so that an open panel stays put. */
  const cards = new Map();
  const open = new Set();
  /** The last backfill asked for from each card: { kind: 'ok', id } or { kind: 'error', message }. */
  const backfills = new Map();
  const destination = (webhook, detail, deliveries, more) => {
    const d = detail.deliveries;
    const logId = `log-${webhook.id}`;
    const toggle = h(
      'button',
      { type: 'button', class: 'secondary', 'data-key': `${webhook.id}:log`, 'aria-expanded': String(open.has(webhook.id)), 'aria-controls': logId },
      open.has(webhook.id) ? 'Hide delivery log' : 'Show delivery log',
    );
    toggle.addEventListener('click', async () => {
      if (open.has(webhook.id)) open.delete(webhook.id);
      else open.add(webhook.id);
      await refresh();
      listBox.querySelector(`[data-key="${webhook.id}:log"]`)?.focus();
    });
    const replay = d.exhausted > 0 ? h('button', { type: 'button', 'data-key': `${webhook.id}:replay` }, `Replay ${count(d.exhausted)} exhausted`) : null;
    replay?.addEventListener('click', async () => {
      try {
        const answer = await api('POST', `/api/syncs/${sync.id}/webhooks/${webhook.id}/deliveries/replay`);
        toast(`${counted(answer.replayed, 'delivery', 'deliveries')} queued again`);
        await refresh();
      } catch (error) {
        toast(`Replay failed: ${error.message}`);
      }
    });
    // The rows that exist already, sent to this destination alone (a new consumer's catch-up).
    const backfill = h('button', { type: 'button', class: 'secondary', 'data-key': `${webhook.id}:backfill` }, 'Backfill this webhook');
    backfill.addEventListener('click', async () => {
      backfill.setAttribute('disabled', '');
      try {
        const started = await api('POST', `/api/syncs/${sync.id}/backfills`, { webhook: webhook.id });
        backfills.set(webhook.id, { kind: 'ok', id: started.id });
        toast(`Backfill ${started.id} started`);
      } catch (error) {
        backfills.set(webhook.id, { kind: 'error', message: error.message });
        toast(`Backfill not started: ${error.message}`);
      }
      await refresh();
      listBox.querySelector(`[data-key="${webhook.id}:backfill"]`)?.focus();
    });
    // Said once through the toast; the card keeps it in view without announcing it at each refresh.
    const backfilled = backfills.get(webhook.id);
    const backfillNote = !backfilled
      ? null
      : h(
          'div',
          { class: `notice notice-${backfilled.kind} backfill-note` },
          backfilled.kind === 'ok'
            ? [
                `Backfill ${backfilled.id} started: the current rows of this webhook’s topics are sent to it alone. `,
                h('a', { href: `#/syncs/${sync.id}/backfills` }, 'Follow it on the Backfills tab'),
              ]
            : `Backfill not started: ${backfilled.message}`,
        );
    const remove = h('button', { type: 'button', class: 'danger', 'data-key': `${webhook.id}:delete` }, 'Delete webhook');
    remove.addEventListener('click', async () => {
      if (!confirm(`Delete the webhook to ${webhook.url}? Its undelivered events are dropped.`)) return;
      try {
        await api('DELETE', `/api/syncs/${sync.id}/webhooks/${webhook.id}`);
        toast('Webhook deleted');
        await refresh();
      } catch (error) {
        toast(`Delete failed: ${error.message}`);
      }
    });
    const headers = ['Delivery', 'Topic', 'Record', 'Status', 'Attempts', 'Last answer', 'Last attempt'];
    const log = open.has(webhook.id)
      ? h(
          'div',
          { id: logId },
          deliveries.length === 0
            ? h('p', { class: 'muted' }, 'No retried or failed deliveries: events delivered at the first attempt are only counted.')
            : h(
                'div',
                { class: 'table-wrap' },
                h(
                  'table',
                  { class: 'deliveries' },
                  h(
                    'caption',
                    null,
                    `Deliveries that needed more than one attempt, oldest first${more ? ' (the first 100; the API pages through the rest)' : ''}`,
                  ),
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
                    deliveries.map((x) =>
                      h(
                        'tr',
                        null,
                        h('th', { scope: 'row', 'data-label': headers[0] }, x.id),
                        h('td', { 'data-label': headers[1] }, identifier(x.topic)),
                        h('td', { 'data-label': headers[2] }, h('code', null, x.record_id)),
                        h('td', { 'data-label': headers[3] }, h('span', { class: `badge badge-${x.status}` }, x.status)),
                        h('td', { 'data-label': headers[4], class: 'num' }, count(x.attempts)),
                        h('td', { 'data-label': headers[5] }, x.last_status_code ? `HTTP ${x.last_status_code}` : (x.last_error ?? '—')),
                        h('td', { 'data-label': headers[6] }, at(x.last_attempt_at)),
                      ),
                    ),
                  ),
                ),
              ),
        )
      : null;
    return [
      h('h3', null, h('code', null, webhook.url), ' ', controls.badge(webhook)),
      h(
        'p',
        null,
        'Topics: ',
        webhook.topics.map((t, i) => [i ? ', ' : '', identifier(t)]),
      ),
      controls.summary(webhook),
      h(
        'p',
        { class: 'counts' },
        h('span', { class: 'delivered-count' }, `${count(d.delivered)} delivered`),
        ` · last ${d.last_delivered_at ? '' : 'never'}`,
        d.last_delivered_at ? ago(d.last_delivered_at) : '',
        ` · ${counted(d.failed_attempts, 'failed attempt', 'failed attempts')} · ${count(d.pending + d.retrying)} waiting · ${count(d.exhausted)} exhausted`,
      ),
      h('div', { class: 'actions' }, controls.buttons(webhook), toggle, replay, backfill, remove),
      backfillNote,
      log,
    ];
  };

  /** The card of a webhook: the same element each time, its content new, its panel slot untouched. */
  const card = (webhook, parts) => {
    if (!cards.has(webhook.id)) {
      const content = h('div');
      cards.set(webhook.id, { content, article: h('article', { class: 'card webhook', 'data-webhook': webhook.id }, content, controls.slot(webhook)) });
    }
    const { article, content } = cards.get(webhook.id);
    content.replaceChildren(...parts.flat(Infinity).filter(Boolean));
    return article;
  };

  const refresh = async () => {
    try {
      const { data } = await api('GET', `/api/syncs/${sync.id}/webhooks`);
      const built = await Promise.all(
        data.map(async (webhook) => {
          const [detail, log] = await Promise.all([
            api('GET', `/api/syncs/${sync.id}/webhooks/${webhook.id}`),
            open.has(webhook.id)
              ? api('GET', `/api/syncs/${sync.id}/webhooks/${webhook.id}/deliveries?limit=100`)
              : Promise.resolve({ data: [], has_more: false }),
          ]);
          return [webhook, destination(webhook, detail, log.data, log.has_more)];
        }),
      );
      // A refresh rebuilds the cards' content; the button that had focus gets it back.
      const focused = listBox.contains(document.activeElement) ? document.activeElement?.getAttribute('data-key') : null;
      const articles = built.map(([webhook, parts]) => card(webhook, parts));
      const ids = new Set(data.map((webhook) => webhook.id));
      for (const id of cards.keys()) if (!ids.has(id)) cards.delete(id);
      controls.keepOnly(ids);
      // Moved, a card would take the focus out of a form being filled in: only a changed list is put back.
      const same = articles.length > 0 && articles.length === listBox.children.length && articles.every((article, i) => listBox.children[i] === article);
      if (!same) listBox.replaceChildren(...(articles.length ? articles : [h('p', { class: 'muted' }, 'No webhooks yet.')]));
      if (focused && !listBox.contains(document.activeElement)) /** @type {HTMLElement | null} */ (listBox.querySelector(`[data-key="${focused}"]`))?.focus();
    } catch (error) {
      listBox.replaceChildren(notice('error', error.message));
    }
  };

  panel.append(h('h3', null, 'Destinations'), listBox, secretBox, form);
  await refresh();
  ctx.every(POLL_MS, refresh);
}
