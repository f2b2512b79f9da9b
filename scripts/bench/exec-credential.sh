#!/bin/sh
# A client-go "exec" credential plugin for the bench's kubernetes_exec_auth figures (scripts/bench/k8s-cluster.ts
# writes the kubeconfig that runs it as `/bin/sh <this file>`, so it needs no exec bit). Prints the multus
# service-account token read from $MULTUS_BENCH_TOKEN_FILE as an ExecCredential, without expirationTimestamp
# (as the example). With $MULTUS_BENCH_EXEC_COUNT_FILE set, appends one line per run (an untimed check
# of how often the client runs the plugin).
set -e
token=$(cat "$MULTUS_BENCH_TOKEN_FILE")
[ -z "$MULTUS_BENCH_EXEC_COUNT_FILE" ] || echo run >>"$MULTUS_BENCH_EXEC_COUNT_FILE"
printf '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"%s"}}\n' "$token"
