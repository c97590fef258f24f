import type http from 'node:http';

/** The events port is bound now; the REST interface answers here once it ships. */
export function reservedEventsHandler(): http.RequestListener {
  return (req, res) => {
    const healthy = req.url === '/healthz';
    res.writeHead(healthy ? 200 : 501, { 'content-type': 'application/json' });
    res.end(JSON.stringify(healthy ? { ok: true } : { error: 'the event REST interface is not available in this version', status: 501 }));
  };
}
