import { api, ApiError } from '../api.js';
import { field, h, notice, setFieldError, showNotice, toast } from '../dom.js';
import { at } from '../format.js';
import { navigate } from '../nav.js';

/** The permissions a restricted Stripe key needs, by permission group. */
export const STRIPE_PERMISSIONS = [
  ['core', 'Read'],
  ['checkout', 'Read'],
  ['billing', 'Read'],
  ['connect', 'Read'],
  ['orders', 'Read'],
  ['issuing', 'Read'],
  ['reporting', 'Read'],
  ['webhook resources', 'Write'],
  ['CLI', 'None'],
];

const BASE_ID = /^app[A-Za-z0-9]{14}$/;
const STRIPE_KEY = /^(sk|rk)_(test|live)_[A-Za-z0-9]+$/;

function permissionTable() {
  return h(
    'div',
    { class: 'table-wrap' },
    h(
      'table',
      { class: 'compact' },
      h('caption', null, 'Permissions of a restricted key'),
      h('thead', null, h('tr', null, h('th', { scope: 'col' }, 'Resource group'), h('th', { scope: 'col' }, 'Permission'))),
      h(
        'tbody',
        null,
        STRIPE_PERMISSIONS.map(([group, permission]) => h('tr', null, h('th', { scope: 'row' }, group), h('td', null, permission))),
      ),
    ),
  );
}

const input = (props) => h('input', { type: 'text', spellcheck: 'false', autocomplete: 'off', ...props });

/** Connect a sync: an Airtable base or a Stripe account, optionally on the customer's own PostgreSQL. */
export async function connectView(ctx) {
  ctx.title('Connect a sync');
  const admin = ctx.principal.kind === 'admin';
  const accountSelect = admin ? h('select', { name: 'account_id', required: true }) : null;
  if (accountSelect) {
    const accounts = (await api('GET', '/api/accounts')).data;
    accountSelect.append(
      h('option', { value: '' }, 'Choose an account…'),
      accounts.map((a) => h('option', { value: a.id }, `${a.name} (${a.id})`)),
    );
  }

  const kindAirtable = h('input', { type: 'radio', name: 'kind', value: 'airtable', id: 'kind-airtable', checked: true });
  const kindStripe = h('input', { type: 'radio', name: 'kind', value: 'stripe', id: 'kind-stripe' });
  const baseId = input({ name: 'base_id', placeholder: 'appXXXXXXXXXXXXXX', maxlength: 17 });
  const airtableKey = input({ type: 'password', name: 'airtable_key', autocomplete: 'off' });
  const stripeKey = input({ type: 'password', name: 'stripe_key', autocomplete: 'off', placeholder: 'rk_live_… or rk_test_…' });
  const databaseUrl = input({ type: 'password', name: 'database_url', placeholder: 'postgres://user:password@host:5432/postgres' });

  // The closed beta: behind a waiting list (TRIBUTARY_WAITING_LIST_KINDS), an account not
  // admitted is told where it stands instead of being offered a form that would fail.
  const beta = admin ? { listed: false, entry: null } : await waitingListOf('airtable');
  const held = beta.listed && beta.entry?.state !== 'admitted';
  const airtableFields = h(
    'fieldset',
    { class: 'kind-fields' },
    h('legend', null, 'Airtable base'),
    ...(held
      ? [waitingListBlock('airtable', beta.entry)]
      : [
          h(
            'p',
            { class: 'hint' },
            beta.listed ? 'Airtable sync is in a closed beta; this account is admitted. One base becomes one database.' : 'One base becomes one database.',
          ),
          field({ label: 'Base ID', control: baseId, hint: 'app followed by 14 letters or digits: the part of the base’s URL after airtable.com/.' }),
          field({
            label: 'Personal access token',
            control: airtableKey,
            hint: 'Scopes data.records:read and schema.bases:read on this base; webhook:manage too for changes within a second or so (else they arrive with the next sweep).',
          }),
        ]),
  );
  const stripeFields = h(
    'fieldset',
    { class: 'kind-fields', hidden: true },
    h('legend', null, 'Stripe account'),
    field({
      label: 'API key',
      control: stripeKey,
      hint: 'A restricted key (rk_…) is recommended; a secret key (sk_…) works too. Test keys are free. The key is stored encrypted.',
    }),
    permissionTable(),
  );
  const showKind = () => {
    const airtable = /** @type {HTMLInputElement} */ (kindAirtable).checked;
    airtableFields.hidden = !airtable;
    stripeFields.hidden = airtable;
    submit.hidden = airtable && held;
  };
  kindAirtable.addEventListener('change', showKind);
  kindStripe.addEventListener('change', showKind);

  const status = h('div', { class: 'form-status' });
  const submit = h('button', { type: 'submit', hidden: held }, 'Connect');
  const form = h(
    'form',
    { class: 'card', novalidate: true },
    accountSelect ? field({ label: 'Account', control: accountSelect, hint: 'The account the sync belongs to.' }) : null,
    h(
      'fieldset',
      { class: 'choice' },
      h('legend', null, 'What to sync'),
      h('label', { for: 'kind-airtable', class: 'radio' }, kindAirtable, ' Airtable base'),
      h('label', { for: 'kind-stripe', class: 'radio' }, kindStripe, ' Stripe account'),
    ),
    airtableFields,
    stripeFields,
    h(
      'details',
      null,
      h('summary', null, 'Use your own PostgreSQL server (optional)'),
      field({
        label: 'Database server URL',
        control: databaseUrl,
        hint: 'An admin connection (CREATEDB, CREATEROLE, REPLICATION; wal_level=logical) to place the data elsewhere. Empty: the shared server (us-west-2).',
      }),
    ),
    status,
    submit,
  );

  const fieldOf = { base_id: baseId, api_key: null, database_url: databaseUrl, account_id: accountSelect };
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const kind = /** @type {HTMLInputElement} */ (kindAirtable).checked ? 'airtable' : 'stripe';
    const key = kind === 'airtable' ? airtableKey : stripeKey;
    fieldOf.api_key = key;
    for (const control of [baseId, airtableKey, stripeKey, databaseUrl, accountSelect]) if (control) setFieldError(control, null);
    showNotice(status, 'error', null);

    const value = (el) => /** @type {HTMLInputElement} */ (el).value.trim();
    /** @type {Array<[HTMLElement, string]>} */
    const problems = [];
    if (accountSelect && !value(accountSelect)) problems.push([accountSelect, 'Choose the account the sync belongs to.']);
    if (kind === 'airtable' && !BASE_ID.test(value(baseId)))
      problems.push([baseId, 'A base ID is app followed by 14 letters or digits, e.g. appAbCdEfGh123456.']);
    if (!value(key)) problems.push([key, kind === 'airtable' ? 'Paste a personal access token.' : 'Paste a Stripe API key.']);
    else if (kind === 'stripe' && !STRIPE_KEY.test(value(key)))
      problems.push([key, 'A Stripe key looks like rk_live_…, rk_test_…, sk_live_… or sk_test_… (publishable pk_ keys cannot read).']);
    if (value(databaseUrl) && !/^postgres(ql)?:\/\/\S+$/.test(value(databaseUrl)))
      problems.push([databaseUrl, 'The URL must start with postgres:// or postgresql://.']);
    if (problems.length > 0) {
      for (const [control, message] of problems) setFieldError(control, message);
      showNotice(status, 'error', 'Please correct the fields marked above.');
      problems[0][0].focus();
      return;
    }

    const body = { kind, api_key: value(key) };
    if (kind === 'airtable') body.base_id = value(baseId);
    if (value(databaseUrl)) body.database_url = value(databaseUrl);
    if (accountSelect) body.account_id = value(accountSelect);
    submit.setAttribute('disabled', '');
    showNotice(status, 'info', `Checking the key with ${kind === 'airtable' ? 'Airtable' : 'Stripe'} and creating the database…`);
    try {
      const sync = await api('POST', '/api/syncs', body);
      toast('Sync connected; the first load has started');
      navigate(`#/syncs/${sync.id}`);
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      // "base_id: must be …" names its field; an upstream refusal (422) is about the key.
      const named = /^(\w+):/.exec(message)?.[1];
      const aboutServer = value(databaseUrl) && /database|server|wal_level|CREATEDB|CREATEROLE|REPLICATION|connect/i.test(message);
      const upstream = error instanceof ApiError && error.status === 422;
      const target = (named && fieldOf[named]) || (upstream ? (aboutServer ? databaseUrl : key) : null);
      if (target) {
        setFieldError(target, message);
        target.focus();
      }
      showNotice(status, 'error', target ? 'The sync was not created: see the message above.' : `The sync was not created: ${message}`);
    } finally {
      submit.removeAttribute('disabled');
    }
  });

  ctx.root.append(h('h1', null, 'Connect a sync'), h('p', null, 'Tributary keeps a read-only PostgreSQL database in step with the base or account.'), form);
}

/** Whether `kind` is behind a waiting list, and this account's entry on it (null: none). */
async function waitingListOf(kind) {
  const answer = await api('GET', `/api/waiting-list?kind=${encodeURIComponent(kind)}`);
  return { listed: answer.kinds.includes(kind), entry: answer.data[0] ?? null };
}

/** Where the account stands on the waiting list, with a way onto it. */
function waitingListBlock(kind, entry) {
  const block = h('div', { class: 'waiting-list' });
  const show = (current) => {
    const join = h('button', { type: 'button', class: 'secondary' }, 'Join the waiting list');
    join.addEventListener('click', async () => {
      join.setAttribute('disabled', '');
      try {
        show(await api('POST', '/api/waiting-list', { kind }));
        toast('You are on the waiting list');
      } catch (error) {
        showNotice(block, 'error', error instanceof Error ? error.message : String(error));
      }
    });
    block.replaceChildren(
      notice(
        'info',
        h('strong', null, 'Airtable sync is in a closed beta with a waiting list. '),
        current
          ? ['This account is on it since ', at(current.asked_at), '. You can create Airtable syncs here once the operator admits it.']
          : 'Join it, and you can create Airtable syncs here once the operator admits this account.',
      ),
      ...(current ? [] : [join]),
    );
  };
  show(entry);
  return block;
}
