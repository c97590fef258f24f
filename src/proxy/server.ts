import type http from 'node:http';

/**
 * The proxy port is bound now so that deployments and health checks can rely on it;
 * the write-through proxy itself answers here once it ships.
 */
export function reservedProxyHandler(): http.RequestListener {
  return (req, res) => {
    const healthy = req.url === '/healthz';
    res.writeHead(healthy ? 200 : 501, { 'content-type': 'application/json' });
    res.end(
      JSON.stringify(
        healthy
          ? { ok: true }
          : { error: { source: 'proxy', code: 'not_implemented', message: 'the write-through proxy is not available in this version' } },
      ),
    );
  };
}
