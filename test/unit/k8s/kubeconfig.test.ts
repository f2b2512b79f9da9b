/**
 * Tests for src/kubeconfig.ts: the block-style YAML reader against js-yaml (same value, or YamlSubsetError for
 * what it leaves to js-yaml), current-context resolution (token, tokenFile, certificate data and files,
 * relative paths, contexts, client-go's errors for missing or conflicting entries, the fallback marker for
 * exec/auth-provider/proxy-url), file checks, and the in-cluster config from env and a service-account dir.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import yaml from 'js-yaml';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { isDns1123Label, isDns1123Subdomain } from '../../../src/base/names.ts';
import { checkFiles, inClusterConfig, loadKubeconfigFile } from '../../../src/k8s/kubeconfig-files.ts';
import { KubeconfigError, parseServer, resolveKubeconfig, YamlSubsetError } from '../../../src/k8s/kubeconfig.ts';
import { parseKubeconfigText, parseYamlSubset } from '../../../src/k8s/yaml.ts';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'multus-ts-kubeconfig-'));
});
afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});

const CA_B64 = Buffer.from('-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n').toString('base64');

/** Multus' thin_entrypoint kubeconfig. */
const MULTUS_ENTRYPOINT = `# Kubeconfig file for Multus CNI plugin.
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: https://[10.96.0.1]:443
    certificate-authority-data: ${CA_B64}
users:
- name: multus
  user:
    token: "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJtdWx0dXMifQ.c2ln"
contexts:
- name: multus-context
  context:
    cluster: local
    user: multus
current-context: multus-context
`;

/** kubectl's output (yaml.v2): compact sequences, `preferences: {}`, exec args, null env. */
const KUBECTL = `apiVersion: v1
clusters:
- cluster:
    certificate-authority-data: ${CA_B64}
    server: https://127.0.0.1:6443
  name: kind-kind
contexts:
- context:
    cluster: kind-kind
    namespace: default
    user: kind-kind
  name: kind-kind
current-context: kind-kind
kind: Config
preferences: {}
users:
- name: kind-kind
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1beta1
      args:
      - eks
      - get-token
      - --cluster-name
      - 'my cluster'
      command: aws
      env: null
      interactiveMode: IfAvailable
      provideClusterInfo: false
`;

const ODD_BUT_SUPPORTED = [
  "a: 1\nb: -2\nc: 3.5\nd: 1e3\ne: true\nf: False\ng: ~\nh:\ni: null\nj: \"x\\ty\\u00e9\"\nk: 'it''s'\n",
  'list:\n  - a\n  -   b   # comment\n  - "c # not a comment"\n  -\n    nested: 1\n  - - x\n'.replace('  - - x\n', ''),
  'k: v#not-a-comment\nurl: https://[fd00::1]:6443/prefix\nt: abc:def\n',
  '---\n# leading comment\nm:\n    deep:\n        deeper: [] # empty\n    other: {}\n',
  'seq:\n- a: 1\n  b:\n  - x\n  - y\n  c: 2\n- a: 3\n',
  '\uFEFFkey: value\r\nother: "q"\r\n',
  'token: 07401b.f395accd246ae52d\nplain: hello world\nquoted: "123"\n',
];

const UNSUPPORTED = [
  'a: &anchor 1\nb: *anchor\n',
  'a: |\n  block\n  scalar\n',
  'a: >\n  folded\n',
  'a: {b: 1}\n',
  'a: [1, 2]\n',
  'a: plain\n  continued\n',
  'a: "multi\n  line"\n',
  'a: !!str 1\n',
  'a: 1\n---\nb: 2\n',
  'a: 0x1F\n',
  'a: 2024-01-01\n',
  'a: 012\n',
  'a: .inf\n',
  '"quoted key": 1\n',
  '? complex\n: key\n',
  'a:\n\t- tab\n',
  'a: "\\x41"\n',
  'a: 1\na: 2\n',
];

describe('parseYamlSubset', () => {
  it.each([MULTUS_ENTRYPOINT, KUBECTL, ...ODD_BUT_SUPPORTED])('reads what js-yaml reads (%#)', (text) => {
    expect(parseYamlSubset(text)).toEqual(yaml.load(text));
  });

  it.each(UNSUPPORTED)('leaves %j to js-yaml', (text) => {
    expect(() => parseYamlSubset(text)).toThrow(YamlSubsetError);
  });

  it('names the line, never the value, when it gives up', () => {
    try {
      parseYamlSubset('a: 1\ntoken: 0x5EC12\n');
      expect.unreachable();
    } catch (err) {
      expect((err as Error).message).toMatch(/^line 2: /);
      expect((err as Error).message).not.toContain('5EC12');
    }
  });

  it('returns null for an empty or comment-only document', () => {
    expect(parseYamlSubset('')).toBeNull();
    expect(parseYamlSubset('# nothing\n\n')).toBeNull();
  });
});

describe('parseKubeconfigText', () => {
  it('reads JSON kubeconfigs with JSON.parse', () => {
    const doc = { 'current-context': 'c', contexts: [{ name: 'c', context: { cluster: 'k' } }] };
    expect(parseKubeconfigText(JSON.stringify(doc, null, 2))).toEqual(doc);
  });

  it('sends flow-style YAML that is not JSON to the full parser', () => {
    expect(() => parseKubeconfigText('{a: 1}')).toThrow(YamlSubsetError);
  });
});

// ---------------------------------------------------------------------------------------------------------------

interface KcOpts {
  cluster?: Record<string, unknown>;
  user?: Record<string, unknown> | undefined;
  context?: Record<string, unknown>;
  current?: string | undefined;
}

function kubeconfig(o: KcOpts = {}): Record<string, unknown> {
  const user = o.user === undefined ? { token: 'tok' } : o.user;
  return {
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'k', cluster: { server: 'https://127.0.0.1:6443', ...o.cluster } }],
    users: [{ name: 'u', user }],
    contexts: [{ name: 'c', context: { cluster: 'k', user: 'u', ...o.context } }],
    'current-context': 'current' in o ? o.current : 'c',
  };
}

const resolve = (o: KcOpts, path = '/etc/cni/net.d/multus.d/multus.kubeconfig') =>
  resolveKubeconfig(kubeconfig(o), path);

describe('resolveKubeconfig', () => {
  it('follows current-context to its cluster and user (Multus entrypoint file)', () => {
    const cfg = resolveKubeconfig(yaml.load(MULTUS_ENTRYPOINT), '/etc/cni/net.d/multus.d/multus.kubeconfig');
    expect(cfg).toMatchObject({
      source: 'kubeconfig',
      contextName: 'multus-context',
      clusterName: 'local',
      userName: 'multus',
      server: 'https://[10.96.0.1]:443',
      auth: { token: 'eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJtdWx0dXMifQ.c2ln' },
    });
    expect(cfg.tls.caData?.toString()).toContain('BEGIN CERTIFICATE');
    expect(cfg.fallback).toBeUndefined();
  });

  it.each([
    ['token', { token: 't' }, { auth: { token: 't' } }],
    ['tokenFile, relative', { tokenFile: 'sa/token' }, { auth: { tokenFile: '/etc/kube/sa/token' } }],
    ['tokenFile, absolute', { tokenFile: '/run/token' }, { auth: { tokenFile: '/run/token' } }],
    ['basic', { username: 'admin', password: 'pw' }, { auth: { username: 'admin', password: 'pw' } }],
    [
      'cert files, relative',
      { 'client-certificate': 'c.crt', 'client-key': '../k.key' },
      { tls: { certFile: '/etc/kube/c.crt', keyFile: '/etc/k.key' } },
    ],
    ['anonymous', {}, { auth: {} }],
  ])('user: %s', (_name, user, expected) => {
    expect(resolve({ user }, '/etc/kube/config')).toMatchObject(expected);
  });

  it('decodes certificate data fields', () => {
    const cfg = resolve({
      user: { 'client-certificate-data': CA_B64, 'client-key-data': Buffer.from('KEY').toString('base64') },
    });
    expect(cfg.tls.certData?.toString()).toContain('BEGIN CERTIFICATE');
    expect(cfg.tls.keyData?.toString()).toBe('KEY');
  });

  it('resolves the CA file against the kubeconfig directory and keeps tls-server-name', () => {
    const cfg = resolve(
      { cluster: { 'certificate-authority': 'pki/ca.crt', 'tls-server-name': 'kubernetes' } },
      '/etc/kube/config',
    );
    expect(cfg.tls).toEqual({ caFile: '/etc/kube/pki/ca.crt', serverName: 'kubernetes', insecureSkipTlsVerify: false });
  });

  it('picks the current context among several and keeps its namespace', () => {
    const doc = kubeconfig({ current: 'second' });
    (doc.contexts as unknown[]).push({
      name: 'second',
      context: { cluster: 'k', user: 'u', namespace: 'kube-system' },
    });
    expect(resolveKubeconfig(doc, '/x')).toMatchObject({ contextName: 'second', namespace: 'kube-system' });
  });

  it.each([
    ['user.exec', { exec: { command: 'aws', apiVersion: 'client.authentication.k8s.io/v1' } }, {}],
    ['user.auth-provider (oidc)', { 'auth-provider': { name: 'oidc', config: {} } }, {}],
    ['cluster.proxy-url', { token: 't' }, { 'proxy-url': 'socks5://127.0.0.1:1080' }],
  ])('marks %s for the client-node fallback', (reason, user, cluster) => {
    expect(resolve({ user, cluster }).fallback?.reason).toBe(reason);
  });

  it('sends no credentials to an http:// server (client-go: only over TLS), so exec needs no fallback there', () => {
    const cfg = resolve({ cluster: { server: 'http://127.0.0.1:8080' }, user: { token: 't', exec: { command: 'x' } } });
    expect(cfg.auth).toEqual({});
    expect(cfg.fallback).toBeUndefined();
  });

  it('adds the scheme to a server without one as client-go does', () => {
    expect(resolve({ cluster: { server: '10.0.0.1:6443' } }).server).toBe('http://10.0.0.1:6443');
    expect(resolve({ cluster: { server: '10.0.0.1:6443', 'certificate-authority-data': CA_B64 } }).server).toBe(
      'https://10.0.0.1:6443',
    );
    expect(resolve({ cluster: { server: 'https://h/prefix/' } }).server).toBe('https://h/prefix');
  });

  it('keeps impersonation settings', () => {
    const cfg = resolve({
      user: { token: 't', as: 'bob', 'as-groups': ['g1', 'g2'], 'as-user-extra': { scope: ['a'] } },
    });
    expect(cfg.impersonate).toEqual({ user: 'bob', groups: ['g1', 'g2'], extra: { scope: ['a'] } });
  });

  it.each<[string, KcOpts, RegExp]>([
    ['no current-context', { current: undefined }, /current-context is not set/],
    ['unknown context', { current: 'nope' }, /context was not found for specified context: nope/],
    ['unknown cluster', { context: { cluster: 'other' } }, /cluster "other" was not found for context "c"/],
    ['no cluster in context', { context: { cluster: undefined } }, /cluster was not specified for context "c"/],
    ['unknown user', { context: { user: 'ghost' } }, /user "ghost" was not found for context "c"/],
    ['no server', { cluster: { server: '' } }, /no server found for cluster "k"/],
    [
      'CA data and file',
      { cluster: { 'certificate-authority': '/ca', 'certificate-authority-data': CA_B64 } },
      /both specified/,
    ],
    [
      'insecure with CA',
      { cluster: { 'insecure-skip-tls-verify': true, 'certificate-authority': '/ca' } },
      /insecure flag is not allowed/,
    ],
    [
      'cert without key',
      { user: { 'client-certificate': '/c' } },
      /client-key-data or client-key must be specified for u/,
    ],
    [
      'token and basic',
      { user: { token: 't', username: 'a', password: 'b' } },
      /more than one authentication method found for u/,
    ],
    [
      'exec and auth-provider',
      { user: { exec: { command: 'x' }, 'auth-provider': { name: 'oidc' } } },
      /authProvider cannot be provided in combination/,
    ],
    [
      'bad base64',
      { cluster: { 'certificate-authority-data': 'not base64!' } },
      /certificate-authority-data is not valid base64/,
    ],
    ['bad namespace', { context: { namespace: 'Not_A_Label' } }, /does not conform to the kubernetes DNS_LABEL rules/],
    ['not http(s)', { cluster: { server: 'ftp://x' } }, /not an http\(s\) URL/],
    ['token not a string', { user: { token: 42 } }, /user "u": token must be a string/],
    ['groups without user', { user: { 'as-groups': ['g'] } }, /without impersonating a user/],
  ])('refuses: %s', (_name, o, message) => {
    expect(() => resolve(o)).toThrow(KubeconfigError);
    expect(() => resolve(o)).toThrow(message);
  });

  it('refuses documents that are not kubeconfigs', () => {
    expect(() => resolveKubeconfig(null, '/x')).toThrow(/no configuration has been provided/);
    expect(() => resolveKubeconfig({ 'current-context': 'c', contexts: {} }, '/x')).toThrow(/contexts must be a list/);
    expect(() => resolveKubeconfig({ 'current-context': 'c', contexts: [{ name: 'c' }, { name: 'c' }] }, '/x')).toThrow(
      /duplicate name "c"/,
    );
  });

  it('never puts a credential into an error message', () => {
    try {
      resolve({ user: { token: 's3cr3t-token', username: 'admin', password: 'hunter2' } });
      expect.unreachable();
    } catch (err) {
      expect(String(err)).not.toMatch(/s3cr3t|hunter2/);
    }
  });
});

describe('loadKubeconfigFile and checkFiles', () => {
  it('loads YAML and JSON files and checks the files they name', async () => {
    writeFileSync(join(dir, 'token'), 'abc\n');
    writeFileSync(join(dir, 'y.kubeconfig'), MULTUS_ENTRYPOINT.replace(/token: ".*"/, 'tokenFile: token'));
    const y = await loadKubeconfigFile(join(dir, 'y.kubeconfig'));
    expect(y.auth).toEqual({ tokenFile: join(dir, 'token') });
    writeFileSync(join(dir, 'j.kubeconfig'), JSON.stringify(kubeconfig()));
    expect((await loadKubeconfigFile(join(dir, 'j.kubeconfig'))).auth).toEqual({ token: 'tok' });
  });

  it('hands YAML beyond the subset to the injected full parser only', async () => {
    const text = 'anchors: &x {}\n' + MULTUS_ENTRYPOINT.replace('# Kubeconfig', '#');
    writeFileSync(join(dir, 'a.kubeconfig'), text);
    let calls = 0;
    const parseYaml = async (t: string) => {
      calls++;
      return yaml.load(t);
    };
    expect((await loadKubeconfigFile(join(dir, 'a.kubeconfig'), { parseYaml })).userName).toBe('multus');
    writeFileSync(join(dir, 'plain.kubeconfig'), MULTUS_ENTRYPOINT);
    await loadKubeconfigFile(join(dir, 'plain.kubeconfig'), { parseYaml });
    expect(calls).toBe(1);
    await expect(loadKubeconfigFile(join(dir, 'a.kubeconfig'))).rejects.toThrow(YamlSubsetError);
  });

  it.each([
    [
      'certificate-authority',
      { cluster: { 'certificate-authority': 'missing-ca.crt' } },
      /unable to read certificate-authority .*missing-ca.crt for k due to/,
    ],
    [
      'client-cert',
      { user: { 'client-certificate': 'nope.crt', 'client-key': 'nope.key' } },
      /unable to read client-cert .*nope.crt for u/,
    ],
    ['tokenFile', { user: { tokenFile: 'no-token' } }, /unable to read tokenFile .*no-token for u/],
  ])('names an unreadable %s', (_n, o, message) => {
    const cfg = resolveKubeconfig(kubeconfig(o as KcOpts), join(dir, 'config'));
    expect(() => checkFiles(cfg)).toThrow(message);
  });

  it('throws the read error for a missing kubeconfig', async () => {
    await expect(loadKubeconfigFile(join(dir, 'absent'))).rejects.toThrow(/ENOENT/);
  });
});

describe('inClusterConfig', () => {
  function serviceAccount(files: Record<string, string>): string {
    const sa = join(dir, 'sa');
    mkdirSync(sa, { recursive: true });
    for (const [name, content] of Object.entries(files)) writeFileSync(join(sa, name), content);
    return sa;
  }

  it('is undefined unless both KUBERNETES_SERVICE_HOST and _PORT are set', () => {
    const sa = serviceAccount({ token: 't' });
    expect(inClusterConfig({}, sa)).toBeUndefined();
    expect(inClusterConfig({ KUBERNETES_SERVICE_HOST: '10.96.0.1' }, sa)).toBeUndefined();
    expect(inClusterConfig({ KUBERNETES_SERVICE_HOST: '', KUBERNETES_SERVICE_PORT: '443' }, sa)).toBeUndefined();
  });

  it('builds https://host:port with the token file, CA and namespace of the service account', () => {
    const sa = serviceAccount({ token: 't\n', 'ca.crt': 'PEM', namespace: 'kube-system\n' });
    const got = inClusterConfig({ KUBERNETES_SERVICE_HOST: '10.96.0.1', KUBERNETES_SERVICE_PORT: '443' }, sa);
    expect(got?.warnings).toEqual([]);
    expect(got?.config).toMatchObject({
      source: 'in-cluster',
      server: 'https://10.96.0.1:443',
      namespace: 'kube-system',
      auth: { tokenFile: join(sa, 'token') },
      tls: { caFile: join(sa, 'ca.crt'), insecureSkipTlsVerify: false },
    });
  });

  it('brackets an IPv6 host, warns without a CA, and fails without a token', () => {
    const sa = serviceAccount({ token: 't' });
    const got = inClusterConfig({ KUBERNETES_SERVICE_HOST: 'fd00::1', KUBERNETES_SERVICE_PORT: '443' }, sa);
    expect(got?.config.server).toBe('https://[fd00::1]:443');
    expect(got?.config.tls.caFile).toBeUndefined();
    expect(got?.warnings[0]).toMatch(/Expected to load root CA config from .*ca.crt/);
    expect(() =>
      inClusterConfig({ KUBERNETES_SERVICE_HOST: 'h', KUBERNETES_SERVICE_PORT: '1' }, join(dir, 'none')),
    ).toThrow(/ENOENT/);
    expect(() => inClusterConfig({ KUBERNETES_SERVICE_HOST: 'a/b', KUBERNETES_SERVICE_PORT: '443' }, sa)).toThrow(
      /do not form a URL/,
    );
  });
});

describe('parseServer', () => {
  it.each([
    ['https://[10.96.0.1]:443', { protocol: 'https:', hostname: '10.96.0.1', port: 443, pathPrefix: '' }],
    ['https://[fd00::1]:6443/', { protocol: 'https:', hostname: 'fd00::1', port: 6443, pathPrefix: '' }],
    ['http://127.0.0.1', { protocol: 'http:', hostname: '127.0.0.1', port: 80, pathPrefix: '' }],
    [
      'HTTPS://api.example.com/k8s/clusters/c-1',
      { protocol: 'https:', hostname: 'api.example.com', port: 443, pathPrefix: '/k8s/clusters/c-1' },
    ],
  ])('reads %s as Go url.Parse does', (server, expected) => {
    expect(parseServer(server)).toEqual(expected);
  });

  it.each(['https://', 'https://h:99999', 'https://user@h', 'https://h?x=1', 'ftp://h', 'h:443'])(
    'refuses %s',
    (server) => {
      expect(parseServer(server)).toBeUndefined();
    },
  );
});

describe('DNS-1123 names', () => {
  it.each([
    ['default', true, true],
    ['kube-system', true, true],
    ['a.b', false, true],
    ['Upper', false, false],
    ['-lead', false, false],
    ['', false, false],
    ['x'.repeat(64), false, true],
    ['../etc', false, false],
    ['a/b', false, false],
  ])('%j label=%s subdomain=%s', (name, label, subdomain) => {
    expect(isDns1123Label(name)).toBe(label);
    expect(isDns1123Subdomain(name)).toBe(subdomain);
  });
});
