import { api } from '../api.js';
import { copyable, copyButton, h, identifier, notice, toast } from '../dom.js';

/** The URL with its password replaced by dots, for showing on screen. */
function masked(url) {
  return url.replace(/^([a-z]+:\/\/[^:/@]*:)[^@]*@/i, '$1••••••••@');
}

/** Single-quoted for a POSIX shell. */
const shellQuote = (text) => `'${text.replace(/'/g, `'\\''`)}'`;

function revealToggle(what, onChange) {
  const button = h('button', { type: 'button', class: 'secondary', 'aria-pressed': 'false' }, `Show ${what}`);
  button.addEventListener('click', async () => {
    const shown = button.getAttribute('aria-pressed') !== 'true';
    try {
      await onChange(shown);
    } catch (error) {
      toast(`Could not show the ${what}: ${error.message}`);
      return;
    }
    button.setAttribute('aria-pressed', String(shown));
    button.textContent = `${shown ? 'Hide' : 'Show'} ${what}`;
  });
  return button;
}

function section(title, ...children) {
  return h('section', { class: 'connect-section' }, h('h3', null, title), ...children);
}

function snippet(what, text) {
  return h(
    'div',
    { class: 'snippet' },
    h('pre', null, h('code', null, text)),
    copyButton(what, () => text),
  );
}

/** Connection instructions: the database, the wait endpoint, the proxy, the event stream. */
export async function connectTab(_ctx, panel, sync) {
  const info = await api('GET', `/api/syncs/${sync.id}/connection`);
  const url = sync.database.url;
  const schema = sync.database.schema ?? 'public';
  // A sync in a shared database has its own schema: psql starts with it first on the search_path.
  const options = schema === 'public' ? '' : `PGOPTIONS=${shellQuote(`-c search_path=${schema}`)} `;
  const psqlOf = (shown) => `${options}psql ${shellQuote(shown)}`;
  const psql = psqlOf(url);

  // The database: the password stays hidden until asked for; the copy buttons copy the real thing.
  const urlText = h('code', { class: 'copyable-text', id: 'database-url' }, masked(url));
  const psqlText = h('code', { class: 'copyable-text', id: 'psql-command' }, psqlOf(masked(url)));
  const shared = sync.database.database_of
    ? ` The database is shared with sync ${sync.database.database_of} (schema public) and read with its role: run SET search_path TO ${schema} or name the schema (${schema}.<table>).`
    : '';
  const database = section(
    'Database (read-only)',
    h(
      'p',
      { id: 'database-schema' },
      `Database ${sync.database.name}, as its read-only role. Tables are in schema ${schema}; ${schema}._sync_meta says when the last sync started and completed.${shared}`,
    ),
    h('p', { class: 'label' }, 'Connection URL'),
    h(
      'div',
      { class: 'copyable' },
      urlText,
      copyButton('connection URL', () => url),
    ),
    h('p', { class: 'label' }, 'psql'),
    h(
      'div',
      { class: 'copyable' },
      psqlText,
      copyButton('psql command', () => psql),
    ),
    revealToggle('password', (shown) => {
      urlText.textContent = shown ? url : masked(url);
      psqlText.textContent = shown ? psql : psqlOf(masked(url));
    }),
  );

  const curlWait = `curl -s -H "Authorization: Bearer $TRIBUTARY_TOKEN" '${info.wait_url}?timeout=60000'`;
  const wait = section(
    'Wait for fresh data',
    h(
      'p',
      null,
      'After writing to the upstream API directly, call the wait endpoint: it answers {"ok":true} once the database has everything upstream had when the call arrived.',
    ),
    h('p', { class: 'label' }, 'Sync ID'),
    copyable('sync ID', info.sync_id),
    h('p', { class: 'label' }, 'curl'),
    snippet('wait curl command', curlWait),
  );

  let proxy;
  if (!info.proxy_url) {
    proxy = section('Write-through proxy', notice('info', 'The proxy address is not configured on this server.'));
  } else if (sync.kind === 'airtable') {
    const base = `${info.proxy_url}/api.airtable.com`;
    proxy = section(
      'Write-through proxy',
      h(
        'p',
        null,
        'Send writes through the proxy: after Airtable accepts one, the record is in the database before the answer reaches you. Use your own Airtable token, as with Airtable itself.',
      ),
      h('p', { class: 'label' }, 'Proxy base for Airtable'),
      copyable('proxy base', base),
      h('p', { class: 'label' }, 'airtable.js'),
      snippet(
        'airtable.js snippet',
        `const Airtable = require('airtable');\nconst base = new Airtable({\n  apiKey: process.env.AIRTABLE_TOKEN,\n  endpointUrl: '${base}',\n}).base('${sync.base_id}');`,
      ),
      h('p', { class: 'label' }, 'curl'),
      snippet(
        'proxy curl command',
        `curl -s '${base}/v0/${sync.base_id}/<table>' \\\n  -H "Authorization: Bearer $AIRTABLE_TOKEN" -H 'Content-Type: application/json' \\\n  -d '{"records":[{"fields":{"Name":"New"}}]}'`,
      ),
    );
  } else {
    const parsed = new URL(info.proxy_url);
    const port = parsed.port || (parsed.protocol === 'https:' ? '443' : '80');
    proxy = section(
      'Write-through proxy',
      h(
        'p',
        null,
        'Send writes through the proxy: after Stripe accepts one, the object is in the database before the answer reaches you. Use your own Stripe key.',
      ),
      h('p', { class: 'label' }, 'Proxy base for Stripe'),
      copyable('proxy base', `${info.proxy_url}/api.stripe.com`),
      h('p', { class: 'label' }, 'stripe-node'),
      snippet(
        'stripe-node snippet',
        `const Stripe = require('stripe');\nconst stripe = new Stripe(process.env.STRIPE_KEY, {\n  host: '${parsed.hostname}',\n  port: ${port},\n  protocol: '${parsed.protocol.replace(':', '')}',\n});`,
      ),
      h('p', { class: 'label' }, 'curl'),
      snippet('proxy curl command', `curl -s '${info.proxy_url}/api.stripe.com/v1/customers' \\\n  -u "$STRIPE_KEY:" -d email=jane@example.com`),
    );
  }

  const passwordText = h('code', { class: 'copyable-text', id: 'events-password' }, '••••••••');
  let password = '';
  const passwordCopy = copyButton('event password', () => password);
  passwordCopy.setAttribute('disabled', '');
  const events = section(
    'Events',
    h(
      'p',
      null,
      `Every insert, update and delete becomes an event on topic svc.${sync.id}.<collection>. Pull them with a Kafka client or the REST interface, or have them pushed to a webhook.`,
    ),
    h('p', { class: 'label' }, 'Topics'),
    info.events.topics.length === 0
      ? h('p', { class: 'muted' }, 'None yet: topics appear with the tables.')
      : h(
          'ul',
          { class: 'topics' },
          info.events.topics.map((t) => h('li', null, identifier(t))),
        ),
    h('p', { class: 'label' }, 'REST URL'),
    copyable('REST URL', info.events.rest_url),
    h('p', { class: 'label' }, 'Kafka brokers'),
    info.events.kafka_brokers.length > 0
      ? copyable('Kafka brokers', info.events.kafka_brokers.join(','))
      : h('p', { class: 'muted' }, 'Kafka is not configured on this server; use the REST interface.'),
    h('p', { class: 'label' }, 'Username'),
    copyable('event username', info.events.username ?? ''),
    h('p', { class: 'label' }, 'Password'),
    h('div', { class: 'copyable' }, passwordText, passwordCopy),
    revealToggle('event password', async (shown) => {
      if (shown && !password) password = (await api('POST', `/api/syncs/${sync.id}/events-credentials`)).password;
      passwordText.textContent = shown ? password : '••••••••';
      if (password) passwordCopy.removeAttribute('disabled');
    }),
    h('p', { class: 'label' }, 'Fetch with curl'),
    snippet(
      'events curl command',
      `curl -s -u "${info.events.username}:$EVENTS_PASSWORD" '${info.events.rest_url}/fetch' \\\n  -d '{"topic":"${info.events.topics[0] ?? `svc.${sync.id}.<collection>`}","partition":0,"offset":0,"timeout":1000}'`,
    ),
  );

  panel.append(database, wait, proxy, events);
}
