/**
 * `--api-latency-ms D` of scenario resident: the Kubernetes modes reach the API server through a TCP proxy that
 * holds every chunk D ms in each direction (a round trip 2D ms longer), as a node's calls meet an API server across
 * a network; loopback has none, so there every request's round trip is nearly free. TLS goes through untouched
 * (the proxy listens on 127.0.0.1, which the API server's certificate names). The proxy is a child process of its
 * own (this file run by node): the bench's timed calls block its event loop.
 */
import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { connect, createServer } from 'node:net';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

/**
 * Starts the proxy to `cl.server` and returns the cluster as the modes see it through it (`server`, a `kubeconfig`
 * copy naming the proxy) and `stop()`. Node's timers have a resolution of 1 ms: D is whole milliseconds.
 */
export async function throughLatency(node, cl, ms, kubeconfigCopy) {
  const target = new URL(cl.server);
  const child = spawn(node, [fileURLToPath(import.meta.url), target.hostname, target.port, String(ms)], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const line = await new Promise((resolve, reject) => {
    createInterface({ input: child.stdout }).once('line', resolve);
    child.once('exit', (code) => reject(new Error(`the latency proxy exited (${code}) before it listened`)));
  });
  const server = `https://127.0.0.1:${JSON.parse(line).port}`;
  writeFileSync(kubeconfigCopy, readFileSync(cl.kubeconfig, 'utf8').replaceAll(cl.server, server));
  return { cl: { ...cl, server, kubeconfig: kubeconfigCopy }, stop: () => child.stdin.end() };
}

/** Every chunk written on after `ms`, in order (timers of one duration fire in the order they were set). */
function relay(from, to, ms) {
  from.on('data', (chunk) => setTimeout(() => to.write(chunk), ms));
  from.on('end', () => setTimeout(() => to.end(), ms));
  from.on('error', () => to.destroy());
}

/** @param {string[]} argv host, port, milliseconds */
function main(argv) {
  const [host, port, delay] = [argv[0], Number(argv[1]), Number(argv[2])];
  const srv = createServer({ noDelay: true }, (client) => {
    const upstream = connect({ host, port, noDelay: true });
    relay(client, upstream, delay);
    relay(upstream, client, delay);
  });
  srv.listen(0, '127.0.0.1', () => {
    const addr = /** @type {import('node:net').AddressInfo} */ (srv.address());
    process.stdout.write(`${JSON.stringify({ port: addr.port })}\n`);
  });
  process.stdin.on('end', () => process.exit(0)).resume();
}

if (process.argv[1] === fileURLToPath(import.meta.url)) main(process.argv.slice(2));
