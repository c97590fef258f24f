// Moving between the console's pages (hash routes, so the server serves one page).

/** Goes to a page; going to the page already shown renders it afresh. */
export function navigate(hash) {
  if (location.hash === hash) window.dispatchEvent(new HashChangeEvent('hashchange'));
  else location.hash = hash;
}
