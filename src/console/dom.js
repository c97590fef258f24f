// Small DOM helpers: element building, labelled fields, copy buttons, the status toast.

/**
 * Builds an element. props: attributes; `on…` functions become listeners; `true` and
 * `false` are boolean attributes. Children: nodes, strings, arrays; null/false are skipped.
 * @param {string} tag
 * @param {Record<string, any> | null} [props]
 * @param {...any} children
 * @returns {HTMLElement}
 */
export function h(tag, props, ...children) {
  const el = tag.startsWith('svg:') ? document.createElementNS('http://www.w3.org/2000/svg', tag.slice(4)) : document.createElement(tag);
  for (const [name, value] of Object.entries(props ?? {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith('on') && typeof value === 'function') el.addEventListener(name.slice(2), value);
    else if (name === 'value' && 'value' in el) el.value = value;
    else el.setAttribute(name, value === true ? '' : String(value));
  }
  append(el, children);
  return /** @type {HTMLElement} */ (el);
}

function append(el, children) {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) append(el, child);
    else el.append(child instanceof Node ? child : String(child));
  }
}

let counter = 0;
/** A page-unique id for label/aria wiring. */
export const uid = (prefix = 'f') => `${prefix}-${++counter}`;

/**
 * A labelled form field: the label, the control, an optional hint and an error slot,
 * wired with for/id and aria-describedby so screen readers announce all of it.
 * @param {{label: string, control: HTMLElement, hint?: any}} spec
 */
export function field({ label, control, hint }) {
  const id = control.id || (control.id = uid());
  const hintId = `${id}-hint`;
  const errorId = `${id}-error`;
  control.setAttribute('aria-describedby', hint ? `${hintId} ${errorId}` : errorId);
  const error = h('p', { class: 'field-error', id: errorId, hidden: true });
  const wrapper = h('div', { class: 'field' }, h('label', { for: id }, label), control, hint ? h('p', { class: 'hint', id: hintId }, hint) : null, error);
  return wrapper;
}

/** Shows (or clears, with null) the error of a field made by field(). */
export function setFieldError(control, message) {
  const error = document.getElementById(`${control.id}-error`);
  if (message) control.setAttribute('aria-invalid', 'true');
  else control.removeAttribute('aria-invalid');
  if (error) {
    error.textContent = message ?? '';
    error.hidden = !message;
  }
}

/** A box that screen readers announce at once; kind: error | ok | info. */
export function notice(kind, ...children) {
  return h('div', { class: `notice notice-${kind}`, role: kind === 'error' ? 'alert' : 'status' }, ...children);
}

/** Puts a message into a slot element (replacing what was there); null clears it. */
export function showNotice(slot, kind, message) {
  slot.replaceChildren(...(message ? [notice(kind, message)] : []));
}

export async function copyText(text) {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    // Older browsers, or a page not allowed the clipboard API: the selection way.
    const area = h('textarea', { class: 'offscreen', readonly: true, 'aria-hidden': 'true' });
    area.value = text;
    document.body.append(area);
    area.select();
    const ok = document.execCommand('copy');
    area.remove();
    return ok;
  }
}

/**
 * A copy button with an accessible name ("Copy psql command"); it says "Copied" for a moment.
 * @param {string} what
 * @param {() => string} text
 */
export function copyButton(what, text) {
  const button = h('button', { type: 'button', class: 'copy', 'aria-label': `Copy ${what}` }, 'Copy');
  button.addEventListener('click', async () => {
    const ok = await copyText(text());
    button.textContent = ok ? 'Copied' : 'Copy failed';
    toast(ok ? `Copied ${what}` : `Could not copy ${what}; select it and copy by hand`);
    setTimeout(() => (button.textContent = 'Copy'), 1500);
  });
  return button;
}

/** A read-only value (a URL, a command) with its copy button. */
export function copyable(what, text, shown = text) {
  const code = h('code', { class: 'copyable-text' }, shown);
  return h(
    'div',
    { class: 'copyable' },
    code,
    copyButton(what, () => text),
  );
}

let toastTimer = 0;
/** A short message in the polite live region. */
export function toast(message) {
  const el = document.getElementById('toast');
  if (!el) return;
  el.textContent = message;
  el.classList.add('shown');
  clearTimeout(toastTimer);
  toastTimer = window.setTimeout(() => el.classList.remove('shown'), 3000);
}

/** A <table> with a caption (visible or for screen readers only) and header cells. */
export function table(caption, headers, rows, { captionHidden = false } = {}) {
  return h(
    'div',
    { class: 'table-wrap' },
    h(
      'table',
      null,
      h('caption', { class: captionHidden ? 'sr-only' : null }, caption),
      h(
        'thead',
        null,
        h(
          'tr',
          null,
          headers.map((name) => h('th', { scope: 'col' }, name)),
        ),
      ),
      h('tbody', null, rows),
    ),
  );
}

/**
 * A long name (a table, an object type, an event topic) as text that may wrap after each “_”
 * and “.” (a <wbr> there), so that a narrow column or a phone breaks it between words, never
 * mid-word. The text, and what a reader copies, is unchanged.
 * @param {string} text
 */
export function breakable(text) {
  return String(text)
    .split(/(?<=[._])/)
    .flatMap((part, i) => (i === 0 ? [part] : [h('wbr'), part]));
}

/** A name in code type that wraps only between its words (see breakable). */
export function identifier(text) {
  return h('code', { class: 'identifier' }, breakable(text));
}

/** A table row whose cells carry their column name (the phone layout shows it as a label). */
export function row(headers, cells, props) {
  return h(
    'tr',
    props ?? null,
    cells.map((cell, i) => h(i === 0 ? 'th' : 'td', { 'data-label': headers[i], scope: i === 0 ? 'row' : null }, cell)),
  );
}
