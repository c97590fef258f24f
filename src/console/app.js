// The console: a hash router over a handful of views, the header, sign-in and sign-out.

import { ApiError, currentSession, signOut, whenSessionEnds } from './api.js';
import { h, notice, toast } from './dom.js';
import { accountsView } from './views/accounts.js';
import { connectView } from './views/connect.js';
import { signInView } from './views/signin.js';
import { syncView } from './views/sync.js';
import { syncsView } from './views/syncs.js';

/**
 * What a view is handed.
 * @typedef {{
 *   root: HTMLElement,
 *   params: string[],
 *   principal: any,
 *   every: (ms: number, fn: () => Promise<void> | void) => void,
 *   onLeave: (fn: () => void) => void,
 *   title: (text: string) => void,
 *   alive: () => boolean,
 * }} ViewContext
 */

const routes = [
  { path: /^\/?$/, view: syncsView },
  { path: /^\/connect$/, view: connectView },
  { path: /^\/accounts$/, view: accountsView },
  { path: /^\/syncs\/([A-Za-z0-9_]+)(?:\/(overview|connect|settings|webhooks|backfills|delete))?$/, view: syncView },
];

const main = /** @type {HTMLElement} */ (document.getElementById('main'));
const top = /** @type {HTMLElement} */ (document.getElementById('top'));

/** @type {any} */
let principal;
let generation = 0;
/** @type {Array<() => void>} */
let leaving = [];
let firstRender = true;

function header() {
  const links = principal ? [['#/', 'Syncs'], ['#/connect', 'Connect a sync'], ...(principal.kind === 'admin' ? [['#/accounts', 'Accounts']] : [])] : [];
  const current = location.hash.replace(/^#/, '') || '/';
  const who = principal ? (principal.kind === 'admin' ? 'operator (all accounts)' : principal.account.name) : null;
  const parts = [
    h('a', { class: 'brand', href: '#/' }, 'Tributary'),
    links.length
      ? h(
          'nav',
          { 'aria-label': 'Main' },
          h(
            'ul',
            null,
            links.map(([href, text]) => h('li', null, h('a', { href, 'aria-current': href.slice(1) === current ? 'page' : null }, text))),
          ),
        )
      : null,
    who
      ? h(
          'div',
          { class: 'who' },
          h('span', null, 'Signed in as ', h('strong', null, who)),
          h('button', { type: 'button', class: 'secondary', onclick: doSignOut }, 'Sign out'),
        )
      : null,
  ];
  top.replaceChildren(...parts.filter((part) => part !== null));
}

async function doSignOut() {
  try {
    await signOut();
  } catch (error) {
    toast(`Sign-out failed: ${error instanceof Error ? error.message : error}`);
    return;
  }
  principal = null;
  history.replaceState(null, '', '#/');
  await render();
  toast('Signed out');
}

export async function render() {
  const mine = ++generation;
  for (const fn of leaving) fn();
  leaving = [];
  if (principal === undefined) {
    try {
      principal = await currentSession();
    } catch (error) {
      main.replaceChildren(notice('error', `The console could not start: ${error instanceof Error ? error.message : error}`));
      return;
    }
  }
  header();
  const root = h('div', { class: 'view' });
  /** @type {ViewContext} */
  const ctx = {
    root,
    params: [],
    principal,
    alive: () => mine === generation,
    every(ms, fn) {
      let busy = false;
      const timer = setInterval(async () => {
        if (busy || document.hidden || mine !== generation) return;
        busy = true;
        try {
          await fn();
        } finally {
          busy = false;
        }
      }, ms);
      leaving.push(() => clearInterval(timer));
    },
    onLeave(fn) {
      leaving.push(fn);
    },
    title(text) {
      document.title = `${text} · Tributary console`;
    },
  };
  main.replaceChildren(root);
  try {
    if (!principal) {
      await signInView(ctx, async (signedIn) => {
        principal = signedIn;
        await render();
      });
    } else {
      const path = location.hash.replace(/^#/, '') || '/';
      const route = routes.find((r) => r.path.test(path));
      if (!route) {
        ctx.title('Not found');
        root.append(h('h1', { tabindex: '-1' }, 'Page not found'), h('p', null, h('a', { href: '#/' }, 'Back to the syncs')));
      } else {
        ctx.params = /** @type {string[]} */ (route.path.exec(path)).slice(1);
        await route.view(ctx);
      }
    }
  } catch (error) {
    if (mine !== generation) return;
    // Whatever went wrong is said on the page, never a blank one.
    const message = error instanceof ApiError || error instanceof Error ? error.message : String(error);
    root.append(notice('error', message));
  }
  if (mine !== generation) return;
  if (firstRender) {
    firstRender = false;
    performance.mark('console-first-render');
  } else {
    // A new page: put the keyboard and screen-reader focus on its heading.
    const heading = root.querySelector('h1');
    if (heading) {
      heading.setAttribute('tabindex', '-1');
      heading.focus();
    }
  }
}

whenSessionEnds(() => {
  if (!principal) return;
  principal = null;
  render().then(() => toast('Your session has ended; sign in again'));
});

window.addEventListener('hashchange', () => render());
// The skip link moves focus without touching the route.
document.querySelector('.skip')?.addEventListener('click', (event) => {
  event.preventDefault();
  main.focus();
});
render();
