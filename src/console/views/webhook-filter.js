import { field, h, setFieldError, uid } from '../dom.js';

// A webhook's filter and rate (docs/events.md, Filters and Delivery manners): shown in words,
// and edited as a form that gives back the API's JSON.

const KINDS = [
  ['inserted', 'inserted'],
  ['updated', 'updated'],
  ['deleted', 'deleted'],
  ['read', 'read (rows sent by a backfill)'],
];

const OPERATORS = [
  ['eq', 'equals'],
  ['in', 'is one of'],
  ['not_null', 'is not null'],
];

/** A value as typed: JSON when it parses (5, true, null, "5"), else the text itself, as the CLI reads it. */
function scalarOf(text) {
  try {
    const value = JSON.parse(text);
    if (value === null || ['string', 'number', 'boolean'].includes(typeof value)) return value;
  } catch {
    // Not JSON: the text.
  }
  return text;
}

const shown = (value) => JSON.stringify(value);

/** One condition of `where` in words: status = "active", plan is one of "pro", "team", email is not null. */
function conditionText(column, condition) {
  if (condition !== null && typeof condition === 'object') {
    if ('in' in condition) return `${column} is one of ${condition.in.map(shown).join(', ')}`;
    if ('not_null' in condition) return `${column} is not null`;
    if ('eq' in condition) return `${column} = ${shown(condition.eq)}`;
  }
  return `${column} = ${shown(condition)}`;
}

/** The filter in words, one clause per part; null: every event of its topics. */
export function filterText(filter) {
  if (!filter) return 'none: every event of its topics is sent';
  const parts = [];
  if (filter.events) parts.push(`only ${filter.events.join(', ')} events`);
  if (filter.changed) parts.push(`updates only when ${filter.changed.join(' or ')} changed`);
  if (filter.where)
    parts.push(
      `only where ${Object.entries(filter.where)
        .map(([c, v]) => conditionText(c, v))
        .join(' and ')}`,
    );
  return parts.join('; ');
}

export const rateText = (max) => (max ? `at most ${max.toLocaleString('en-US')} attempts a second` : 'no limit');

/** A condition of the API as the form's operator and value text. */
function rowOf(condition) {
  if (condition !== null && typeof condition === 'object') {
    if ('in' in condition) return { operator: 'in', value: condition.in.map((v) => (typeof v === 'string' ? v : shown(v))).join(', ') };
    if ('not_null' in condition) return { operator: 'not_null', value: '' };
    if ('eq' in condition) condition = condition.eq;
  }
  return { operator: 'eq', value: typeof condition === 'string' ? condition : shown(condition) };
}

/** A form error: the control it is about and what to say. */
export class FilterInputError extends Error {
  constructor(control, message) {
    super(message);
    this.control = control;
  }
}

/**
 * The filter and rate fields, filled from a webhook (or empty for a new one).
 * read() gives { filter, max_per_second } as the API takes them (null: none), or throws
 * FilterInputError; clearErrors() clears what it marked.
 */
export function filterEditor({ filter = null, maxPerSecond = null } = {}) {
  const kinds = KINDS.map(([kind]) => h('input', { type: 'checkbox', value: kind, id: uid('kind'), checked: filter?.events?.includes(kind) }));
  const changed = h('input', {
    type: 'text',
    spellcheck: 'false',
    autocomplete: 'off',
    placeholder: 'status, email',
    value: filter?.changed?.join(', ') ?? '',
  });
  const rows = h('div', { class: 'where-rows' });
  const rate = h('input', { type: 'number', min: 1, max: 10000, step: 1, inputmode: 'numeric', value: maxPerSecond ? String(maxPerSecond) : '' });
  const whereHintId = uid('where-hint');
  let n = 0;

  const addRow = (row = { column: '', operator: 'eq', value: '' }) => {
    const i = ++n;
    const column = h('input', { type: 'text', class: 'where-column', 'aria-label': `Column of condition ${i}`, spellcheck: 'false', value: row.column });
    const operator = h(
      'select',
      { class: 'where-operator', 'aria-label': `Operator of condition ${i}` },
      OPERATORS.map(([value, label]) => h('option', { value, selected: row.operator === value }, label)),
    );
    const value = h('input', {
      type: 'text',
      class: 'where-value',
      'aria-label': `Value of condition ${i}`,
      'aria-describedby': whereHintId,
      value: row.value,
    });
    const sync = () => {
      const none = /** @type {HTMLSelectElement} */ (operator).value === 'not_null';
      value.toggleAttribute('disabled', none);
    };
    operator.addEventListener('change', sync);
    sync();
    const remove = h('button', { type: 'button', class: 'secondary small', 'aria-label': `Remove condition ${i}` }, 'Remove');
    const line = h('div', { class: 'where-row' }, column, operator, value, remove);
    remove.addEventListener('click', () => {
      line.remove();
      add.focus();
    });
    rows.append(line);
    return column;
  };
  const add = h('button', { type: 'button', class: 'secondary small' }, 'Add a condition');
  add.addEventListener('click', () => addRow().focus());
  for (const [column, condition] of Object.entries(filter?.where ?? {})) addRow({ column, ...rowOf(condition) });

  const element = h(
    'div',
    { class: 'filter-editor' },
    h(
      'fieldset',
      null,
      h('legend', null, 'Event kinds'),
      h('p', { class: 'hint' }, 'None ticked: every kind.'),
      kinds.map((box, i) => h('label', { class: 'radio', for: box.id }, box, ' ', KINDS[i][1])),
    ),
    field({
      label: 'Only updates that changed',
      control: changed,
      hint: 'Columns, comma-separated: an updated event is sent only when one of them changed; other kinds pass. Empty: any change.',
    }),
    h(
      'fieldset',
      null,
      h('legend', null, 'Only rows where'),
      rows,
      h(
        'p',
        { class: 'hint', id: whereHintId },
        'Every condition must hold. A value is read as JSON when it is JSON (5, true, null, "5"), else as text; “is one of” takes values separated by commas.',
      ),
      add,
    ),
    field({ label: 'Max attempts per second', control: rate, hint: 'Retries included, 1 to 10,000. Empty: no limit.' }),
  );

  const marked = new Set();
  const fail = (control, message) => {
    setFieldError(control, message);
    marked.add(control);
    throw new FilterInputError(control, message);
  };

  return {
    element,
    clearErrors() {
      for (const control of marked) {
        setFieldError(control, null);
        control.removeAttribute('aria-invalid');
      }
      marked.clear();
    },
    read() {
      const out = {};
      const events = kinds.filter((b) => /** @type {HTMLInputElement} */ (b).checked).map((b) => b.getAttribute('value'));
      if (events.length > 0) out.events = events;
      const columns = /** @type {HTMLInputElement} */ (changed).value
        .split(',')
        .map((c) => c.trim())
        .filter(Boolean);
      if (columns.length > 0) out.changed = columns;
      const where = {};
      for (const line of rows.children) {
        const column = /** @type {HTMLInputElement} */ (line.querySelector('.where-column'));
        const operator = /** @type {HTMLSelectElement} */ (line.querySelector('.where-operator')).value;
        const value = /** @type {HTMLInputElement} */ (line.querySelector('.where-value'));
        const name = column.value.trim();
        if (!name) {
          if (value.value.trim() === '' && operator === 'eq') continue;
          column.setAttribute('aria-invalid', 'true');
          marked.add(column);
          throw new FilterInputError(column, 'Name the column of each condition, or remove the condition.');
        }
        if (name in where) {
          column.setAttribute('aria-invalid', 'true');
          marked.add(column);
          throw new FilterInputError(column, `${name} has two conditions: one a column.`);
        }
        where[name] =
          operator === 'not_null'
            ? { not_null: true }
            : operator === 'in'
              ? { in: value.value.split(',').map((v) => scalarOf(v.trim())) }
              : scalarOf(value.value);
      }
      if (Object.keys(where).length > 0) out.where = where;
      const text = /** @type {HTMLInputElement} */ (rate).value.trim();
      if (text !== '' && !/^\d+$/.test(text)) fail(rate, 'Enter a whole number from 1 to 10,000, or leave it empty.');
      return { filter: Object.keys(out).length > 0 ? out : null, max_per_second: text === '' ? null : Number(text) };
    },
    reset() {
      rows.replaceChildren();
    },
  };
}
