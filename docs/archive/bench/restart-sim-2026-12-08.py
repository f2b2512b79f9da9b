"""Monte Carlo of an API-server restart against 5,000 nodes' Multus daemons (docs/archive/performance.md, "An
API-server restart, second pass", 2026-12-08): each node's HTTP refusals, the server's HTTP tries per second, the
time to both informers' first 200 (a model: not measured; the 410 and the relist after that 200 are alike for all).
t=0: the watches break (both informers try again at once: refused); L: the new server listens (403: its
authorizer not loaded); A: it authorizes (pods served; NADs 429 Retry-After 1 until C); C: the NAD cache ready.
client-go: each informer on its own (reflector backoff, the rest client's Retry-After); ours-old: the same with
1 s doubling +-10%; ours: the gate (informers/retry.ts); poll-1s: a variant not taken. python3 this-file"""
import random, statistics, sys
def backoff(k, r):  # client-go's reflector and ours now: 0.8 s doubling, capped at 30 s, x (1 + U)
    return min(0.8 * 2 ** (k - 1), 30) * (1 + r.random())
def old_backoff(k, r):  # ours before: 1 s doubling to 30 s, x (0.9 + 0.2 U)
    return min(1.0 * 2 ** (k - 1), 30) * (0.9 + 0.2 * r.random())
def answer(res, t, L, A, C):
    if t < L: return 'refused'
    if t < A: return 403
    if res == 'nads' and t < C: return 429
    return 200
def alone(res, t, k, env, r, log, bo):
    """One informer on its own from its try at t (k failures so far): the time of its 200."""
    while True:
        a = answer(res, t, *env)
        if a != 'refused': log.append(t)
        if a == 200: return t
        if a == 429: t += 1.0; continue
        k += 1; t += bo(k, r)
def clientgo(env, r, log, bo=backoff):
    return max(alone('pods', 0, 0, env, r, log, bo), alone('nads', 0, 0, env, r, log, bo))
def poll(env, r, log):
    # a variant not taken: connection refusals polled every 1 s (x 0.9-1.1), HTTP refusals on the backoff, with the gate
    first, second = r.sample(['pods', 'nads'], 2)
    t, k = 0.0, 0
    while answer(first, t, *env) in ('refused', 403):
        if answer(first, t, *env) == 403: log.append(t); k += 1; t += backoff(k, r)
        else: t += 0.9 + 0.2 * r.random()
    t1 = alone(first, t, k, env, r, log, backoff)
    return max(t1, alone(second, t, 0, env, r, log, backoff))
def ours(env, r, log):
    first, second = r.sample(['pods', 'nads'], 2)  # the prober: whichever failed first
    t, k = 0.0, 0
    while answer(first, t, *env) in ('refused', 403):  # the prober's server-wide refusals
        if answer(first, t, *env) == 403: log.append(t)
        k += 1; t += backoff(k, r)
    opened = t  # its first other answer (200 or 429): the gate opens
    t1 = alone(first, t, k, env, r, log, backoff)  # counts that answer
    w = 0.0  # the waiter: its own fallback every 30-60 s while the gate stays shut
    while True:
        w += 30 * (1 + r.random())
        if w >= opened: break
        a = answer(second, w, *env)
        if a != 'refused': log.append(w)
        if a not in ('refused', 403):
            log.pop()  # alone() counts this try again
            return max(t1, alone(second, w, 0, env, r, log, backoff))
    return max(t1, alone(second, opened, 0, env, r, log, backoff))
def run(name, f, env, nodes=5000, seed=7):
    r = random.Random(seed)
    times, reqs, arrivals = [], [], []
    for _ in range(nodes):
        log = []
        times.append(f(env, r, log))
        reqs.append(len(log) - 2)  # refusals answered by HTTP (less each informer's 200)
        arrivals += log
    per_s = {}
    for t in arrivals: per_s[int(t)] = per_s.get(int(t), 0) + 1
    sec = max(per_s, key=per_s.get)
    q = statistics.quantiles(times, n=10)
    L, A, C = env
    print(f"{name:9} L={L:2} A={A:2} C={C:2}: resync median {statistics.median(times):4.1f} s (p10 {q[0]:4.1f}, p90 {q[8]:4.1f});"
          f" HTTP refusals per node {statistics.mean(reqs):.2f}; HTTP tries/s peak {per_s[sec]} (second {sec}),"
          f" mean over [L, L+10) {sum(per_s.get(s, 0) for s in range(L, L + 10)) / 10:.0f}")
for env in [(4, 5, 8), (6, 7, 9), (8, 9, 12), (15, 17, 20)]:
    run('client-go', clientgo, env)
    run('ours-old', lambda env, r, log: clientgo(env, r, log, old_backoff), env)
    run('ours', ours, env)
    run('poll-1s', poll, env)
